"""SynopsisStore through LangGraph's own API, on every synopsis backend: the behaviours of our
store conformance suite (round trips, paging, prefixes, filters, TTL, CJK-aware recall, vector
search, tenant isolation), as a LangGraph graph sees them.

Each test runs per backend and per flavor: ``sync`` (a sync store, LangGraph's sync methods,
``batch``), ``async`` (an async store, the ``a*`` methods, ``abatch``) and ``thread`` (a sync
store behind the ``a*`` methods: ``abatch`` runs ``batch`` in a worker thread).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from synopsis.adapters._langgraph_items import VALUE_TAG
from synopsis.adapters.langgraph import SynopsisStore
from synopsis.errors import ConfigError, InvalidInput, SynopsisError
from synopsis.memory import InMemoryStore
from synopsis.testing import BigramEmbedder, FakeClock
from tests.conformance.conftest import BACKENDS, StoreContext

A, B = "tenant-a", "tenant-b"
NS = ("user", "u1", "memories")


class Graph:
    """One awaitable face over a SynopsisStore: its sync methods, or its ``a*`` twins."""

    def __init__(self, store: SynopsisStore, flavor: str) -> None:
        self.store = store
        self.flavor = flavor

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if self.flavor != "sync":
            return getattr(self.store, "a" + name)  # type: ignore[no-any-return]
        method = getattr(self.store, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return call


@pytest.fixture(params=[pytest.param(name, marks=b.marks) for name, b in BACKENDS.items()])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["sync", "async", "thread"])
def flavor(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def graph_store(
    request: pytest.FixtureRequest, backend: str, flavor: str, tmp_path: Path, clock: FakeClock
) -> AsyncIterator[Callable[..., Graph]]:
    """``make(tenant, embedder=None, **options)``: a SynopsisStore in ``tenant``; every one made
    in a test (with the same embedder) wraps the same synopsis store."""
    spec = BACKENDS[backend]
    raws: dict[int, Any] = {}

    def make(tenant: str = A, *, embedder: Any = None, **options: Any) -> Graph:
        if id(embedder) not in raws:
            ctx = StoreContext(request=request, tmp_path=tmp_path, clock=clock, embedder=embedder)
            factory = spec.async_ if flavor == "async" else spec.sync
            raws[id(embedder)] = factory(ctx)
        return Graph(SynopsisStore(raws[id(embedder)], tenant=tenant, **options), flavor)

    yield make
    for raw in raws.values():
        if flavor == "async":
            await raw.aclose()
        else:
            raw.close()


@pytest.fixture
def store(graph_store: Callable[..., Graph]) -> Graph:
    return graph_store()


def at(clock: FakeClock) -> datetime:
    return datetime.fromtimestamp(clock.now, tz=UTC)


async def keys(store: Graph, prefix: tuple[str, ...] = (), **kwargs: Any) -> list[str]:
    return [item.key for item in await store.search(prefix, **kwargs)]


# --- put / get / delete --------------------------------------------------------------------------


VALUE = {
    "text": "用户喜欢手冲咖啡",
    "color": "red",
    "n": 3,
    "ratio": 0.5,
    "ok": True,
    "none": None,
    "list": [1, "two", {"three": 3}],
    "nested": {"a": {"b": "c"}},
    "nul": "a\x00b",
}


async def test_put_then_get_round_trips_the_value_exactly(store: Graph, clock: FakeClock) -> None:
    """Any JSON value comes back equal (types, nesting, NUL inside a string), with times."""
    await store.put(NS, "k1", VALUE)
    item = await store.get(NS, "k1")
    assert isinstance(item, Item)
    assert item.value == VALUE and item.key == "k1" and item.namespace == NS
    assert item.created_at == item.updated_at == at(clock)


async def test_put_replaces_keeping_created_at(store: Graph, clock: FakeClock) -> None:
    await store.put(NS, "k", {"v": 1})
    created = at(clock)
    clock.advance(5)
    await store.put(NS, "k", {"v": 2})
    item = await store.get(NS, "k")
    assert item.value == {"v": 2} and item.created_at == created and item.updated_at == at(clock)


async def test_get_missing_is_none_and_delete_removes(store: Graph) -> None:
    assert await store.get(NS, "missing") is None
    await store.put(NS, "k", {"v": 1})
    await store.delete(NS, "k")
    await store.delete(NS, "k")  # deleting what is gone is fine
    assert await store.get(NS, "k") is None
    assert await keys(store) == []


async def test_a_value_that_is_not_json_is_refused(store: Graph) -> None:
    with pytest.raises(InvalidInput, match="JSON"):
        await store.put(NS, "k", {"when": datetime.now(UTC)})


async def test_langgraphs_own_namespace_rules_hold(store: Graph) -> None:
    """LangGraph refuses dotted labels and empty namespaces before the store sees them."""
    with pytest.raises(InvalidNamespaceError):
        await store.put(("a.b",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        await store.put((), "k", {"v": 1})


# --- search: paging, prefixes, filters -----------------------------------------------------------


async def test_no_query_lists_newest_first_and_pages(store: Graph, clock: FakeClock) -> None:
    for number in range(12):
        await store.put(NS, f"k{number:02}", {"n": number})
        clock.advance(1)
    newest_first = [f"k{n:02}" for n in reversed(range(12))]
    assert await keys(store, limit=20) == newest_first
    assert await keys(store, limit=5, offset=5) == newest_first[5:10]
    assert await keys(store, limit=5, offset=10) == newest_first[10:]
    assert await keys(store, limit=0) == []
    items = await store.search(NS)
    assert len(items) == 10 and all(item.score is None for item in items)


async def test_prefix_matches_whole_labels(store: Graph) -> None:
    await store.put(("user", "u1"), "a", {"v": 1})
    await store.put(("user", "u10"), "b", {"v": 2})
    await store.put(("user", "u1", "deep"), "c", {"v": 3})
    assert sorted(await keys(store, ("user", "u1"))) == ["a", "c"]
    assert sorted(await keys(store)) == ["a", "b", "c"]


async def test_filters_have_langgraphs_semantics(store: Graph) -> None:
    """Exact matches, ``$eq``/``$ne``/``$gt``/``$gte``/``$lt``/``$lte``, nested objects."""
    for number in range(6):
        value = {"n": number, "parity": "even" if number % 2 == 0 else "odd", "m": {"x": number}}
        await store.put(NS, f"k{number}", value)

    async def found(conditions: dict[str, Any]) -> list[str]:
        return sorted(await keys(store, filter=conditions, limit=50))

    assert await found({"parity": "even"}) == ["k0", "k2", "k4"]
    assert await found({"parity": {"$eq": "odd"}}) == ["k1", "k3", "k5"]
    assert await found({"parity": {"$ne": "odd"}}) == ["k0", "k2", "k4"]
    assert await found({"n": {"$gt": 3}}) == ["k4", "k5"]
    assert await found({"n": {"$gte": 3, "$lt": 5}}) == ["k3", "k4"]
    assert await found({"n": {"$lte": 1}, "parity": "odd"}) == ["k1"]
    assert await found({"m": {"x": 2}}) == ["k2"]
    assert await found({"n": 4}) == ["k4"]
    assert await found({"missing": {"$gt": 1}}) == []


async def test_filtered_pages_are_pages_of_the_matches(store: Graph, clock: FakeClock) -> None:
    """limit/offset count matching items only, whether a filter runs in the store or here."""
    for number in range(30):
        await store.put(NS, f"k{number:02}", {"n": number, "parity": ("even", "odd")[number % 2]})
        clock.advance(1)
    evens = [f"k{n:02}" for n in reversed(range(0, 30, 2))]
    assert await keys(store, filter={"parity": "even"}, limit=4, offset=3) == evens[3:7]
    big = [f"k{n:02}" for n in reversed(range(20, 30))]
    assert await keys(store, filter={"n": {"$gte": 20}}, limit=4, offset=8) == big[8:]


async def test_an_unknown_operator_is_refused(store: Graph) -> None:
    await store.put(NS, "k", {"n": 1})
    with pytest.raises(InvalidInput, match=r"\$near"):
        await store.search(NS, filter={"n": {"$near": 1}})


# --- query: keyword recall -----------------------------------------------------------------------


DOCS = {
    "coffee": "用户说他每天早上都喜欢喝一杯咖啡，但是下午不喝",
    "tea": "这位客户不喜欢咖啡因，所以平时只喝绿茶和乌龙茶",
    "pg": "团队决定把 PostgreSQL 数据库 升级到 16 版本",
    "painting": "She spent the weekend painting the kitchen walls",
}


@pytest.fixture
async def seeded(graph_store: Callable[..., Graph]) -> Graph:
    store = graph_store(A)
    for key, text in DOCS.items():
        await store.put(NS, key, {"text": text, "source": "chat"})
    await graph_store(B).put(NS, "decoy", {"text": "咖啡 茶 PostgreSQL 数据库 paint"})
    return store


async def test_query_recalls_chinese_and_stemmed_english(seeded: Graph) -> None:
    """CJK-aware BM25 through ``search(query=...)``: only items sharing a term, best first."""
    assert set(await keys(seeded, query="咖啡")) == {"coffee", "tea"}
    assert await keys(seeded, query="茶") == ["tea"]
    assert (await keys(seeded, query="用户喜欢喝什么咖啡？"))[0] == "coffee"
    assert (await keys(seeded, query="PostgreSQL 数据库"))[0] == "pg"
    assert await keys(seeded, query="paints") == ["painting"]
    assert await keys(seeded, query="火箭发射") == []
    scores = [item.score for item in await seeded.search((), query="咖啡")]
    assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)


async def test_query_and_filter_together(seeded: Graph) -> None:
    await seeded.put(NS, "other", {"text": "咖啡 咖啡 咖啡", "source": "import"})
    assert set(await keys(seeded, query="咖啡", filter={"source": "chat"})) == {"coffee", "tea"}


async def test_index_picks_the_searched_fields(store: Graph) -> None:
    """``index=["title"]`` searches the title only; ``index=False`` no text at all (the item
    is still listed and filtered)."""
    await store.put(NS, "a", {"title": "kitchen walls", "body": "weekend"}, index=["title"])
    await store.put(NS, "b", {"title": "weekend plans"}, index=False)
    assert await keys(store, query="weekend") == []
    assert await keys(store, query="kitchen") == ["a"]
    assert await keys(store, filter={"title": "weekend plans"}) == ["b"]


async def test_fields_set_the_default_index(graph_store: Callable[..., Graph]) -> None:
    store = graph_store(A, fields=["memory"])
    await store.put(NS, "a", {"memory": "likes tea", "note": "coffee"})
    assert await keys(store, query="coffee") == [] and await keys(store, query="tea") == ["a"]


async def test_vector_search_with_an_embedder(graph_store: Callable[..., Graph]) -> None:
    """``mode="vector"`` ranks by the store's embedder: a near spelling still finds the item."""
    store = graph_store(A, embedder=BigramEmbedder(), mode="vector")
    await store.put(NS, "walls", {"text": "painting the kitchen walls"})
    await store.put(NS, "deploy", {"text": "the deployment pipeline failed"})
    assert (await keys(store, query="kitchen wall paint"))[0] == "walls"


