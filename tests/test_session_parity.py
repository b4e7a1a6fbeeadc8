"""Parity: SessionMemory and AsyncSessionMemory, run on the same scripts, agree on everything.

Equal call results, stored summaries, memories, outbox entries and event sequences, including
the failure paths (a failing or hung summarizer, a broken store, a user deleted mid-job, a job
that ``close()`` abandons).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest

from synopsis.errors import ProviderUnavailable, StoreError
from synopsis.memory._types import MemoryItem, OutboxEntry, SessionSummary
from synopsis.memory.inmemory import AsyncInMemoryStore, InMemoryStore
from synopsis.models.retry import RetryPolicy
from synopsis.session.memory import AsyncSessionMemory, SessionMemory
from synopsis.summarizer import AsyncSummarizer, Summarizer, SummaryResult
from synopsis.testing import AsyncFakeModel, FakeClock, FakeModel, Reply

T, U, S = "acme", "u1", "s1"
GOOD = "<summary>1. Primary Request and Intent: the user asked about coffee.</summary>"
NO_RETRY = RetryPolicy(max_retries=0)


def turns(count: int) -> list[dict[str, Any]]:
    """Alternating user/assistant messages."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} about coffee"}
        for i in range(count)
    ]


def summarizer(*replies: Reply) -> Summarizer:
    """A Summarizer over a FakeModel: ``replies`` first, then good summaries."""
    return Summarizer(model=FakeModel(replies, default=GOOD), retry=NO_RETRY)


@dataclass(frozen=True, slots=True)
class Call:
    """One public method call on the memory.

    Two calls go elsewhere: ``repair`` (the store's puts work again) and ``entered`` (wait
    until the summarizer is inside a call).
    """

    method: str
    args: tuple[Any, ...] = ()


def call(method: str, *args: Any) -> Call:
    return Call(method, args)


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """A script of calls, and the faults the summarizer and store are built with."""

    calls: tuple[Call, ...]
    replies: tuple[Reply, ...] = ()
    blank: bool = False
    broken_put: bool = False
    delete_on_call: int | None = None  # the summarizer deletes the user on this call
    delete_on_put: bool = False  # the store deletes the user before the first memory put
    hang: bool = False  # the summarizer never answers (sync: until the run is over)
    summarize_timeout: float | None = 120.0
    close_timeout: float | None = 30.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """Everything a run leaves: call results, stored state, event sequence."""

    results: list[Any]
    summaries: list[SessionSummary]
    memories: list[MemoryItem]
    outbox: list[OutboxEntry]
    events: list[dict[str, Any]]


def turn(count: int) -> Call:
    """``after_turn`` with a history of ``count`` messages."""
    return call("after_turn", T, U, S, turns(count))


DRAIN = call("drain")
CASES = {
    "due_turn": Case(
        calls=(
            turn(10),
            DRAIN,
            turn(15),
            call("build_context", T, U, S, turns(15)),
            call("recall", T, U, "coffee"),
        )
    ),
    "not_due_turn": Case(calls=(turn(5), DRAIN, call("build_context", T, U, S, turns(5)))),
    "failing_summarizer": Case(
        replies=(ProviderUnavailable("down", model="m"),), calls=(turn(10), DRAIN, turn(11))
    ),
    "invalid_summary": Case(blank=True, calls=(turn(10), DRAIN)),
    "failing_memory_write_then_recover": Case(
        broken_put=True,
        calls=(turn(10), DRAIN, call("repair"), call("recover"), call("recover")),
    ),
    "user_deleted_mid_job": Case(delete_on_call=2, calls=(turn(10), DRAIN, turn(20), DRAIN)),
    "user_deleted_between_writes": Case(delete_on_put=True, calls=(turn(10), DRAIN)),
    "summarizer_timeout": Case(
        hang=True, summarize_timeout=0.05, calls=(turn(10), DRAIN, turn(11))
    ),
    "close_abandons_a_hung_job": Case(
        hang=True, summarize_timeout=None, close_timeout=0.05, calls=(turn(10), call("entered"))
    ),
}


class HookedSummarizer:
    """A Summarizer over a FakeModel that can answer blank text or delete the user first."""

    def __init__(self, case: Case, delete: Callable[[], object]) -> None:
        self.inner = summarizer(*case.replies)
        self.case, self.delete, self.calls = case, delete, 0
        self.inside, self.release = threading.Event(), threading.Event()

    def entered(self) -> bool:
        return self.inside.wait(timeout=60)

    def summarize(self, messages: Sequence[Mapping[str, Any]], **options: Any) -> SummaryResult:
        self.calls += 1
        self.inside.set()
        if self.case.hang:
            self.release.wait()  # the run is over: whatever this returns is dropped
        if self.calls == self.case.delete_on_call:
            self.delete()
        result = self.inner.summarize(messages, **options)
        return replace(result, text="  ") if self.case.blank else result


class AsyncHookedSummarizer:
    """The async twin of :class:`HookedSummarizer`."""

    def __init__(self, case: Case, delete: Callable[[], Awaitable[object]]) -> None:
        model = AsyncFakeModel(case.replies, default=GOOD)
        self.inner = AsyncSummarizer(model=model, retry=NO_RETRY)
        self.case, self.delete, self.calls = case, delete, 0
        self.inside = asyncio.Event()

    async def entered(self) -> bool:
        return await self.inside.wait()

    async def summarize(
        self, messages: Sequence[Mapping[str, Any]], **options: Any
    ) -> SummaryResult:
        self.calls += 1
        self.inside.set()
        if self.case.hang:
            await asyncio.Event().wait()  # cancelled by the time limit or by aclose
        if self.calls == self.case.delete_on_call:
            await self.delete()
        result = await self.inner.summarize(messages, **options)
        return replace(result, text="  ") if self.case.blank else result


