"""SynopsisSession: the Agents SDK's Session protocol on every synopsis store, as SQLiteSession.

Behaviour without compaction is compared call by call against the SDK's own SQLiteSession;
storage (one memory per item, generations on compaction), scoping and failures are pinned
on every backend, sync and async.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from agents.memory import Session, SQLiteSession
from hypothesis import HealthCheck, given, settings

from synopsis import AsyncCompactor, Compactor
from synopsis.adapters.openai_agents import (
    HEAD_KIND,
    ITEM_KIND,
    SynopsisSession,
    session_namespace,
)
from synopsis.convert import from_responses_items, to_responses_items
from synopsis.errors import ConfigError, InvalidInput, InvalidNamespace, StoreError
from synopsis.memory import AsyncInMemoryStore, AsyncSQLiteStore, InMemoryStore, SQLiteStore
from synopsis.models.retry import RetryPolicy
from synopsis.testing import FakeModel
from tests.convert_histories import chat_histories

NO_SLEEP = RetryPolicy(initial_delay=0.0, max_delay=0.0, jitter=False)
SUMMARY = "<summary>1. Primary Request and Intent: chat\n8. Current Work: chatting</summary>"


def turn(n: int) -> list[dict[str, Any]]:
    """The items one tool-using turn leaves in a session (as Runner.run stores them)."""
    return [
        {"content": f"question {n} 你好", "role": "user"},
        {
            "arguments": '{"q": "x"}',
            "call_id": f"call_{n}",
            "name": "lookup",
            "type": "function_call",
            "id": f"fc_{n}",
            "status": "completed",
        },
        {"call_id": f"call_{n}", "output": f"result {n}", "type": "function_call_output"},
        {
            "id": f"msg_{n}",
            "content": [{"annotations": [], "text": f"answer {n}", "type": "output_text"}],
            "role": "assistant",
            "status": "completed",
            "type": "message",
        },
    ]


# -- stores of every backend ----------------------------------------------------------------


def _postgres(async_: bool) -> Callable[[pytest.FixtureRequest, Path], Any]:
    def make(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
        url = request.getfixturevalue("postgres_url")
        from synopsis.memory.postgres import AsyncPostgresStore, PostgresStore

        schema = f"agents_{uuid.uuid4().hex}"
        request.addfinalizer(lambda: _drop_schema(url, schema))
        return (AsyncPostgresStore if async_ else PostgresStore)(url=url, schema=schema)

    return make


def _drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


STORES: dict[str, Callable[[pytest.FixtureRequest, Path], Any]] = {
    "memory": lambda request, tmp_path: InMemoryStore(),
    "memory-async": lambda request, tmp_path: AsyncInMemoryStore(),
    "sqlite": lambda request, tmp_path: SQLiteStore(tmp_path / "s.db"),
    "sqlite-async": lambda request, tmp_path: AsyncSQLiteStore(tmp_path / "s.db"),
    "postgres": _postgres(async_=False),
    "postgres-async": _postgres(async_=True),
}


@pytest.fixture(params=sorted(STORES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    if request.param.startswith("postgres"):
        request.applymarker(pytest.mark.postgres)
    made = STORES[request.param](request, tmp_path)
    yield made
    if hasattr(made, "aclose"):
        await made.aclose()
    else:
        made.close()


def session(store: Any, **options: Any) -> SynopsisSession:
    options.setdefault("tenant", "acme")
    options.setdefault("user_id", "u1")
    return SynopsisSession(options.pop("session_id", "s1"), store=store, **options)


# -- the protocol, compared with the SDK's SQLiteSession ------------------------------------


async def script(target: Any) -> list[Any]:
    """One sequence of Session calls; every observable result, in order."""
    seen: list[Any] = [await target.get_items(), await target.pop_item()]
    await target.add_items(turn(1))
    await target.add_items([])
    await target.add_items(turn(2)[:2])
    seen += [await target.get_items(), await target.get_items(limit=3)]
    seen += [await target.get_items(limit=0), await target.get_items(limit=100)]
    seen += [await target.pop_item(), await target.pop_item(), await target.get_items()]
    await target.add_items(turn(3))
    seen += [await target.get_items(limit=1), await target.get_items()]
    await target.clear_session()
    seen += [await target.get_items(), await target.pop_item()]
    await target.add_items(turn(4)[:1])
    seen += [await target.get_items()]
    return seen


def quiet_compactor() -> Compactor:
    return Compactor(model=FakeModel(default=SUMMARY), trigger_messages=1000)


@pytest.mark.parametrize("compactor", [None, quiet_compactor], ids=["no-compactor", "no-fire"])
async def test_every_call_answers_as_the_sdks_sqlite_session(
    store: Any, compactor: Callable[[], Compactor] | None
) -> None:
    """Same calls, same results, as long as no compaction happens."""
    theirs = SQLiteSession("s1")
    ours = session(store, compactor=compactor() if compactor else None)
    expected = await script(theirs)
    assert await script(ours) == expected
    theirs.close()


async def test_a_negative_limit_reads_everything_as_sqlite_does() -> None:
    theirs, ours = SQLiteSession("s1"), session(InMemoryStore())
    for target in (theirs, ours):
        await target.add_items(turn(1))
    assert await ours.get_items(limit=-1) == await theirs.get_items(limit=-1) == turn(1)
    theirs.close()


def test_it_satisfies_the_sdks_session_protocol() -> None:
    made = session(InMemoryStore(), session_settings=None)
    assert isinstance(made, Session)
    assert made.session_id == "s1" and made.session_settings is None


async def test_history_outlives_the_session_object(tmp_path: Path) -> None:
    """A new session object (another process) on the same database sees the same history."""
    first = SQLiteStore(tmp_path / "a.db")
    await session(first).add_items(turn(1))
    first.close()
    second = SQLiteStore(tmp_path / "a.db")
    assert await session(second).get_items() == turn(1)
    second.close()


# -- scoping ----------------------------------------------------------------------------------


async def test_tenant_user_and_session_each_scope_the_history(store: Any) -> None:
    await session(store).add_items(turn(1))
    others = [
        session(store, tenant="other"),
        session(store, user_id="u2"),
        session(store, session_id="s2"),
    ]
    for other in others:
        assert await other.get_items() == []
        assert await other.pop_item() is None
        await other.clear_session()
    assert await session(store).get_items() == turn(1)


async def test_delete_user_erases_the_users_sessions() -> None:
    """Items live under ("user", user_id, ...), so the store's delete_user reaches them."""
    store = InMemoryStore()
    await session(store).add_items(turn(1))
    await session(store, user_id="u2").add_items(turn(2))
    assert session_namespace("u1", "s1") == ("user", "u1", "agents", "s1")
    assert store.delete_user("acme", "u1") > 0
    assert await session(store).get_items() == []
    assert await session(store, user_id="u2").get_items() == turn(2)