# --- namespaces ----------------------------------------------------------------------------------


async def test_list_namespaces_with_prefix_suffix_wildcards_depth_and_paging(store: Graph) -> None:
    for namespace in [("a", "x", "v1"), ("a", "y", "v2"), ("b", "x", "v1"), ("b",), ("c", "z")]:
        await store.put(namespace, "k", {"v": 1})
    assert await store.list_namespaces() == [
        ("a", "x", "v1"), ("a", "y", "v2"), ("b",), ("b", "x", "v1"), ("c", "z"),
    ]  # fmt: skip
    assert await store.list_namespaces(prefix=("a",)) == [("a", "x", "v1"), ("a", "y", "v2")]
    assert await store.list_namespaces(suffix=("v1",)) == [("a", "x", "v1"), ("b", "x", "v1")]
    assert await store.list_namespaces(prefix=("*", "x")) == [("a", "x", "v1"), ("b", "x", "v1")]
    assert await store.list_namespaces(prefix=("a",), suffix=("v2",)) == [("a", "y", "v2")]
    assert await store.list_namespaces(max_depth=1) == [("a",), ("b",), ("c",)]
    assert await store.list_namespaces(suffix=("*",), max_depth=2, limit=2, offset=1) == [
        ("a", "y"), ("b",),
    ]  # fmt: skip
    assert await store.list_namespaces(limit=2, offset=2) == [("b",), ("b", "x", "v1")]


