"""The MemoryStore contract, on every backend, sync and async."""

from __future__ import annotations

import asyncio
import inspect
import sqlite3
import threading
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from synopsis.errors import ConfigError, InvalidInput, InvalidNamespace, MigrationError, StoreError
from synopsis.memory._types import (
    AsyncMemoryStore,
    AsyncSummaryStore,
    MemoryStore,
    NewMemory,
    SummaryStore,
    normalize_namespace,
)
from synopsis.testing import AsymmetricEmbedder, BigramEmbedder, FakeClock

from .conftest import PERSISTENT, SQLITE, Store, db_path

T = "tenant-a"
NS = ("user", "u1", "session", "s1")


def at(clock: FakeClock) -> datetime:
    return datetime.fromtimestamp(clock.now, tz=UTC)


async def keys(store: Store, *args: object, **kwargs: object) -> list[str]:
    return [hit.item.key for hit in await store.search(*args, **kwargs)]


# --- shape ------------------------------------------------------------------------------------


async def test_store_satisfies_both_protocols(store: Store) -> None:
    """Every backend is a memory store and a summary store of its flavor."""
    if store.flavor == "sync":
        assert isinstance(store.raw, MemoryStore)
        assert isinstance(store.raw, SummaryStore)
    else:
        assert isinstance(store.raw, AsyncMemoryStore)
        assert isinstance(store.raw, AsyncSummaryStore)


async def test_only_the_async_twin_has_coroutine_methods(store: Store) -> None:
    """Each contract method is a coroutine function on the async store, a plain one on the sync."""
    names = {name for name in [*dir(MemoryStore), *dir(SummaryStore)] if name[0] != "_"}
    for name in names - {"close", "embedder_id"}:  # embedder_id: a property on both twins
        method = getattr(store.raw, name)
        assert inspect.iscoroutinefunction(method) is (store.flavor == "async"), name


async def test_every_store_is_a_context_manager_that_closes_it(store: Store) -> None:
    """``with store`` (``async with`` for the async twin) hands back the store and closes it."""
    if store.flavor == "sync":
        with store.raw as entered:
            assert entered is store.raw
    else:
        async with store.raw as entered:
            assert entered is store.raw


# --- put / get / delete -------------------------------------------------------------------------


async def test_put_then_get_round_trips_every_field(store: Store, clock: FakeClock) -> None:
    """An item comes back exactly as it was put, stamped with the clock."""
    put = await store.put(T, NS, "k1", "likes tea", kind="fact", tags={"lang": "en"})
    got = await store.get(T, NS, "k1")
    assert got == put
    assert got.tenant == T
    assert got.namespace == NS
    assert (got.key, got.text, got.kind, dict(got.tags)) == (
        "k1",
        "likes tea",
        "fact",
        {"lang": "en"},
    )
    assert got.created_at == got.updated_at == at(clock)
    assert got.expires_at is None


async def test_put_defaults_to_kind_note_and_no_tags(store: Store) -> None:
    """Without options an item is a note with no tags."""
    item = await store.put(T, NS, "k", "text")
    assert (item.kind, dict(item.tags)) == ("note", {})


async def test_replace_keeps_created_at_and_refreshes_updated_at(
    store: Store, clock: FakeClock
) -> None:
    """Putting the same address again replaces the item but keeps its creation time."""
    first = await store.put(T, NS, "k", "old text", tags={"a": "1"})
    clock.advance(30)
    second = await store.put(T, NS, "k", "new text", kind="fact")
    assert second.created_at == first.created_at
    assert second.updated_at == at(clock)
    got = await store.get(T, NS, "k")
    assert got == second
    assert (got.text, got.kind, dict(got.tags)) == ("new text", "fact", {})
    assert await keys(store, T, NS, query="old") == []


async def test_get_missing_returns_none(store: Store) -> None:
    """Unknown keys, namespaces and tenants read as None."""
    await store.put(T, NS, "k", "x")
    assert await store.get(T, NS, "other") is None
    assert await store.get(T, ("user", "u1"), "k") is None
    assert await store.get("tenant-b", NS, "k") is None


async def test_string_namespace_is_split_on_slashes(store: Store) -> None:
    """A "/"-separated namespace string addresses the same item as the tuple."""
    await store.put(T, "user/u1/session/s1", "k", "x")
    got = await store.get(T, NS, "k")
    assert got is not None
    assert got.namespace == NS


async def test_labels_may_hold_any_printable_characters(store: Store) -> None:
    """Dots, slashes, wildcards, quotes, spaces and CJK in labels are kept verbatim."""
    odd = ("user", "a.b@x.com", "50%_off", 'it\'s "q"', "back\\slash", "sl/ash", "中文 空格")
    await store.put(T, odd, "k", "x")
    got = await store.get(T, odd, "k")
    assert got is not None
    assert got.namespace == odd
    assert await keys(store, T, odd[:3]) == ["k"]
    assert await keys(store, T, ("user", "a.b@x")) == []
    assert await store.list_namespaces(T) == [odd]


