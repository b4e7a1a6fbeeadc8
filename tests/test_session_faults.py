"""Session memory under faults: failing, hanging and garbage summarizers, crashes, races."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from synopsis.errors import ProviderUnavailable, StoreError
from synopsis.events import SessionMemoryFailed
from synopsis.memory._types import SessionSummary
from synopsis.memory.inmemory import AsyncInMemoryStore, InMemoryStore
from synopsis.session.memory import AsyncSessionMemory, SessionMemory
from synopsis.summarizer import SummaryResult
from synopsis.testing import FakeClock

T = "acme"
NS = ("user", "u1", "session", "s1")


def turns(count: int) -> list[dict[str, Any]]:
    """Alternating user/assistant messages."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
        for i in range(count)
    ]


class ScriptedSummarizer:
    """Answers from a script of results or exceptions; then repeats a good summary."""

    def __init__(self, *script: Any) -> None:
        self.script = list(script)
        self.calls = 0

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous_summary: str | None = None,
        session_id: str | None = None,
    ) -> Any:
        self.calls += 1
        step = self.script.pop(0) if self.script else None
        if isinstance(step, BaseException):
            raise step
        if step is not None:
            return step
        return SummaryResult(text=f"good summary {self.calls}", model="fake", attempts=1)


class HangingSummarizer:
    """Blocks until released, then answers."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:
        self.entered.set()
        self.release.wait()
        return SummaryResult(text="late summary", model="fake", attempts=1)


class ConcurrencyProbe:
    """Counts how many calls run at the same time; yields the GIL to invite overlap."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.calls = 0

    def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:
        with self._lock:
            self.running += 1
            self.calls += 1
            self.most = max(self.most, self.running)
        threading.Event().wait(0.001)
        with self._lock:
            self.running -= 1
        return SummaryResult(text=f"summary {len(messages)}", model="fake", attempts=1)


class AsyncConcurrencyProbe(ConcurrencyProbe):
    """The async twin: awaits between entering and leaving."""

    async def summarize(  # type: ignore[override]
        self, messages: Sequence[Mapping[str, Any]], **_: Any
    ) -> SummaryResult:
        self.running += 1
        self.calls += 1
        self.most = max(self.most, self.running)
        await asyncio.sleep(0)
        self.running -= 1
        return SummaryResult(text=f"summary {len(messages)}", model="fake", attempts=1)