# --- TTL -----------------------------------------------------------------------------------------


async def test_ttl_is_in_minutes_and_counts_from_the_last_write(
    store: Graph, clock: FakeClock
) -> None:
    await store.put(NS, "short", {"v": 1}, ttl=1)
    await store.put(NS, "long", {"v": 2}, ttl=10)
    clock.advance(59)
    assert await store.get(NS, "short") is not None  # a read does not refresh
    clock.advance(2)
    assert await store.get(NS, "short") is None
    assert await keys(store) == ["long"]
    assert await store.list_namespaces() == [NS]
    clock.advance(600)
    assert await keys(store) == [] and await store.list_namespaces() == []


async def test_default_ttl_from_the_ttl_config(
    graph_store: Callable[..., Graph], clock: FakeClock
) -> None:
    store = graph_store(A, ttl={"default_ttl": 2})
    assert store.store.supports_ttl and store.store.ttl_config == {
        "default_ttl": 2, "refresh_on_read": False,
    }  # fmt: skip
    await store.put(NS, "k", {"v": 1})
    await store.put(NS, "forever", {"v": 1}, ttl=None)
    clock.advance(121)
    assert await keys(store) == ["forever"]


def test_refresh_on_read_and_unknown_ttl_options_are_refused() -> None:
    with pytest.raises(ConfigError, match="refresh_on_read"):
        SynopsisStore(InMemoryStore(), tenant=A, ttl={"refresh_on_read": True})
    with pytest.raises(ConfigError, match="sweep_interval_minutes"):
        SynopsisStore(InMemoryStore(), tenant=A, ttl={"sweep_interval_minutes": 5})