async def test_delete_reports_whether_an_item_was_removed(store: Store) -> None:
    """delete is True once, then False; the item is gone."""
    await store.put(T, NS, "k", "x")
    assert await store.delete(T, NS, "k") is True
    assert await store.delete(T, NS, "k") is False
    assert await store.get(T, NS, "k") is None
    assert await store.search(T, query="x") == []


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s: s.put(T, (), "k", "x"), InvalidNamespace),
        (lambda s: s.put(T, ("user", ""), "k", "x"), InvalidNamespace),
        (lambda s: s.put(T, ("a\nb",), "k", "x"), InvalidNamespace),
        (lambda s: s.put(T, NS, "", "x"), InvalidInput),
        (lambda s: s.put(T, NS, "k", 3), InvalidInput),
        (lambda s: s.put(T, NS, "k", "x", kind=""), InvalidInput),
        (lambda s: s.put(T, NS, "k", "x", tags={"a": 1}), InvalidInput),
        (lambda s: s.put(T, NS, "k", "x", tags=["a"]), InvalidInput),
        (lambda s: s.put(T, NS, "k", "x", ttl=0), InvalidInput),
        (lambda s: s.put(T, NS, "k", "x", ttl=-5), InvalidInput),
        (lambda s: s.put(T, NS, "k", "x", ttl=float("nan")), InvalidInput),
        (lambda s: s.put(T, NS, "k", "\ud800"), InvalidInput),
        (lambda s: s.put("", NS, "k", "x"), InvalidInput),
        (lambda s: s.put(None, NS, "k", "x"), InvalidInput),
        (lambda s: s.get("   ", NS, "k"), InvalidInput),
        (lambda s: s.search(T, limit=0), InvalidInput),
        (lambda s: s.search(T, limit=1001), InvalidInput),
        (lambda s: s.search(T, limit=True), InvalidInput),
        (lambda s: s.search(T, offset=-1), InvalidInput),
        (lambda s: s.search(T, mode="fuzzy"), InvalidInput),
        (lambda s: s.search(T, query=5), InvalidInput),
        (lambda s: s.list_namespaces(T, limit=0), InvalidInput),
        (lambda s: s.list_namespaces(T, max_depth=0), InvalidInput),
        (lambda s: s.delete_user(T, ""), InvalidInput),
    ],
)
async def test_bad_arguments_are_rejected_with_our_errors(
    store: Store, call: Callable[[Store], object], error: type[Exception]
) -> None:
    """Malformed input raises InvalidInput/InvalidNamespace naming the problem."""
    with pytest.raises(error):
        await call(store)  # type: ignore[misc]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.put(T, NS, "k", "nul\x00text"),
        lambda s: s.put(T, NS, "k", "t", kind="k\x00"),
        lambda s: s.put(T, NS, "k", "t", tags={"a": "b\x00"}),
        lambda s: s.put(T, NS, "k", "t", tags={"a\x00": "b"}),
        lambda s: s.put_many(T, [NewMemory(NS, "a", "fine"), NewMemory(NS, "b", "t\x00")]),
        lambda s: s.search(T, query="x", tags={"a": "\x00"}),
        lambda s: s.search(T, query="x", kind="\x00"),
    ],
)
async def test_nul_characters_are_refused_on_every_backend(
    store: Store, call: Callable[[Store], object]
) -> None:
    """PostgreSQL text cannot hold NUL, so no backend stores it: data stays portable."""
    with pytest.raises(InvalidInput, match="NUL"):
        await call(store)  # type: ignore[misc]
    assert await store.search(T) == []


async def test_nul_in_a_query_finds_the_words_around_it(store: Store) -> None:
    """A query is not stored: NUL in it is a separator, never an error."""
    await store.put(T, NS, "k", "coffee beans")
    assert [h.item.key for h in await store.search(T, query="coffee\x00beans")] == ["k"]


async def test_limit_bounds_are_inclusive(store: Store) -> None:
    """limit 1 and 1000 are both accepted."""
    await store.put(T, NS, "k", "x")
    assert len(await store.search(T, limit=1)) == 1
    assert len(await store.search(T, limit=1000)) == 1


async def test_concurrent_calls_are_safe(store: Store) -> None:
    """Many overlapping calls (threads, for the async SQLite twin) all land and read back."""
    await asyncio.gather(*(store.put(T, NS, f"k{i}", f"coffee number {i}") for i in range(40)))
    results = await asyncio.gather(*(store.search(T, query="coffee", limit=100) for _ in range(8)))
    assert all(len(hits) == 40 for hits in results)


# --- put_many -----------------------------------------------------------------------------


