"""Several replicas on one database: deletion wins, and one replica pays for each summary.

Each "replica" is a SessionMemory over its own store object (its own connection or pool) on
one SQLite file or one PostgreSQL schema. Issue #13, item 3: a deletion by one replica (or
by the CLI) while another has the user's summary job in flight must leave nothing behind.
Item 15: with several replicas, a session's summary is paid for (one model call) once.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from synopsis.cli.memory import memory as memory_cli
from synopsis.errors import StoreError
from synopsis.memory import SessionSummary, UserDeleted
from synopsis.memory.sqlite import AsyncSQLiteStore, SQLiteStore
from synopsis.session.memory import AsyncSessionMemory, SessionMemory
from synopsis.summarizer import SummaryResult

T, U, S = "acme", "u1", "s1"
NS = ("user", U, "session", S)
WAIT = 60.0  # seconds a test waits for a background thread before it gives up


def turns(count: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} about coffee"}
        for i in range(count)
    ]


def summary(session: str) -> SessionSummary:
    return SessionSummary(
        tenant=T, user_id=U, session_id=session, version=1, text="coffee", covers_from=0,
        covers_to=10, model="fake", content_hash="h",
    )  # fmt: skip


class CountingSummarizer:
    """Counts the model calls per session; ``gate`` (when set up) holds every call."""

    def __init__(self, *, gated: bool = False) -> None:
        self.calls: Counter[str] = Counter()
        self.entered = threading.Event()
        self.gate = threading.Event()
        if not gated:
            self.gate.set()
        self._lock = threading.Lock()

    def summarize(
        self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None = None, **_: Any
    ) -> SummaryResult:
        with self._lock:
            self.calls[str(session_id)] += 1
        self.entered.set()
        assert self.gate.wait(WAIT)
        text = f"{session_id}: {len(messages)} messages about coffee"
        return SummaryResult(text=text, model="fake", attempts=1)


class AsyncCountingSummarizer(CountingSummarizer):
    async def summarize(  # type: ignore[override]
        self, messages: Sequence[Mapping[str, Any]], **options: Any
    ) -> SummaryResult:
        return CountingSummarizer.summarize(self, messages, **options)


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "replicas.sqlite3"


@pytest.fixture
def postgres_stores(postgres_url: str) -> Iterator[Callable[[], Any]]:
    """Sync PostgreSQL stores on one fresh schema (dropped afterwards)."""
    import psycopg
    from psycopg import sql

    from synopsis.memory.postgres import PostgresStore

    schema, opened = f"replicas_{uuid.uuid4().hex}", []

    def make() -> Any:
        opened.append(PostgresStore(postgres_url, schema=schema))
        return opened[-1]

    yield make
    for store in opened:
        store.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def open_store(request: pytest.FixtureRequest, sqlite_path: Path) -> Iterator[Callable[[], Any]]:
    """Opens another store object (another replica's) on the test's one database."""
    if request.param == "postgres":
        yield request.getfixturevalue("postgres_stores")
        return
    opened: list[SQLiteStore] = []

    def make() -> SQLiteStore:
        opened.append(SQLiteStore(sqlite_path))
        return opened[-1]

    yield make
    for store in opened:
        store.close()


def replica(store: Any, summarizer: Any, events: list[Any] | None = None) -> SessionMemory:
    return SessionMemory(
        store=store,
        summarizer=summarizer,
        summarize_every=10,
        max_workers=4,
        on_event=[] if events is None else [events.append],
    )


def assert_nothing_left(*stores: Any) -> None:
    for store in stores:
        assert store.latest_summary(T, U, S) is None
        assert store.search(T, ("user", U)) == []
        assert store.pending_outbox() == []


# --- deletion wins -----------------------------------------------------------------------------


def test_a_deletion_by_another_replica_wins_over_a_job_in_flight(
    open_store: Callable[[], Any],
) -> None:
    """Replica B deletes the user while replica A's model call runs: A's result is dropped."""
    store_a, store_b, events = open_store(), open_store(), []
    model = CountingSummarizer(gated=True)
    with replica(store_a, model, events) as a, replica(store_b, CountingSummarizer()) as b:
        assert a.after_turn(T, U, S, turns(10)).scheduled
        assert model.entered.wait(WAIT)
        assert b.delete_user(T, U) == 0
        model.gate.set()
        assert a.drain(WAIT)
    assert_nothing_left(store_a, store_b)
    assert [e.name for e in events] == ["session_summary_started"]  # no saved, no failure


def test_the_cli_delete_user_wins_over_a_job_in_flight(sqlite_path: Path) -> None:
    """``synopsis memory delete-user`` (its own process in real life) wins the same way."""
    store, model = SQLiteStore(sqlite_path), CountingSummarizer()
    with store, replica(store, model) as memory:
        assert memory.after_turn(T, U, S, turns(10)).scheduled
        assert memory.drain(WAIT)  # v1 is stored ...
        model.gate.clear()
        model.entered.clear()
        assert memory.after_turn(T, U, S, turns(20)).scheduled
        assert model.entered.wait(WAIT)  # ... and v2 is being written when the CLI runs
        env = {"SYNOPSIS_DB": str(sqlite_path), "SYNOPSIS_TENANT": T}
        result = CliRunner().invoke(memory_cli, ["delete-user", U], env=env)
        assert result.exit_code == 0, result.output
        assert "deleted 2 records" in result.output
        model.gate.set()
        assert memory.drain(WAIT)
        assert_nothing_left(store)


class DeleteAfterSave:
    """A replica's store whose user is deleted by ``other`` right after a summary is saved."""

    def __init__(self, inner: Any, other: Any) -> None:
        self.inner, self.other = inner, other

    def save_summary(self, *args: Any, **kwargs: Any) -> Any:
        saved = self.inner.save_summary(*args, **kwargs)
        self.other.delete_user(T, U)
        return saved

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_deletion_between_the_two_writes_leaves_no_memory_copy(
    open_store: Callable[[], Any],
) -> None:
    """The deletion lands after A's save and before its memory copy: the copy is refused."""
    store_a, store_b = open_store(), open_store()
    wrapped = DeleteAfterSave(store_a, store_b)
    with replica(wrapped, CountingSummarizer()) as a:
        assert a.after_turn(T, U, S, turns(10)).scheduled
        assert a.drain(WAIT)
    assert_nothing_left(store_a, store_b)


class DeleteAfterOutboxRead:
    """A replica's store whose user is deleted by ``other`` once the outbox has been read;
    its memory puts fail while ``broken``."""

    def __init__(self, inner: Any, other: Any) -> None:
        self.inner, self.other, self.broken = inner, other, True

    def put(self, *args: Any, **kwargs: Any) -> Any:
        if self.broken:
            raise StoreError("connection lost")
        return self.inner.put(*args, **kwargs)

    def pending_outbox(self, *args: Any, **kwargs: Any) -> Any:
        entries = self.inner.pending_outbox(*args, **kwargs)
        self.other.delete_user(T, U)
        return entries

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_replay_after_another_replicas_deletion_writes_nothing(
    open_store: Callable[[], Any],
) -> None:
    """recover() read the user's entry; B deletes the user; the replayed copy is refused."""
    store_a, store_b = open_store(), open_store()
    wrapped = DeleteAfterOutboxRead(store_a, store_b)
    with replica(wrapped, CountingSummarizer()) as a:
        assert a.after_turn(T, U, S, turns(10)).scheduled
        assert a.drain(WAIT)
        assert [e.summary.version for e in store_a.pending_outbox()] == [1]
        wrapped.broken = False
        assert a.recover() == 0
    assert_nothing_left(store_a, store_b)


@pytest.mark.postgres
def test_writes_racing_a_deletion_on_postgres_leave_nothing_of_the_user(
    postgres_stores: Callable[[], Any],
) -> None:
    """Writes made with the generation read before a concurrent delete_user either commit
    first (and are deleted) or find the new generation (and are refused): none survive."""
    store = postgres_stores()
    generation = store.deletion_generation(T, U)
    barrier = threading.Barrier(8)

    def write(i: int) -> None:
        barrier.wait()
        with contextlib.suppress(UserDeleted):
            if i == 0:
                store.delete_user(T, U)
            elif i % 2:
                store.save_summary(summary(f"s{i}"), generation=generation)
            else:
                store.put(T, ("user", U, "s", f"s{i}"), "k", "x", generation=generation)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(write, range(8)))
    assert store.search(T) == []
    assert store.pending_outbox() == []
    assert all(store.latest_summary(T, U, f"s{i}") is None for i in range(8))