# --- batches -------------------------------------------------------------------------------------


async def test_a_batch_runs_its_ops_in_order(store: Graph) -> None:
    """One ``batch``/``abatch`` of every op type: each result in its place, in op order."""
    results = await store.batch(
        [
            PutOp(NS, "a", {"text": "咖啡"}),
            PutOp(NS, "b", {"text": "tea"}),
            GetOp(NS, "a"),
            SearchOp(("user",), query="咖啡"),
            PutOp(NS, "a", None),
            GetOp(NS, "a"),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("user",)),)),
        ]
    )
    assert results[:2] == [None, None]
    assert results[2].value == {"text": "咖啡"}
    assert [item.key for item in results[3]] == ["a"]
    assert results[4:6] == [None, None]
    assert results[6] == [NS]


# --- tenants -------------------------------------------------------------------------------------


async def test_two_tenants_over_one_store_never_see_each_other(
    graph_store: Callable[..., Graph],
) -> None:
    a, b = graph_store(A), graph_store(B)
    await a.put(NS, "k", {"text": "coffee public 咖啡", "t": "public"})
    await b.put(NS, "k", {"text": "coffee secret 咖啡", "t": "secret"})
    await b.put(("only", "b"), "x", {"text": "secret"})
    assert (await a.get(NS, "k")).value["t"] == "public"
    assert [i.value["t"] for i in await a.search((), query="coffee 咖啡 secret")] == ["public"]
    assert await a.search((), filter={"t": "secret"}) == []
    assert await a.list_namespaces() == [NS]
    await a.delete(("only", "b"), "x")
    await a.delete(NS, "k")
    assert (await b.get(("only", "b"), "x")) is not None
    assert (await b.get(NS, "k")).value["t"] == "secret"


ATTACKS = ["%", "_", "'", '"', "\\", "' OR 1=1 --", "*", "coffee*", "咖啡' OR 1=1 --", "\x00", ""]


@pytest.mark.parametrize("attack", ATTACKS)
async def test_attack_strings_never_cross_tenants(
    graph_store: Callable[..., Graph], attack: str
) -> None:
    """Hostile labels, keys, queries and filters only ever reach tenant A's items, or fail
    with our error (or LangGraph's, for labels it refuses)."""
    a, b = graph_store(A), graph_store(B)
    await a.put(("user", "u1"), "k", {"text": "coffee public", "t": "public"})
    await b.put(("user", "u1"), "k", {"text": "coffee secret", "t": "secret"})
    calls = [
        a.get(("user", attack), attack),
        a.search(("user", attack)),
        a.search((), query=f"coffee {attack}"),
        a.search((), filter={"t": attack, attack: "secret"}),
        a.list_namespaces(prefix=(attack,)),
        a.put(("user", attack), attack, {"t": attack}),
        a.delete(("user", "u1"), attack),
    ]
    for call in calls:
        try:
            result = await call
        except (SynopsisError, InvalidNamespaceError):
            continue
        items = result if isinstance(result, list) else [result]
        assert all("secret" not in str(getattr(item, "value", item)) for item in items)
    assert (await b.get(("user", "u1"), "k")).value["t"] == "secret"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from([A, B]),
            st.sampled_from([("user", "u1"), ("user", "u2"), ("team",)]),
            st.sampled_from(["k1", "k2", "k3"]),
        ),
        max_size=20,
    )
)
def test_random_writes_never_cross_tenants(writes: list[tuple[str, tuple[str, ...], str]]) -> None:
    """Whatever two tenants write, each tenant reads back exactly its own last writes."""
    raw = InMemoryStore()
    stores = {tenant: SynopsisStore(raw, tenant=tenant) for tenant in (A, B)}
    expected: dict[str, dict[tuple[tuple[str, ...], str], int]] = {A: {}, B: {}}
    for number, (tenant, namespace, key) in enumerate(writes):
        stores[tenant].put(namespace, key, {"tenant": tenant, "n": number})
        expected[tenant][(namespace, key)] = number
    for tenant, store in stores.items():
        found = {(i.namespace, i.key): i.value for i in store.search((), limit=100)}
        assert found == {k: {"tenant": tenant, "n": n} for k, n in expected[tenant].items()}