async def test_put_many_writes_every_item_as_put_would(store: Store, clock: FakeClock) -> None:
    """A batch comes back in order, stamped with the clock, readable by get and search."""
    items = await store.put_many(
        T,
        [
            NewMemory(NS, "a", "likes green tea", kind="fact", tags={"lang": "en"}),
            NewMemory("user/u2", "b", "用户喜欢喝咖啡", ttl=60),
            NewMemory(NS, "c", "plain note"),
        ],
    )
    assert [(i.namespace, i.key) for i in items] == [(NS, "a"), (("user", "u2"), "b"), (NS, "c")]
    for item in items:
        assert await store.get(T, item.namespace, item.key) == item
        assert item.tenant == T
        assert item.created_at == item.updated_at == at(clock)
    assert (items[0].kind, dict(items[0].tags), items[2].kind) == ("fact", {"lang": "en"}, "note")
    assert items[1].expires_at == datetime.fromtimestamp(clock.now + 60, tz=UTC)
    assert await keys(store, T, query="tea") == ["a"]
    assert await keys(store, T, query="咖啡") == ["b"]
    assert await keys(store, "tenant-b") == []


async def test_put_many_takes_any_iterable_and_an_empty_batch(store: Store) -> None:
    """A generator works; an empty batch returns [] and writes nothing (the tenant is checked)."""
    items = await store.put_many(T, (NewMemory(NS, f"k{i}", f"note {i}") for i in range(3)))
    assert [i.key for i in items] == ["k0", "k1", "k2"]
    assert await store.put_many(T, []) == []
    assert len(await store.search(T)) == 3
    with pytest.raises(InvalidInput):
        await store.put_many("", [])


async def test_put_many_replaces_existing_items_as_put_does(store: Store, clock: FakeClock) -> None:
    """An existing address keeps created_at (unless it had expired); other tenants are untouched."""
    kept = await store.put(T, NS, "kept", "old coffee text")
    await store.put(T, NS, "expired", "old", ttl=1)
    await store.put("tenant-b", NS, "kept", "tenant b coffee")
    clock.advance(30)
    new = await store.put_many(
        T, [NewMemory(NS, "kept", "new tea text"), NewMemory(NS, "expired", "fresh")]
    )
    assert new[0].created_at == kept.created_at
    assert new[0].updated_at == new[1].created_at == at(clock)
    assert await keys(store, T, query="coffee") == []
    assert await keys(store, T, query="tea") == ["kept"]
    assert await keys(store, "tenant-b", query="coffee") == ["kept"]


async def test_put_many_repeated_address_last_one_wins(store: Store) -> None:
    """Within a batch the last item of an address is stored; one result per address."""
    items = await store.put_many(
        T,
        [
            NewMemory(NS, "a", "first coffee"),
            NewMemory(NS, "b", "other"),
            NewMemory("user/u1/session/s1", "a", "second tea", kind="fact"),
        ],
    )
    assert [(i.key, i.text, i.kind) for i in items] == [
        ("a", "second tea", "fact"),
        ("b", "other", "note"),
    ]
    assert await store.get(T, NS, "a") == items[0]
    assert await keys(store, T, query="coffee") == []
    assert await keys(store, T, query="tea") == ["a"]


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (NewMemory((), "k", "x"), InvalidNamespace),
        (NewMemory(("user", ""), "k", "x"), InvalidNamespace),
        (NewMemory(NS, "", "x"), InvalidInput),
        (NewMemory(NS, "k", 3), InvalidInput),  # type: ignore[arg-type]
        (NewMemory(NS, "k", "\ud800"), InvalidInput),
        (NewMemory(NS, "k", "x", kind=""), InvalidInput),
        (NewMemory(NS, "k", "x", tags={"a": 1}), InvalidInput),  # type: ignore[dict-item]
        (NewMemory(NS, "k", "x", ttl=0), InvalidInput),
        ({"namespace": NS, "key": "k", "text": "x"}, InvalidInput),
    ],
)
async def test_put_many_bad_item_names_its_index_and_writes_nothing(
    store: Store, bad: object, error: type[Exception]
) -> None:
    """A bad item raises put's error with its index; nothing of the batch is written."""
    before = await store.put(T, NS, "a", "old text")
    batch = [NewMemory(NS, "a", "new text"), NewMemory(NS, "b", "more"), bad]
    with pytest.raises(error, match=r"^item 2: ") as raised:
        await store.put_many(T, batch)
    assert getattr(raised.value, "index", None) == 2
    assert await store.get(T, NS, "a") == before
    assert await store.get(T, NS, "b") is None


async def test_put_many_embeds_the_batch_in_one_call(make_store: Callable[..., Store]) -> None:
    """With an embedder, a batch costs one embedder call and is found by vector search."""
    embedder = BigramEmbedder()
    store = make_store(embedder=embedder)
    assert await store.put_many(T, []) == []
    await store.put_many(
        T,
        [
            NewMemory(NS, "near", "the user drinks espresso every morning"),
            NewMemory(NS, "far", "quarterly revenue report for the board"),
        ],
    )
    assert embedder.calls == 1
    hits = await store.search(T, query="user drinks espresso", mode="vector")
    assert [h.item.key for h in hits] == ["near", "far"]