def test_bad_scopes_and_compactors_are_refused_when_built() -> None:
    with pytest.raises(InvalidInput):
        session(InMemoryStore(), tenant="")
    with pytest.raises(InvalidNamespace):
        session(InMemoryStore(), user_id="")
    with pytest.raises(InvalidNamespace):
        session(InMemoryStore(), session_id="")
    with pytest.raises(ConfigError, match="Compactor or an AsyncCompactor"):
        session(InMemoryStore(), compactor=object())


# -- storage ------------------------------------------------------------------------------------


class CountingStore(InMemoryStore):
    """An InMemoryStore that records the calls made on it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int]] = []

    def get(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("get", 1))
        return super().get(*args, **kwargs)

    def put_many(self, tenant: str, items: Any) -> Any:
        batch = list(items)
        self.calls.append(("put_many", len(batch)))
        return super().put_many(tenant, batch)

    def search(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("search", 1))
        return super().search(*args, **kwargs)


async def test_add_items_costs_one_read_and_one_batch_whatever_the_history() -> None:
    """One memory per item: appending writes the new items and the head, nothing else."""
    store = CountingStore()
    target = session(store)
    for n in range(50):
        await target.add_items(turn(n))
    store.calls.clear()
    await target.add_items(turn(50))
    assert store.calls == [("get", 1), ("put_many", 5)]
    kinds = {hit.item.kind for hit in store.search("acme", ("user", "u1", "agents"), limit=1000)}
    assert kinds == {ITEM_KIND, HEAD_KIND}


async def test_items_keep_their_order_past_a_store_page() -> None:
    """More than one search page (1,000 items) still reads back in order."""
    store = InMemoryStore()
    target = session(store)
    items = [{"content": f"m{n}", "role": "user"} for n in range(1203)]
    await target.add_items(items)
    assert await target.get_items() == items
    assert await target.get_items(limit=2) == items[-2:]


async def test_items_round_trip_any_text() -> None:
    """CJK, emoji, NUL and a lone surrogate (stored as a JSON escape) come back equal."""
    items = [{"content": "你好 🙂 \x00 \ud800", "role": "user"}, {"content": "", "role": "user"}]
    target = session(InMemoryStore())
    await target.add_items(items)
    assert await target.get_items() == items


async def test_unreadable_items_are_skipped_as_the_sdk_does() -> None:
    store = InMemoryStore()
    target = session(store)
    await target.add_items(turn(1)[:2])
    store.put("acme", (*session_namespace("u1", "s1"), "generation-0"), "000000000000", "{not json")
    assert await target.get_items() == turn(1)[1:2]
    assert await target.pop_item() == turn(1)[1]
    assert await target.pop_item() is None


async def test_an_unreadable_head_is_a_store_error_naming_the_session() -> None:
    store = InMemoryStore()
    store.put("acme", session_namespace("u1", "s1"), "head", '{"generation": 0}')
    with pytest.raises(StoreError, match=r"agents session head in .*'s1'"):
        await session(store).get_items()


class FailingDelete(InMemoryStore):
    def delete(self, *args: Any, **kwargs: Any) -> bool:
        raise OSError("disk gone")


async def test_a_pop_whose_delete_failed_leaves_nothing_visible() -> None:
    """The head moves before the delete: a lost delete leaves an item outside the history,
    which the next append overwrites."""
    store = FailingDelete()
    target = session(store)
    await target.add_items(turn(1))
    with pytest.raises(OSError, match="disk gone"):
        await target.pop_item()
    assert await target.get_items() == turn(1)[:3]
    await target.add_items(turn(2)[:1])
    assert await target.get_items() == [*turn(1)[:3], turn(2)[0]]


# -- compaction ---------------------------------------------------------------------------------


def compacting(store: Any, **options: Any) -> tuple[SynopsisSession, FakeModel]:
    summarizer = FakeModel(default=SUMMARY)
    options = {"trigger_messages": 8, "keep_tail": 3, **options}
    compactor = Compactor(model=summarizer, retry=NO_SLEEP, **options)
    return session(store, compactor=compactor), summarizer


async def test_a_compaction_replaces_the_history_and_keeps_the_tail_items_exactly(
    store: Any,
) -> None:
    target, summarizer = compacting(store)
    history = [item for n in range(3) for item in turn(n)]
    await target.add_items(history)
    compacted = await target.get_items()
    assert len(summarizer.requests) == 1
    assert compacted[0]["role"] == "user" and "<synopsis:summary" in compacted[0]["content"]
    # The newest question stays too, as itself (pinned), then the tail: ids, statuses and
    # annotations as stored.
    assert compacted[1:] == history[-4:]
    assert await target.get_items() == compacted  # stored: no second summary
    assert len(summarizer.requests) == 1
    assert await target.generations() == [history, compacted]


async def test_reads_with_a_limit_never_compact() -> None:
    """The SDK checks what it wrote with limited reads: they must not move under it."""
    target, summarizer = compacting(InMemoryStore())
    history = [item for n in range(3) for item in turn(n)]
    await target.add_items(history)
    assert await target.get_items(limit=4) == history[-4:]
    assert await target.get_items(limit=-1) == history
    assert summarizer.requests == []


async def test_the_session_goes_on_after_a_compaction() -> None:
    target, _ = compacting(InMemoryStore())
    await target.add_items([item for n in range(3) for item in turn(n)])
    compacted = await target.get_items()
    await target.add_items(turn(3)[:1])
    assert await target.get_items() == [*compacted, turn(3)[0]]
    assert await target.pop_item() == turn(3)[0]
    assert await target.get_items(limit=1) == compacted[-1:]


async def test_clear_deletes_every_generation() -> None:
    store = InMemoryStore()
    target, _ = compacting(store)
    await target.add_items([item for n in range(3) for item in turn(n)])
    await target.get_items()
    await target.clear_session()
    left = store.search("acme", session_namespace("u1", "s1"), limit=1000)
    assert [hit.item.kind for hit in left] == [HEAD_KIND]
    assert await target.generations() == [[], [], []]
    assert await target.get_items() == []


async def test_an_async_compactor_compacts_the_same_way() -> None:
    from synopsis.testing import AsyncFakeModel

    summarizer = AsyncFakeModel(default=SUMMARY)
    compactor = AsyncCompactor(model=summarizer, retry=NO_SLEEP, trigger_messages=8, keep_tail=3)
    target = session(AsyncInMemoryStore(), compactor=compactor)
    history = [item for n in range(3) for item in turn(n)]
    await target.add_items(history)
    compacted = await target.get_items()
    assert len(summarizer.requests) == 1 and compacted[1:] == history[-4:]


async def test_a_failed_summary_leaves_the_history_as_it_was() -> None:
    """The compactor's fallback ("keep") returns the history: nothing is rewritten."""
    from synopsis.errors import ProviderUnavailable

    summarizer = FakeModel(default=ProviderUnavailable("down", model="fake"))
    compactor = Compactor(model=summarizer, retry=NO_SLEEP, trigger_messages=8, keep_tail=3)
    target = session(InMemoryStore(), compactor=compactor)
    history = [item for n in range(3) for item in turn(n)]
    await target.add_items(history)
    assert await target.get_items() == history
    assert len(await target.generations()) == 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chat_histories())
def test_a_compacted_session_reads_as_the_compacted_history(history: list[dict[str, Any]]) -> None:
    """For any history stored as items: the items get_items returns, read back, are what the
    compactor makes of the history; uncompacted, the stored items come back as they were."""
    items = to_responses_items(history)
    direct = compactor_for_property().compact(from_responses_items(items), force=False)
    target = session(InMemoryStore(), compactor=compactor_for_property())

    async def store_and_read() -> list[Any]:
        await target.add_items(items)
        return await target.get_items()

    got = asyncio.run(store_and_read())
    if direct.compacted:
        assert from_responses_items(got) == direct.messages
    else:
        assert got == items


def compactor_for_property() -> Compactor:
    return Compactor(model=FakeModel(default=SUMMARY), trigger_messages=2, keep_tail=2)