# --- memories synopsis wrote ---------------------------------------------------------------------


async def test_synopsis_memories_are_visible_with_text_kind_and_tags(
    graph_store: Callable[..., Graph],
) -> None:
    """A session summary synopsis stored (no LangGraph value) reads as text, kind and tags,
    and its tags filter like fields."""
    store = graph_store(A)
    raw = store.store.store
    summary = ("user", "u1", "session", "s1")
    tags = {"source": "session_summary", "session_id": "s1"}
    written = raw.put(A, summary, "summary-v1", "用户在调试飞书推送", kind="summary", tags=tags)
    if store.flavor == "async":
        await written
    item = await store.get(summary, "summary-v1")
    assert item.value == {**tags, "text": "用户在调试飞书推送", "kind": "summary"}
    assert await keys(store, ("user", "u1"), filter={"source": "session_summary"}) == ["summary-v1"]
    assert await keys(store, ("user", "u1"), filter={"kind": "summary"}, query="飞书") == [
        "summary-v1"
    ]


async def test_values_are_stored_as_searchable_text_and_a_json_tag(
    graph_store: Callable[..., Graph],
) -> None:
    store = graph_store(A, kind="fact")
    await store.put(NS, "k", {"text": "likes tea", "color": "red", "n": 3})
    raw = store.store.store
    memory = raw.get(A, NS, "k")
    memory = await memory if store.flavor == "async" else memory
    assert memory.kind == "fact" and memory.text == "likes tea\nred\n3"
    assert memory.tags["color"] == "red" and VALUE_TAG in memory.tags


# --- wiring --------------------------------------------------------------------------------------


def test_an_async_store_refuses_the_sync_api_by_name() -> None:
    from synopsis.memory import AsyncInMemoryStore

    store = SynopsisStore(AsyncInMemoryStore(), tenant=A)
    with pytest.raises(ConfigError, match="async API"):
        store.get(NS, "k")


def test_bad_construction_is_refused() -> None:
    with pytest.raises(ConfigError, match="memory store"):
        SynopsisStore({}, tenant=A)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="tenant"):
        SynopsisStore(InMemoryStore(), tenant="")
    with pytest.raises(ConfigError, match="kind"):
        SynopsisStore(InMemoryStore(), tenant=A, kind="")
    with pytest.raises(ConfigError, match="mode"):
        SynopsisStore(InMemoryStore(), tenant=A, mode="semantic")  # type: ignore[arg-type]


class State(TypedDict):
    topic: str
    found: list[str]


def remember(state: State, runtime: Runtime[None]) -> dict[str, Any]:
    assert runtime.store is not None
    runtime.store.put(("user", "u1"), state["topic"], {"text": f"notes on {state['topic']}"})
    return {"found": [item.key for item in runtime.store.search(("user",), query="notes")]}


async def aremember(state: State, runtime: Runtime[None]) -> dict[str, Any]:
    assert runtime.store is not None
    await runtime.store.aput(("user", "u1"), state["topic"], {"text": f"notes on {state['topic']}"})
    return {"found": [i.key for i in await runtime.store.asearch(("user",), query="notes")]}


def test_a_compiled_graph_uses_it_as_its_store() -> None:
    """A StateGraph compiled with ``store=SynopsisStore(...)`` reads and writes through it."""
    store: BaseStore = SynopsisStore(InMemoryStore(), tenant=A)
    graph = StateGraph(State).add_node("remember", remember)
    app = graph.add_edge(START, "remember").add_edge("remember", END).compile(store=store)
    assert app.invoke({"topic": "咖啡", "found": []})["found"] == ["咖啡"]
    assert sorted(app.invoke({"topic": "tea", "found": []})["found"]) == ["tea", "咖啡"]


async def test_a_compiled_graph_uses_an_async_store_from_async_nodes() -> None:
    from synopsis.memory import AsyncInMemoryStore

    store = SynopsisStore(AsyncInMemoryStore(), tenant=A)
    graph = StateGraph(State).add_node("remember", aremember)
    app = graph.add_edge(START, "remember").add_edge("remember", END).compile(store=store)
    assert (await app.ainvoke({"topic": "咖啡", "found": []}))["found"] == ["咖啡"]