async def test_a_large_batch_keeps_every_item_with_its_own_values(
    make_store: Callable[..., Store], clock: FakeClock
) -> None:
    """A batch larger than one write statement: each item keeps its text, times and vector.

    New, replaced, expired-then-replaced and restored items are mixed across namespaces, so a
    backend that writes the batch in chunks must still match every returned row to its item.
    """
    store = make_store(embedder=BigramEmbedder())
    await store.put(T, NS, "k7", "old seven", ttl=1)
    eight = await store.put(T, ("user", "u2"), "k8", "old eight")
    old = await store.put(T, NS, "k9", "old nine")
    clock.advance(30)
    restored = datetime(2001, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)
    batch = [
        NewMemory(NS if i % 2 else ("user", "u2"), f"k{i}", f"item number {i} word{i}x")
        for i in range(1_234)
    ]
    batch[9] = NewMemory(NS, "k9", "new nine word9x")
    batch[10] = NewMemory(("user", "u2"), "k10", "restored ten word10x", created_at=restored)
    items = await store.put_many(T, batch)
    assert [(i.namespace, i.key, i.text) for i in items] == [
        (normalize_namespace(m.namespace), m.key, m.text) for m in batch
    ]
    by_key = {item.key: item for item in items}
    assert by_key["k9"].created_at == old.created_at  # replaced: keeps created_at
    assert by_key["k7"].created_at == at(clock)  # the old one had expired
    assert by_key["k10"].created_at == restored
    assert by_key["k8"].created_at == eight.created_at
    assert by_key["k11"].created_at == at(clock)
    for index in (0, 1, 9, 10, 499, 500, 501, 777, 1_233):
        item = items[index]
        assert await store.get(T, item.namespace, item.key) == item
        hits = await store.search(T, query=item.text, mode="vector", limit=1)
        assert [(h.item.namespace, h.item.key) for h in hits] == [(item.namespace, item.key)]
        assert await keys(store, T, query=f"word{index}x") == [item.key]
    assert len(await store.search(T, limit=1_000)) == 1_000