# --- one replica pays for a job ----------------------------------------------------------------


def test_a_session_in_flight_on_one_replica_is_skipped_by_the_other(
    open_store: Callable[[], Any],
) -> None:
    """B's job for a session A is summarizing makes no model call and writes nothing."""
    model_a, model_b = CountingSummarizer(gated=True), CountingSummarizer()
    store_a, store_b = open_store(), open_store()
    with replica(store_a, model_a) as a, replica(store_b, model_b) as b:
        assert a.after_turn(T, U, S, turns(10)).scheduled
        assert model_a.entered.wait(WAIT)
        assert b.after_turn(T, U, S, turns(10)).scheduled
        assert b.drain(WAIT)
        assert store_b.latest_summary(T, U, S) is None
        model_a.gate.set()
        assert a.drain(WAIT)
    assert (model_a.calls[S], model_b.calls[S]) == (1, 0)
    assert [s.version for s in store_b.summary_history(T, U, S)] == [1]


@pytest.mark.postgres
def test_racing_claims_of_one_session_on_postgres_have_one_winner(
    postgres_stores: Callable[[], Any],
) -> None:
    """Six replicas claim one session at once: exactly one gets it."""
    stores = [postgres_stores() for _ in range(6)]
    barrier = threading.Barrier(6)

    def claim(i: int) -> bool:
        barrier.wait()
        return bool(
            stores[i].claim_summary_job(
                T, U, S, covers_to=10, owner=f"replica-{i}", lease_seconds=60
            )
        )

    with ThreadPoolExecutor(max_workers=6) as pool:
        assert sorted(pool.map(claim, range(6))) == [False] * 5 + [True]