class FaultyStore:
    """Puts fail while ``broken``; optionally the user is deleted before the first put."""

    def __init__(self, inner: InMemoryStore, case: Case, delete: Callable[[], object]) -> None:
        self.inner, self.delete = inner, delete
        self.broken, self.delete_pending = case.broken_put, case.delete_on_put

    def repair(self) -> None:
        self.broken = False

    def put(self, *args: Any, **kwargs: Any) -> Any:
        if self.delete_pending:
            self.delete_pending = False
            self.delete()
        if self.broken:
            raise StoreError("connection lost")
        return self.inner.put(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class AsyncFaultyStore:
    """The async twin of :class:`FaultyStore`."""

    def __init__(
        self, inner: AsyncInMemoryStore, case: Case, delete: Callable[[], Awaitable[object]]
    ) -> None:
        self.inner, self.delete = inner, delete
        self.broken, self.delete_pending = case.broken_put, case.delete_on_put

    async def repair(self) -> None:
        self.broken = False

    async def put(self, *args: Any, **kwargs: Any) -> Any:
        if self.delete_pending:
            self.delete_pending = False
            await self.delete()
        if self.broken:
            raise StoreError("connection lost")
        return await self.inner.put(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def target(c: Call, memory: object, store: object, summarizer: object) -> Any:
    """The bound method ``c`` calls."""
    owner = {"repair": store, "entered": summarizer}.get(c.method, memory)
    return getattr(owner, c.method)


def run_sync(case: Case) -> Outcome:
    clock, events = FakeClock(), []
    inner = InMemoryStore(clock=clock)
    store = FaultyStore(inner, case, lambda: memory.delete_user(T, U))
    hooked = HookedSummarizer(case, lambda: memory.delete_user(T, U))
    memory = SessionMemory(
        store=store,  # type: ignore[arg-type]
        summarizer=hooked,
        summarize_every=10,
        window_messages=4,
        clock=clock,
        on_event=[events.append],
        summarize_timeout=case.summarize_timeout,
        close_timeout=case.close_timeout,
    )
    with memory:
        results = [target(c, memory, store, hooked)(*c.args) for c in case.calls]
    outcome = Outcome(
        results=results,
        summaries=inner.summary_history(T, U, S),
        memories=[hit.item for hit in inner.search(T, ("user", U), limit=100)],
        outbox=inner.pending_outbox(T),
        events=[event.to_dict() for event in events],
    )
    hooked.release.set()  # an abandoned call ends in the background; nothing waits for it
    return outcome


async def run_async(case: Case) -> Outcome:
    clock, events = FakeClock(), []
    inner = AsyncInMemoryStore(clock=clock)
    store = AsyncFaultyStore(inner, case, lambda: memory.delete_user(T, U))
    hooked = AsyncHookedSummarizer(case, lambda: memory.delete_user(T, U))
    memory = AsyncSessionMemory(
        store=store,  # type: ignore[arg-type]
        summarizer=hooked,
        summarize_every=10,
        window_messages=4,
        clock=clock,
        on_event=[events.append],
        summarize_timeout=case.summarize_timeout,
        close_timeout=case.close_timeout,
    )
    async with memory:
        results = [await target(c, memory, store, hooked)(*c.args) for c in case.calls]
    return Outcome(
        results=results,
        summaries=await inner.summary_history(T, U, S),
        memories=[hit.item for hit in await inner.search(T, ("user", U), limit=100)],
        outbox=await inner.pending_outbox(T),
        events=[event.to_dict() for event in events],
    )


@pytest.mark.parametrize("name", list(CASES))
async def test_sync_and_async_memories_agree(name: str) -> None:
    """Equal call results, stored summaries, memories, outbox and event sequences."""
    case = CASES[name]
    assert run_sync(case) == await run_async(case)


def test_the_parity_cases_exercise_what_they_name() -> None:
    """Guards the parity test against cases that silently test nothing."""
    stages = {
        name: [e.get("stage") or e["event"] for e in run_sync(case).events]
        for name, case in CASES.items()
    }
    assert stages == {
        "due_turn": ["session_summary_started", "session_summary_saved"],
        "not_due_turn": [],
        "failing_summarizer": ["session_summary_started", "summarize"],
        "invalid_summary": ["session_summary_started", "invalid_summary"],
        "failing_memory_write_then_recover": [
            "session_summary_started",
            "memory_write",
            "session_summary_saved",
            "outbox_replayed",
        ],
        "user_deleted_mid_job": [
            "session_summary_started",
            "session_summary_saved",
            "session_summary_started",
        ],
        "user_deleted_between_writes": ["session_summary_started"],
        "summarizer_timeout": ["session_summary_started", "summarize"],
        "close_abandons_a_hung_job": ["session_summary_started", "job"],
    }
    timed_out = run_sync(CASES["summarizer_timeout"]).events[-1]
    assert timed_out["error"]["type"] == "ModelTimeout"