def _break_inserts_of_key_boom(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Make the database itself refuse to insert an item with key "boom" (a trigger)."""
    if backend == "sqlite-file":
        with closing(sqlite3.connect(db_path(tmp_path))) as conn, conn:
            conn.execute(
                "CREATE TRIGGER boom BEFORE INSERT ON memories WHEN new.key = 'boom' "
                "BEGIN SELECT RAISE(ABORT, 'boom'); END"
            )
        return
    import psycopg
    from psycopg import sql

    schema = sql.Identifier((tmp_path / "postgres-schema").read_text())
    with psycopg.connect(request.getfixturevalue("postgres_url"), autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {s}.boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.key = 'boom' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$"
            ).format(s=schema)
        )
        conn.execute(
            sql.SQL(
                "CREATE TRIGGER boom BEFORE INSERT ON {s}.memories "
                "FOR EACH ROW EXECUTE FUNCTION {s}.boom()"
            ).format(s=schema)
        )


@pytest.mark.backends("sqlite-file", "postgres")
async def test_put_many_is_one_transaction(
    backend: str,
    make_store: Callable[..., Store],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """When the database fails on one row, no row of the batch is written or replaced.

    Only backends a second connection can sabotage (with a trigger) can show it.
    """
    store = make_store()
    before = await store.put(T, NS, "a", "old text")
    _break_inserts_of_key_boom(backend, tmp_path, request)
    batch = [NewMemory(NS, "a", "new text"), NewMemory(NS, "b", "x"), NewMemory(NS, "boom", "x")]
    with pytest.raises(StoreError):
        await store.put_many(T, batch)
    assert await store.get(T, NS, "a") == before
    assert await store.get(T, NS, "b") is None
    assert await keys(store, T, query="new") == []
    assert len(await store.put_many(T, batch[:2])) == 2


# --- TTL --------------------------------------------------------------------------------------


async def test_expired_items_vanish_immediately(store: Store, clock: FakeClock) -> None:
    """Once its ttl has passed an item is invisible to get, search and list_namespaces."""
    item = await store.put(T, NS, "k", "coffee", ttl=10)
    assert item.expires_at == datetime.fromtimestamp(clock.now + 10, tz=UTC)
    clock.advance(9.5)
    assert await store.get(T, NS, "k") == item
    clock.advance(0.5)
    assert await store.get(T, NS, "k") is None
    assert await store.search(T) == []
    assert await store.search(T, query="coffee") == []
    assert await store.list_namespaces(T) == []
    assert await store.delete(T, NS, "k") is False


async def test_sweep_expired_deletes_and_counts(store: Store, clock: FakeClock) -> None:
    """sweep_expired removes expired items of every tenant and returns how many."""
    await store.put(T, NS, "a", "x", ttl=5)
    await store.put("tenant-b", NS, "b", "x", ttl=5)
    await store.put(T, NS, "keep", "x", ttl=100)
    await store.put(T, NS, "forever", "x")
    assert await store.sweep_expired() == 0
    clock.advance(6)
    assert await store.sweep_expired() == 2
    assert await store.sweep_expired() == 0
    assert sorted(await keys(store, T)) == ["forever", "keep"]


async def test_put_over_an_expired_item_starts_fresh(store: Store, clock: FakeClock) -> None:
    """Replacing an expired item gives it a new creation time and no expiry."""
    await store.put(T, NS, "k", "old", ttl=1)
    clock.advance(5)
    item = await store.put(T, NS, "k", "new")
    assert item.created_at == at(clock)
    assert item.expires_at is None
    assert await store.get(T, NS, "k") == item


# --- search without a query ---------------------------------------------------------------


async def test_no_query_lists_newest_first_then_by_key(store: Store, clock: FakeClock) -> None:
    """Without a query hits come by updated_at descending, ties by key, with score None."""
    await store.put(T, NS, "b", "x")
    await store.put(T, NS, "a", "x")
    clock.advance(1)
    await store.put(T, NS, "c", "x")
    hits = await store.search(T)
    assert [h.item.key for h in hits] == ["c", "a", "b"]
    assert all(h.score is None for h in hits)


async def test_limit_and_offset_page_through_results(store: Store, clock: FakeClock) -> None:
    """Pages do not overlap and together cover every item once."""
    for i in range(7):
        clock.advance(1)
        await store.put(T, NS, f"k{i}", "same words here")
    for query in (None, "words"):
        pages = [await keys(store, T, query=query, limit=3, offset=o) for o in (0, 3, 6, 9)]
        assert [len(p) for p in pages] == [3, 3, 1, 0]
        assert sorted(k for page in pages for k in page) == [f"k{i}" for i in range(7)]


async def test_prefix_matches_whole_labels(store: Store) -> None:
    """("user","u1") finds u1's nested items but not u10's; the exact namespace matches too."""
    await store.put(T, ("user", "u1"), "top", "x")
    await store.put(T, ("user", "u1", "session", "s9"), "deep", "x")
    await store.put(T, ("user", "u10"), "other", "x")
    await store.put(T, ("user", "u1x", "session"), "other2", "x")
    assert sorted(await keys(store, T, ("user", "u1"))) == ["deep", "top"]
    assert await keys(store, T, ("user", "u1", "session", "s9")) == ["deep"]
    assert await keys(store, T, ("user", "u1", "session", "s9", "deeper")) == []
    assert sorted(await keys(store, T, "user/u1", query="x")) == ["deep", "top"]
    assert len(await store.search(T, ("user",))) == 4


async def test_empty_prefix_searches_the_whole_tenant(store: Store) -> None:
    """An empty prefix covers every namespace of the tenant, and only that tenant."""
    await store.put(T, ("a",), "k1", "tea")
    await store.put(T, ("b", "c"), "k2", "tea")
    await store.put("tenant-b", ("a",), "k3", "tea")
    assert sorted(await keys(store, T)) == ["k1", "k2"]
    assert sorted(await keys(store, T, (), query="tea")) == ["k1", "k2"]


async def test_kind_and_tags_filter(store: Store) -> None:
    """kind matches exactly; every given tag must match exactly."""
    await store.put(T, NS, "a", "tea", kind="fact", tags={"lang": "en", "src": "chat"})
    await store.put(T, NS, "b", "tea", kind="summary", tags={"lang": "en"})
    await store.put(T, NS, "c", "tea", kind="fact", tags={"lang": "zh"})
    assert sorted(await keys(store, T, kind="fact")) == ["a", "c"]
    assert sorted(await keys(store, T, tags={"lang": "en"})) == ["a", "b"]
    assert await keys(store, T, tags={"lang": "en", "src": "chat"}) == ["a"]
    assert await keys(store, T, tags={"lang": "EN"}) == []
    assert await keys(store, T, kind="fact", tags={"lang": "zh"}, query="tea") == ["c"]
    assert sorted(await keys(store, T, tags={})) == ["a", "b", "c"]


# --- keyword search -----------------------------------------------------------------------


async def test_query_returns_only_items_sharing_a_term(store: Store) -> None:
    """Keyword search is OR over the query's terms; items with none of them are left out."""
    await store.put(T, NS, "coffee", "The user drinks coffee every morning")
    await store.put(T, NS, "tea", "The guest prefers green tea")
    await store.put(T, NS, "none", "Meeting moved to Friday")
    assert await keys(store, T, query="coffee") == ["coffee"]
    assert sorted(await keys(store, T, query="coffee or tea?")) == ["coffee", "tea"]
    assert await keys(store, T, query="spreadsheet") == []


async def test_query_scores_are_floats_best_first(store: Store) -> None:
    """Keyword hits carry a positive float score, sorted best first."""
    await store.put(T, NS, "a", "coffee coffee coffee")
    await store.put(T, NS, "b", "coffee and a long story about many other unrelated things")
    hits = await store.search(T, query="coffee")
    scores = [h.score for h in hits]
    assert all(isinstance(s, float) and s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]


async def test_term_twice_in_short_text_beats_once_in_long_text(store: Store) -> None:
    """BM25 sanity: higher term frequency in a shorter document ranks first."""
    filler = " ".join(f"word{i}" for i in range(40))
    await store.put(T, NS, "long", f"{filler} database {filler}")
    await store.put(T, NS, "short", "database tuning: the database is slow")
    await store.put(T, NS, "noise", "nothing relevant at all")
    assert await keys(store, T, query="database") == ["short", "long"]


async def test_rarer_query_term_weighs_more(store: Store) -> None:
    """BM25 sanity: matching a rare term beats matching a common one."""
    for i in range(6):
        await store.put(T, NS, f"common{i}", f"project update number {i}")
    await store.put(T, NS, "rare", "project kubernetes migration")
    await store.put(T, NS, "plain", "kubernetes cluster")
    hits = await keys(store, T, query="kubernetes project")
    assert set(hits[:2]) == {"rare", "plain"}
    assert set(hits) == {f"common{i}" for i in range(6)} | {"rare", "plain"}


@pytest.mark.parametrize("query", ["", "   ", "?!…", "——", "***", '"'])
async def test_query_without_terms_returns_nothing(store: Store, query: str) -> None:
    """A query that yields no search terms (empty, punctuation) returns an empty list."""
    await store.put(T, NS, "k", "some text")
    assert await store.search(T, query=query) == []


async def test_query_is_case_and_width_insensitive(store: Store) -> None:
    """Queries match regardless of case and of full-width forms."""
    await store.put(T, NS, "k", "PostgreSQL tuning")
    assert await keys(store, T, query="postgresql") == ["k"]
    assert await keys(store, T, query="ＰＯＳＴＧＲＥＳＱＬ") == ["k"]


# --- list_namespaces / delete_user ---------------------------------------------------------


async def test_list_namespaces_sorted_with_prefix_depth_and_paging(store: Store) -> None:
    """Namespaces come sorted; prefix, max_depth (deduplicated) and paging apply."""
    for ns in [("user", "u2", "session", "s1"), ("user", "u1", "session", "s2"),
               ("user", "u1", "session", "s1"), ("user", "u1"), ("org", "x")]:  # fmt: skip
        await store.put(T, ns, "k", "x")
    await store.put("tenant-b", ("zzz",), "k", "x")
    assert await store.list_namespaces(T) == [
        ("org", "x"),
        ("user", "u1"),
        ("user", "u1", "session", "s1"),
        ("user", "u1", "session", "s2"),
        ("user", "u2", "session", "s1"),
    ]
    assert await store.list_namespaces(T, prefix=("user", "u1"), max_depth=4) == [
        ("user", "u1"),
        ("user", "u1", "session", "s1"),
        ("user", "u1", "session", "s2"),
    ]
    assert await store.list_namespaces(T, max_depth=2) == [
        ("org", "x"),
        ("user", "u1"),
        ("user", "u2"),
    ]
    assert await store.list_namespaces(T, max_depth=1, limit=1, offset=1) == [("user",)]
    assert await store.list_namespaces(T, prefix="user/u", max_depth=2) == []


async def test_delete_user_removes_only_that_users_memories(store: Store) -> None:
    """delete_user wipes ("user", id, ...) in one tenant and nothing else."""
    await store.put(T, ("user", "u1"), "a", "x")
    await store.put(T, ("user", "u1", "session", "s1"), "b", "x")
    await store.put(T, ("user", "u10"), "c", "x")
    await store.put(T, ("team", "u1"), "d", "x")
    await store.put("tenant-b", ("user", "u1"), "e", "x")
    assert await store.delete_user(T, "u1") == 2
    assert sorted(await keys(store, T)) == ["c", "d"]
    assert await keys(store, "tenant-b") == ["e"]
    assert await store.delete_user(T, "u1") == 0


# --- vector and hybrid modes ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
async def test_vector_modes_need_an_embedder(store: Store, mode: str) -> None:
    """Without an embedder, vector and hybrid search are a configuration error."""
    await store.put(T, NS, "k", "x")
    with pytest.raises(ConfigError):
        await store.search(T, query="x", mode=mode)


async def test_vector_search_ranks_by_similarity(make_store: Callable[..., Store]) -> None:
    """Vector search puts the most similar text first and scores with cosine (<= 1)."""
    store = make_store(embedder=BigramEmbedder())
    await store.put(T, NS, "near", "the user drinks espresso every morning")
    await store.put(T, NS, "far", "quarterly revenue report for the board")
    await store.put("tenant-b", NS, "near-b", "the user drinks espresso every morning")
    hits = await store.search(T, query="user drinks espresso", mode="vector")
    assert [h.item.key for h in hits] == ["near", "far"]
    assert hits[0].score is not None
    assert hits[1].score is not None
    assert 1.0 + 1e-6 >= hits[0].score > hits[1].score


async def test_hybrid_fuses_keyword_and_vector_rankings(make_store: Callable[..., Store]) -> None:
    """Hybrid scores are convex_fusion of the same store's keyword and vector scores."""
    from synopsis.memory.ranking import convex_fusion

    store = make_store(embedder=BigramEmbedder())
    await store.put(T, NS, "both", "espresso machine maintenance guide")
    await store.put(T, NS, "vector-only", "espressos machines maintained")
    await store.put(T, NS, "unrelated", "board meeting minutes")
    query = "espresso maintenance"
    hits = await store.search(T, query=query, mode="hybrid")
    assert [h.item.key for h in hits] == ["both", "vector-only", "unrelated"]
    keyword = await store.search(T, query=query, mode="keyword")
    vector = await store.search(T, query=query, mode="vector")
    expected = convex_fusion(
        [(h.item.key, h.score or 0.0) for h in keyword],
        [(h.item.key, h.score or 0.0) for h in vector],
    )
    assert {h.item.key: h.score for h in hits} == pytest.approx(expected)
    scores = [h.score for h in hits]
    assert None not in scores and scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert len(set(scores)) == 3


async def test_queries_use_the_embedders_query_side(make_store: Callable[..., Store]) -> None:
    """An embedder with ``embed_queries`` embeds queries with it and stored texts without it."""
    embedder = AsymmetricEmbedder({"hot drink": "espresso every morning"})
    store = make_store(embedder=embedder)
    await store.put(T, NS, "near", "espresso every morning")
    await store.put(T, NS, "far", "quarterly revenue report")
    hits = await store.search(T, query="hot drink", mode="vector")
    assert embedder.queried == ["hot drink"]
    assert "hot drink" not in embedder.stored
    assert [h.item.key for h in hits] == ["near", "far"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)


async def test_the_embedder_never_runs_on_the_event_loop(make_store: Callable[..., Store]) -> None:
    """Async stores embed on a worker thread (a model call must not stall other tasks).

    A sync store, called here from the loop's thread, embeds on the caller's thread.
    """
    threads: list[int] = []

    def embedder(texts: Sequence[str]) -> list[list[float]]:
        threads.append(threading.get_ident())
        return BigramEmbedder()(texts)

    store = make_store(embedder=embedder)
    await store.put(T, NS, "a", "espresso every morning")
    await store.put_many(T, [NewMemory(NS, "b", "green tea")])
    await store.search(T, query="espresso", mode="hybrid")
    assert len(threads) == 3
    here = threading.get_ident()
    if store.flavor == "async":
        assert here not in threads
    else:
        assert set(threads) == {here}


async def test_vector_search_respects_filters_and_paging(make_store: Callable[..., Store]) -> None:
    """Vector search applies the prefix, kind, tags and paging like keyword search."""
    store = make_store(embedder=BigramEmbedder())
    await store.put(T, ("user", "u1"), "a", "green tea", kind="fact")
    await store.put(T, ("user", "u1"), "b", "green tea latte", kind="note")
    await store.put(T, ("user", "u10"), "c", "green tea")
    hits = await store.search(T, ("user", "u1"), query="green tea", mode="vector", kind="fact")
    assert [h.item.key for h in hits] == ["a"]
    page = await store.search(T, ("user", "u1"), query="tea", mode="vector", limit=1, offset=1)
    assert len(page) == 1


# --- persistence and migrations (backends that persist) -----------------------------------------


@pytest.mark.backends(*PERSISTENT)
async def test_reopening_keeps_data_and_migrations_are_idempotent(
    backend: str, make_store: Callable[..., Store]
) -> None:
    """A persistent store opened again on the same storage sees the same items."""
    first = make_store()
    await first.put(T, NS, "k", "咖啡 coffee")
    await first.aclose()
    for _ in range(2):
        again = make_store()
        got = await again.get(T, NS, "k")
        assert got is not None
        assert await keys(again, T, query="咖啡") == ["k"]
        await again.aclose()


@pytest.mark.backends("sqlite-file")
async def test_sqlite_newer_schema_is_refused(
    backend: str, make_store: Callable[..., Store], tmp_path: Path
) -> None:
    """A SQLite database from a newer synopsis raises MigrationError instead of being used."""
    await make_store().aclose()
    with closing(sqlite3.connect(db_path(tmp_path))) as conn, conn:
        conn.execute("INSERT INTO synopsis_schema (version) VALUES (999)")
    with pytest.raises(MigrationError, match="newer"):
        make_store()


@pytest.mark.backends("sqlite-file")
async def test_sqlite_garbage_file_raises_store_error(
    backend: str, make_store: Callable[..., Store], tmp_path: Path
) -> None:
    """Opening a file that is not a database raises StoreError, never sqlite3.Error."""
    db_path(tmp_path).write_bytes(b"definitely not a database file" * 100)
    with pytest.raises(StoreError):
        make_store()


@pytest.mark.backends(*SQLITE)
async def test_sqlite_closed_store_raises_store_error(
    backend: str, make_store: Callable[..., Store]
) -> None:
    """Using a closed SQLite store raises StoreError; closing twice is fine."""
    store = make_store()
    await store.aclose()
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.get(T, NS, "k")


# --- time values: checked before writing; restored as given -------------------------------------

A_CENTURY = 100 * 365.25 * 24 * 3600


@pytest.mark.parametrize("ttl", [1e12, 1e300, A_CENTURY + 1])
async def test_a_ttl_past_a_century_is_refused_and_leaves_nothing(store: Store, ttl: float) -> None:
    """An expiry no backend could read back fails before any write; the tenant stays usable."""
    await store.put(T, NS, "kept", "coffee")
    with pytest.raises(InvalidInput, match="ttl"):
        await store.put(T, NS, "k", "poison coffee", ttl=ttl)
    with pytest.raises(InvalidInput, match=r"^item 1: ttl"):
        await store.put_many(T, [NewMemory(NS, "a", "x"), NewMemory(NS, "b", "y", ttl=ttl)])
    assert await store.get(T, NS, "k") is None
    assert await keys(store, T) == ["kept"]
    assert await keys(store, T, query="poison coffee") == ["kept"]


async def test_a_ttl_of_a_century_is_stored(store: Store, clock: FakeClock) -> None:
    """The longest TTL is accepted and its expiry reads back."""
    item = await store.put(T, NS, "k", "x", ttl=A_CENTURY)
    assert item.expires_at == datetime.fromtimestamp(clock.now + A_CENTURY, tz=UTC)
    assert await store.get(T, NS, "k") == item


async def test_put_many_restores_the_times_it_is_given(store: Store, clock: FakeClock) -> None:
    """created_at, updated_at and expires_at given are stored as given, even over a live item."""
    created = datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    updated = datetime(2024, 6, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    expires = datetime(9999, 12, 31, tzinfo=UTC)
    await store.put(T, NS, "a", "old")
    items = await store.put_many(
        T,
        [
            NewMemory(NS, "a", "restored", created_at=created, updated_at=updated,
                      expires_at=expires),
            NewMemory(NS, "b", "fresh"),
        ],
    )  # fmt: skip
    assert (items[0].created_at, items[0].updated_at, items[0].expires_at) == (
        created,
        updated,
        expires,
    )
    assert items[1].created_at == items[1].updated_at == at(clock)
    assert [hit.item for hit in await store.search(T)] == items
    assert await store.get(T, NS, "a") == items[0]


async def test_items_copied_with_their_times_come_back_identical(
    store: Store, clock: FakeClock
) -> None:
    """Items read back and put_many'd with their times into another tenant are equal to them."""
    await store.put(T, NS, "a", "coffee", kind="fact", tags={"x": "1"})
    clock.advance(5.123456)
    await store.put(T, ("user", "u2"), "b", "tea", ttl=60)
    clock.advance(5)
    await store.put(T, NS, "a", "coffee again")
    originals = [hit.item for hit in await store.search(T)]
    clock.advance(10)
    copies = await store.put_many(
        "tenant-b",
        [
            NewMemory(i.namespace, i.key, i.text, kind=i.kind, tags=i.tags,
                      created_at=i.created_at, updated_at=i.updated_at, expires_at=i.expires_at)
            for i in originals
        ],
    )  # fmt: skip
    assert [replace(copy, tenant=T) for copy in copies] == originals
    assert [hit.item for hit in await store.search("tenant-b")] == copies


@pytest.mark.parametrize(
    ("item", "fragment"),
    [
        (NewMemory(NS, "k", "x", created_at=datetime(2024, 1, 1)), "timezone-aware"),
        (NewMemory(NS, "k", "x", updated_at="2024-01-01T00:00Z"), "timezone-aware"),  # type: ignore[arg-type]
        (NewMemory(NS, "k", "x", expires_at=datetime(1900, 1, 1, tzinfo=UTC)), "between"),
        (NewMemory(NS, "k", "x", expires_at=datetime.max.replace(tzinfo=UTC)), "between"),
        (NewMemory(NS, "k", "x", ttl=5, expires_at=datetime(2030, 1, 1, tzinfo=UTC)), "not both"),
        (
            NewMemory(NS, "k", "x", created_at=datetime(2025, 1, 1, tzinfo=UTC),
                      updated_at=datetime(2024, 1, 1, tzinfo=UTC)),
            "later than",
        ),
    ],
)  # fmt: skip
async def test_bad_restored_times_are_refused_before_writing(
    store: Store, item: NewMemory, fragment: str
) -> None:
    """A restored time must be aware, within 1970..9999 and consistent; nothing is written."""
    with pytest.raises(InvalidInput, match=fragment):
        await store.put_many(T, [NewMemory(NS, "first", "x"), item])
    assert await store.search(T) == []