SESSIONS = [f"s{i:02}" for i in range(50)]


def feed(replicas: Sequence[SessionMemory], count: int) -> None:
    """Give every session ``count`` messages through every replica, as a load balancer might."""
    for session in SESSIONS:
        for memory in replicas:
            memory.after_turn(T, U, session, turns(count))


def assert_paid_once(store: Any, models: Sequence[CountingSummarizer], versions: int) -> None:
    """Each session has ``versions`` summaries, one model call and one memory per version."""
    calls = sum((model.calls for model in models), Counter[str]())
    assert calls == Counter(dict.fromkeys(SESSIONS, versions))
    for session in SESSIONS:
        history = store.summary_history(T, U, session)
        assert [s.version for s in history] == list(range(1, versions + 1))
        hits = store.search(T, ("user", U, "session", session), kind="summary", limit=100)
        assert sorted(h.item.key for h in hits) == [f"summary-v{v}" for v in range(1, versions + 1)]
    assert store.pending_outbox() == []


def test_fifty_sessions_through_two_replicas_pay_once_per_version(
    open_store: Callable[[], Any],
) -> None:
    """Every turn reaches both replicas; every summary version costs exactly one model call."""
    models = [CountingSummarizer(), CountingSummarizer()]
    stores = [open_store(), open_store()]
    failures: list[Any] = []
    with replica(stores[0], models[0], failures) as a, replica(stores[1], models[1]) as b:
        feed([a, b], 10)
        assert a.drain(WAIT) and b.drain(WAIT)
        feed([b, a], 20)
        assert a.drain(WAIT) and b.drain(WAIT)
    assert_paid_once(stores[0], models, versions=2)
    assert [e for e in failures if e.name == "session_memory_failed"] == []


async def test_fifty_sessions_through_two_async_replicas_pay_once_per_version(
    sqlite_path: Path,
) -> None:
    """The same with AsyncSessionMemory twins on one SQLite file."""
    models = [AsyncCountingSummarizer(), AsyncCountingSummarizer()]
    stores = [AsyncSQLiteStore(sqlite_path), AsyncSQLiteStore(sqlite_path)]
    memories = [
        AsyncSessionMemory(store=store, summarizer=model, summarize_every=10)
        for store, model in zip(stores, models, strict=True)
    ]
    for count, order in ((10, memories), (20, memories[::-1])):
        for session in SESSIONS:
            for memory in order:
                await memory.after_turn(T, U, session, turns(count))
        for memory in memories:
            assert await memory.drain(WAIT)
    for memory, store in zip(memories, stores, strict=True):
        await memory.aclose()
        await store.aclose()
    with SQLiteStore(sqlite_path) as store:
        assert_paid_once(store, models, versions=2)