class BrokenPut:
    """A store whose memory puts raise while ``broken``: the process "dies" between writes."""

    def __init__(self, inner: InMemoryStore) -> None:
        self.inner = inner
        self.broken = True

    def put(self, *args: Any, **kwargs: Any) -> Any:
        if self.broken:
            raise StoreError("connection lost")
        return self.inner.put(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class PoisonPut:
    """A store whose memory puts always fail for the sessions named in ``poison``."""

    def __init__(self, inner: InMemoryStore, *poison: str) -> None:
        self.inner = inner
        self.poison = set(poison)

    def put(self, tenant: str, namespace: Sequence[str], *args: Any, **kwargs: Any) -> Any:
        if namespace[-1] in self.poison:
            raise StoreError("document rejected")
        return self.inner.put(tenant, namespace, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class AsyncPoisonPut:
    """The async twin of :class:`PoisonPut`."""

    def __init__(self, inner: AsyncInMemoryStore, *poison: str) -> None:
        self.inner = inner
        self.poison = set(poison)

    async def put(self, tenant: str, namespace: Sequence[str], *args: Any, **kwargs: Any) -> Any:
        if namespace[-1] in self.poison:
            raise StoreError("document rejected")
        return await self.inner.put(tenant, namespace, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class UncountableFailure(BrokenPut):
    """Puts fail and so does counting the failure: the store is down."""

    def fail_outbox(self, *args: Any) -> int:
        raise StoreError("connection lost")


POISON = ("p1", "p2", "p3")
HEALTHY = ("h1", "h2")


def pending_summary(session: str) -> SessionSummary:
    """Version 1 of a session's summary, as a job that died before its memory write left it."""
    return SessionSummary(
        tenant=T,
        user_id="u1",
        session_id=session,
        version=1,
        text=f"summary of {session}",
        covers_from=0,
        covers_to=20,
        model="m",
        content_hash=f"h-{session}",
    )


def summary_memories(store: InMemoryStore) -> list[str]:
    """Keys of every summary memory of user u1."""
    return sorted(h.item.key for h in store.search(T, ("user", "u1"), kind="summary", limit=100))


def test_failing_summarizer_is_reported_and_turn_goes_on() -> None:
    """A raising summarizer emits a summarize failure; build_context still works."""
    store, events = InMemoryStore(), []
    summarizer = ScriptedSummarizer(ProviderUnavailable("down", model="m"))
    with SessionMemory(store=store, summarizer=summarizer, on_event=[events.append]) as session:
        assert session.after_turn(T, "u1", "s1", turns(20)).scheduled
        session.drain(timeout=30)
        assert session.build_context(T, "u1", "s1", turns(20)) == turns(20)
    failed = [e for e in events if isinstance(e, SessionMemoryFailed)]
    assert [e.stage for e in failed] == ["summarize"]
    assert failed[0].error["type"] == "ProviderUnavailable"
    assert store.latest_summary(T, "u1", "s1") is None


def test_failure_starts_cooldown_until_clock_moves() -> None:
    """After a failed job the session cools down; once the clock passes it, jobs resume."""
    clock = FakeClock()
    summarizer = ScriptedSummarizer(ProviderUnavailable("down"))
    store = InMemoryStore()
    with SessionMemory(
        store=store, summarizer=summarizer, clock=clock, failure_cooldown=30
    ) as session:
        session.after_turn(T, "u1", "s1", turns(20))
        session.drain(timeout=30)
        assert session.after_turn(T, "u1", "s1", turns(21)).reason == "cooldown"
        clock.advance(31)
        assert session.after_turn(T, "u1", "s1", turns(21)).scheduled
        session.drain(timeout=30)
    latest = store.latest_summary(T, "u1", "s1")
    assert latest is not None
    assert latest.covers_to == 21


def test_hanging_summarizer_does_not_block_turns() -> None:
    """While the model hangs, after_turn returns (in_flight) and build_context works."""
    store, summarizer = InMemoryStore(), HangingSummarizer()
    session = SessionMemory(store=store, summarizer=summarizer)
    try:
        assert session.after_turn(T, "u1", "s1", turns(20)).scheduled
        assert summarizer.entered.wait(timeout=30)
        assert session.after_turn(T, "u1", "s1", turns(22)).reason == "in_flight"
        assert session.build_context(T, "u1", "s1", turns(22)) == turns(22)
        assert not session.drain(timeout=0)
    finally:
        summarizer.release.set()
        session.close()
    assert store.latest_summary(T, "u1", "s1") is not None


def test_garbage_summary_is_reported_and_not_saved() -> None:
    """No text, blank text or a wrong object count as invalid summaries, never stored."""
    for garbage in (_NoneResult(), SummaryResult(text="   ", model="m", attempts=1), object()):
        store, events = InMemoryStore(), []
        summarizer = ScriptedSummarizer(garbage)
        with SessionMemory(store=store, summarizer=summarizer, on_event=[events.append]) as session:
            assert session.after_turn(T, "u1", "s1", turns(20)).scheduled
            session.drain(timeout=30)
            assert session.build_context(T, "u1", "s1", turns(2)) == turns(2)
        assert [e.stage for e in events if isinstance(e, SessionMemoryFailed)] == [
            "invalid_summary"
        ]
        assert store.latest_summary(T, "u1", "s1") is None


class _NoneResult:
    """A result whose text is None."""

    text = None
    model = "m"


def test_failing_event_handler_never_reaches_the_turn() -> None:
    """A handler that raises is logged; the job still completes."""

    def broken(event: Any) -> None:
        raise RuntimeError("handler bug")

    store = InMemoryStore()
    with SessionMemory(store=store, summarizer=ScriptedSummarizer(), on_event=[broken]) as s:
        s.after_turn(T, "u1", "s1", turns(20))
        s.drain(timeout=30)
    assert summary_memories(store) == ["summary-v1"]


def test_crash_between_writes_is_recovered_exactly_once() -> None:
    """A memory put that fails leaves the outbox pending; recover() writes it once."""
    inner = InMemoryStore()
    flaky = BrokenPut(inner)
    events: list[Any] = []
    with SessionMemory(
        store=flaky,
        summarizer=ScriptedSummarizer(),  # type: ignore[arg-type]
        on_event=[events.append],
    ) as session:
        session.after_turn(T, "u1", "s1", turns(20))
        session.drain(timeout=30)
    failed = [e for e in events if isinstance(e, SessionMemoryFailed)]
    assert {e.stage for e in failed} == {"memory_write"}
    # The job's own write fails once; a job whose write failed does not replay the outbox
    # at once (the store just failed), so the entry waits with one attempt counted.
    assert [e.attempts for e in failed] == [1]
    assert summary_memories(inner) == []
    assert [e.attempts for e in inner.pending_outbox(T)] == [1]
    with SessionMemory(store=inner, summarizer=None) as restarted:
        assert restarted.recover() == 1
        assert restarted.recover() == 0
    assert summary_memories(inner) == ["summary-v1"]
    assert inner.pending_outbox() == []


def test_poison_entries_do_not_block_newer_ones() -> None:
    """With more always-failing entries than ``limit``, recover() still completes newer ones."""
    clock = FakeClock()
    inner = InMemoryStore(clock=clock)
    for session in (*POISON, *HEALTHY):  # the poison entries are the oldest
        inner.save_summary(pending_summary(session))
        clock.advance(1)
    events: list[Any] = []
    store = PoisonPut(inner, *POISON)
    with SessionMemory(store=store, summarizer=None, on_event=[events.append]) as session:  # type: ignore[arg-type]
        done = [session.recover(T, limit=2) for _ in range(4)]
    assert sum(done) == len(HEALTHY)
    assert done[-1] == 0
    remaining = inner.pending_outbox(T)
    assert sorted(e.summary.session_id for e in remaining) == list(POISON)
    assert all(e.attempts >= 1 for e in remaining)
    written = sorted(h.item.namespace[-1] for h in inner.search(T, kind="summary", limit=100))
    assert written == list(HEALTHY)
    failed = [e for e in events if isinstance(e, SessionMemoryFailed)]
    assert {e.session_id for e in failed} == set(POISON)
    for entry in remaining:  # each failure event carries the count so far
        counts = [e.attempts for e in failed if e.session_id == entry.summary.session_id]
        assert counts == list(range(1, entry.attempts + 1))


def test_failure_that_cannot_be_counted_reports_no_attempts() -> None:
    """If counting the failure fails too, the event says attempts=None and the entry stays."""
    inner = InMemoryStore()
    inner.save_summary(pending_summary("s1"))
    events: list[Any] = []
    store = UncountableFailure(inner)
    with SessionMemory(store=store, summarizer=None, on_event=[events.append]) as session:  # type: ignore[arg-type]
        assert session.recover(T) == 0
    [event] = [e for e in events if isinstance(e, SessionMemoryFailed)]
    assert (event.stage, event.attempts) == ("memory_write", None)
    assert [e.attempts for e in inner.pending_outbox(T)] == [0]


def test_process_killed_after_save_summary_is_recovered() -> None:
    """A summary saved by a process that died before the memory write is replayed once."""
    store = InMemoryStore()
    store.save_summary(
        SessionSummary(
            tenant=T,
            user_id="u1",
            session_id="s1",
            version=1,
            text="dead process summary",
            covers_from=0,
            covers_to=20,
            model="m",
            content_hash="h",
        )
    )
    store.put(T, NS, "summary-v1", "dead process summary", kind="summary")
    with SessionMemory(store=store, summarizer=None) as session:
        assert session.recover(T) == 1
        assert session.recover(T) == 0
    assert summary_memories(store) == ["summary-v1"]


def test_next_job_replays_an_earlier_pending_write() -> None:
    """A later successful job opportunistically completes an older pending memory write."""
    inner = InMemoryStore()
    flaky = BrokenPut(inner)
    with SessionMemory(
        store=flaky,
        summarizer=ScriptedSummarizer(),  # type: ignore[arg-type]
        summarize_every=10,
    ) as session:
        session.after_turn(T, "u1", "s1", turns(10))
        session.drain(timeout=30)
        assert summary_memories(inner) == []
        flaky.broken = False
        session.after_turn(T, "u1", "s1", turns(20))
        session.drain(timeout=30)
    assert summary_memories(inner) == ["summary-v1", "summary-v2"]
    assert inner.pending_outbox() == []


def test_store_outage_during_build_context_degrades_to_window() -> None:
    """If the summary cannot be read the request is still built, without it."""

    class Down(InMemoryStore):
        def latest_summary(self, tenant: str, user_id: str, session_id: str) -> Any:
            raise StoreError("database unavailable")

    events: list[Any] = []
    with SessionMemory(
        store=Down(), summarizer=ScriptedSummarizer(), on_event=[events.append]
    ) as session:
        assert session.build_context(T, "u1", "s1", turns(3)) == turns(3)
        assert session.after_turn(T, "u1", "s1", turns(30)).reason == "error"
    assert {e.stage for e in events} == {"load_summary"}


def test_fifty_concurrent_turns_run_one_job_and_versions_only_go_up() -> None:
    """50 threads on one session: at most one summarizer call at a time, versions 1..n."""
    store, probe = InMemoryStore(), ConcurrencyProbe()
    history = turns(500)
    with SessionMemory(store=store, summarizer=probe, summarize_every=10, max_workers=8) as session:
        for round_ in range(3):
            barrier = threading.Barrier(50)

            def turn(i: int, round_: int = round_, barrier: Any = barrier) -> None:
                barrier.wait()
                session.after_turn(T, "u1", "s1", history[: 10 * (i + 1) + 100 * round_])

            threads = [threading.Thread(target=turn, args=(i,)) for i in range(50)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert session.drain(timeout=60)
    assert probe.most == 1
    summaries = store.summary_history(T, "u1", "s1")
    assert [s.version for s in summaries] == list(range(1, len(summaries) + 1))
    covers = [s.covers_to for s in summaries]
    assert covers == sorted(set(covers))
    assert summary_memories(store) == sorted(f"summary-v{s.version}" for s in summaries)


async def test_async_fifty_concurrent_turns_run_one_job() -> None:
    """50 gathered after_turn calls: one task at a time and gap-free versions."""
    store, probe = AsyncInMemoryStore(), AsyncConcurrencyProbe()
    history = turns(300)
    async with AsyncSessionMemory(store=store, summarizer=probe, summarize_every=10) as session:
        for round_ in range(3):
            results = await asyncio.gather(
                *(
                    session.after_turn(T, "u1", "s1", history[: 5 * (i + 1) + 50 * round_])
                    for i in range(50)
                )
            )
            assert any(r.scheduled for r in results)
            assert await session.drain(timeout=60)
    assert probe.most == 1
    versions = [s.version for s in await store.summary_history(T, "u1", "s1")]
    assert versions == list(range(1, len(versions) + 1))
    assert versions


async def test_async_failing_and_hanging_summarizers_leave_turn_alone() -> None:
    """Async: a hanging job keeps the session in flight; the turn and context go on."""
    release = asyncio.Event()

    class Hanging:
        async def summarize(self, messages: Any, **_: Any) -> SummaryResult:
            await release.wait()
            raise ProviderUnavailable("gave up")

    events: list[Any] = []
    store = AsyncInMemoryStore()
    session = AsyncSessionMemory(store=store, summarizer=Hanging(), on_event=[events.append])
    assert (await session.after_turn(T, "u1", "s1", turns(20))).scheduled
    assert (await session.after_turn(T, "u1", "s1", turns(21))).reason == "in_flight"
    assert await session.build_context(T, "u1", "s1", turns(2)) == turns(2)
    assert not await session.drain(timeout=0)
    release.set()
    await session.aclose()
    assert [e.stage for e in events if isinstance(e, SessionMemoryFailed)] == ["summarize"]
    assert await store.latest_summary(T, "u1", "s1") is None


async def test_async_crash_between_writes_is_recovered_once() -> None:
    """Async: a pending outbox entry is replayed by recover() exactly once."""
    store = AsyncInMemoryStore()
    await store.save_summary(
        SessionSummary(
            tenant=T,
            user_id="u1",
            session_id="s1",
            version=1,
            text="orphan summary",
            covers_from=0,
            covers_to=20,
            model="m",
            content_hash="h",
        )
    )
    session = AsyncSessionMemory(store=store, summarizer=None)
    assert await session.recover() == 1
    assert await session.recover() == 0
    hits = await store.search(T, ("user", "u1"), kind="summary")
    assert [h.item.key for h in hits] == ["summary-v1"]
    await session.aclose()


async def test_async_poison_entries_do_not_block_newer_ones() -> None:
    """Async: recover() counts each failure and reaches the healthy entries behind the poison."""
    clock = FakeClock()
    inner = AsyncInMemoryStore(clock=clock)
    for name in (*POISON, *HEALTHY):
        await inner.save_summary(pending_summary(name))
        clock.advance(1)
    events: list[Any] = []
    store = AsyncPoisonPut(inner, *POISON)
    session = AsyncSessionMemory(store=store, summarizer=None, on_event=[events.append])  # type: ignore[arg-type]
    done = [await session.recover(T, limit=2) for _ in range(4)]
    await session.aclose()
    assert sum(done) == len(HEALTHY)
    remaining = await inner.pending_outbox(T)
    assert sorted(e.summary.session_id for e in remaining) == list(POISON)
    failed = [e for e in events if isinstance(e, SessionMemoryFailed)]
    assert [e.attempts for e in failed if e.session_id == "p1"] == [1, 2]
    for entry in remaining:  # each failure event carries the count so far
        counts = [e.attempts for e in failed if e.session_id == entry.summary.session_id]
        assert counts == list(range(1, entry.attempts + 1))


async def test_a_cancelled_async_job_releases_its_session() -> None:
    """aclose(wait=False) cancels the task; the driver closes the flow, which releases."""
    entered = asyncio.Event()

    class Hanging:
        async def summarize(self, messages: Any, **_: Any) -> SummaryResult:
            entered.set()
            await asyncio.Event().wait()
            raise AssertionError("never answers")

    session = AsyncSessionMemory(store=AsyncInMemoryStore(), summarizer=Hanging())
    assert (await session.after_turn(T, "u1", "s1", turns(20))).scheduled
    await entered.wait()
    await session.aclose(wait=False)
    assert session._registry.claim((T, "u1", "s1")) == "cooldown"
