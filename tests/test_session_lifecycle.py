"""Session memory never keeps a process alive: summarizer time limits, bounded close, exit.

The subprocess tests run a real interpreter whose summarizer blocks forever; ``timeout=`` on
``subprocess.run`` only guards the suite against a hang, it asserts nothing about time.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import synopsis
from synopsis.events import SessionMemoryFailed
from synopsis.memory.inmemory import AsyncInMemoryStore, InMemoryStore
from synopsis.session._workers import DaemonPool, call_within
from synopsis.session.memory import AsyncSessionMemory, SessionMemory
from synopsis.summarizer import SummaryResult
from synopsis.testing import FakeClock

T = "acme"
REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")
GOOD = SummaryResult(text="1. Primary Request and Intent: coffee.", model="m", attempts=1)

SCRIPT = textwrap.dedent(
    """
    import json, sys, threading
    from synopsis.memory.inmemory import InMemoryStore
    from synopsis.session.memory import SessionMemory

    mode, options = sys.argv[1], json.loads(sys.argv[2])
    entered = threading.Event()

    class Hanging:
        def summarize(self, messages, **_):
            entered.set()
            threading.Event().wait()  # never answers

    def report(event):
        print(json.dumps(event.to_dict()), flush=True)

    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    memory = SessionMemory(
        store=InMemoryStore(), summarizer=Hanging(), summarize_every=2, on_event=[report],
        **options,
    )
    if mode == "with":
        with memory:
            assert memory.after_turn("acme", "u1", "s1", history).scheduled
            assert entered.wait(30)
    else:
        assert memory.after_turn("acme", "u1", "s1", history).scheduled
        assert entered.wait(30)
        memory.close(wait=False)
    print(json.dumps({"event": "left"}), flush=True)
    """
)


def run_script(mode: str, **options: Any) -> list[dict[str, Any]]:
    """Run SCRIPT in a fresh interpreter; the events it printed, once it has exited."""
    source = str(Path(synopsis.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode, json.dumps(options)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,  # a hang guard: a hung process fails the test instead of the suite
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def stages(events: Sequence[Mapping[str, Any]]) -> list[str]:
    return [e.get("stage") or e["event"] for e in events]


def test_a_process_exits_after_close_without_waiting_on_a_hung_summarizer() -> None:
    """close(wait=False) returns at once and the interpreter does not join the hung worker."""
    assert stages(run_script("close")) == ["session_summary_started", "left"]


def test_leaving_the_with_block_abandons_a_hung_job_after_close_timeout() -> None:
    """__exit__ waits close_timeout, reports the job it abandons, and the process exits."""
    events = run_script("with", close_timeout=0.2, summarize_timeout=None)
    assert stages(events) == ["session_summary_started", "job", "left"]
    assert events[1]["error"]["type"] == "TimeoutError"
    assert "close_timeout" in events[1]["error"]["message"]


def test_a_summarize_timeout_fails_the_job_and_the_process_exits() -> None:
    """The hung call is abandoned after summarize_timeout; close then has nothing to wait for."""
    events = run_script("with", summarize_timeout=0.2)
    assert stages(events) == ["session_summary_started", "summarize", "left"]
    assert events[1]["error"]["type"] == "ModelTimeout"


# ---------------------------------------------------------------------------------------------
# In process


def turns(count: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
        for i in range(count)
    ]


class Blocking:
    """Blocks every call until ``release`` is set, then answers GOOD (or raises ``error``)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.entered, self.release, self.returned = threading.Event(), threading.Event(), []
        self.error = error

    def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:
        if self.error is not None:
            raise self.error
        self.entered.set()
        self.release.wait()
        self.returned.append(GOOD)
        return GOOD


def test_a_hung_summarizer_times_out_releases_the_session_and_its_late_answer_is_dropped() -> None:
    """summarize_timeout: a ModelTimeout failure, a cooldown, and nothing saved afterwards."""
    clock, events, summarizer = FakeClock(), [], Blocking()
    store = InMemoryStore(clock=clock)
    memory = SessionMemory(
        store=store,
        summarizer=summarizer,
        summarize_every=10,
        summarize_timeout=0.05,
        clock=clock,
        on_event=[events.append],
    )
    with memory:
        assert memory.after_turn(T, "u1", "s1", turns(10)).scheduled
        assert memory.drain(timeout=60)
        assert memory.after_turn(T, "u1", "s1", turns(11)).reason == "cooldown"
        summarizer.release.set()  # the abandoned call answers now; nobody reads it
    failed = [e for e in events if isinstance(e, SessionMemoryFailed)]
    assert [(e.stage, e.error["type"]) for e in failed] == [("summarize", "ModelTimeout")]
    assert store.latest_summary(T, "u1", "s1") is None
    clock.advance(3600)
    assert memory._registry.claim((T, "u1", "s1")) is None  # released, only cooling down


def test_a_summarizers_own_timeout_error_is_not_mistaken_for_the_limit() -> None:
    """A TimeoutError the summarizer raises itself is reported as it is."""
    events: list[Any] = []
    summarizer = Blocking(error=TimeoutError("upstream read timed out"))
    with SessionMemory(
        store=InMemoryStore(), summarizer=summarizer, summarize_every=10, on_event=[events.append]
    ) as memory:
        memory.after_turn(T, "u1", "s1", turns(10))
        assert memory.drain(timeout=60)
    (failed,) = [e for e in events if isinstance(e, SessionMemoryFailed)]
    assert failed.error["type"] == "TimeoutError"


def test_close_waits_at_most_close_timeout_and_reports_running_and_queued_jobs() -> None:
    """One worker hangs, one job waits in the queue: close reports both and drops the queued."""
    events, summarizer = [], Blocking()
    memory = SessionMemory(
        store=InMemoryStore(),
        summarizer=summarizer,
        summarize_every=10,
        summarize_timeout=None,
        close_timeout=0.05,
        max_workers=1,
        on_event=[events.append],
    )
    assert memory.after_turn(T, "u1", "s1", turns(10)).scheduled
    assert summarizer.entered.wait(timeout=60)
    assert memory.after_turn(T, "u1", "s2", turns(10)).scheduled
    try:
        memory.close()
        abandoned = [e for e in events if isinstance(e, SessionMemoryFailed)]
        assert [(e.stage, e.session_id) for e in abandoned] == [("job", "s1"), ("job", "s2")]
        assert {e.error["type"] for e in abandoned} == {"TimeoutError"}
        assert memory._registry.claim((T, "u1", "s2")) is None  # the dropped job let go of s2
    finally:
        summarizer.release.set()


def test_with_block_after_close_without_wait_does_not_wait_again() -> None:
    """close(wait=False) inside the block stays final: __exit__ does not wait for the job."""
    events, summarizer = [], Blocking()
    try:
        with SessionMemory(
            store=InMemoryStore(),
            summarizer=summarizer,
            summarize_every=10,
            summarize_timeout=None,
            close_timeout=None,  # a second, waiting close would hang the test
            on_event=[events.append],
        ) as memory:
            memory.after_turn(T, "u1", "s1", turns(10))
            assert summarizer.entered.wait(timeout=60)
            memory.close(wait=False)
        assert [e.name for e in events] == ["session_summary_started"]
    finally:
        summarizer.release.set()


def test_job_threads_are_daemons() -> None:
    """The interpreter never waits for a session job thread at exit."""
    summarizer = Blocking()
    memory = SessionMemory(store=InMemoryStore(), summarizer=summarizer, summarize_every=10)
    memory.after_turn(T, "u1", "s1", turns(10))
    assert summarizer.entered.wait(timeout=60)
    ours = [t for t in threading.enumerate() if t.name.startswith("synopsis-session")]
    summarizer.release.set()
    memory.close()
    assert ours
    assert all(t.daemon for t in ours)


def test_close_timeout_and_summarize_timeout_are_validated() -> None:
    """A time limit is positive seconds or None."""
    for option in ("close_timeout", "summarize_timeout"):
        with pytest.raises(synopsis.ConfigError, match=option):
            SessionMemory(store=InMemoryStore(), summarizer=None, **{option: 0})
        with pytest.raises(synopsis.ConfigError, match=option):
            AsyncSessionMemory(store=AsyncInMemoryStore(), summarizer=None, **{option: -1.0})


# ---------------------------------------------------------------------------------------------
# Async


class AsyncBlocking:
    """Awaits forever (until cancelled), or raises ``error``."""

    def __init__(self, error: Exception | None = None) -> None:
        self.entered, self.error, self.cancelled = asyncio.Event(), error, 0

    async def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:
        if self.error is not None:
            raise self.error
        self.entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError("never answers")


async def test_async_summarize_timeout_cancels_the_call_and_releases_the_session() -> None:
    """The async twin cancels the call; the same ModelTimeout failure, the same cooldown."""
    clock, events, summarizer = FakeClock(), [], AsyncBlocking()
    async with AsyncSessionMemory(
        store=AsyncInMemoryStore(clock=clock),
        summarizer=summarizer,
        summarize_every=10,
        summarize_timeout=0.05,
        clock=clock,
        on_event=[events.append],
    ) as memory:
        assert (await memory.after_turn(T, "u1", "s1", turns(10))).scheduled
        assert await memory.drain(timeout=60)
        assert (await memory.after_turn(T, "u1", "s1", turns(11))).reason == "cooldown"
    failed = [e for e in events if isinstance(e, SessionMemoryFailed)]
    assert [(e.stage, e.error["type"]) for e in failed] == [("summarize", "ModelTimeout")]
    assert summarizer.cancelled == 1


async def test_async_summarizers_own_timeout_error_is_not_mistaken_for_the_limit() -> None:
    """Async: a TimeoutError the summarizer raises itself is reported as it is."""
    events: list[Any] = []
    summarizer = AsyncBlocking(error=TimeoutError("upstream read timed out"))
    async with AsyncSessionMemory(
        store=AsyncInMemoryStore(),
        summarizer=summarizer,
        summarize_every=10,
        on_event=[events.append],
    ) as memory:
        await memory.after_turn(T, "u1", "s1", turns(10))
        assert await memory.drain(timeout=60)
    (failed,) = [e for e in events if isinstance(e, SessionMemoryFailed)]
    assert failed.error["type"] == "TimeoutError"


async def test_async_close_waits_at_most_close_timeout_then_cancels_and_reports() -> None:
    """aclose waits close_timeout, reports the unfinished job, cancels it, releases it."""
    events, summarizer = [], AsyncBlocking()
    memory = AsyncSessionMemory(
        store=AsyncInMemoryStore(),
        summarizer=summarizer,
        summarize_every=10,
        summarize_timeout=None,
        close_timeout=0.05,
        on_event=[events.append],
    )
    async with memory:
        assert (await memory.after_turn(T, "u1", "s1", turns(10))).scheduled
        await summarizer.entered.wait()
    (abandoned,) = [e for e in events if isinstance(e, SessionMemoryFailed)]
    assert (abandoned.stage, abandoned.error["type"]) == ("job", "TimeoutError")
    assert summarizer.cancelled == 1
    assert memory._registry.claim((T, "u1", "s1")) == "cooldown"


# ---------------------------------------------------------------------------------------------
# The daemon pool


def test_the_pool_runs_queued_calls_after_a_waiting_shutdown_and_refuses_new_ones() -> None:
    pool = DaemonPool(1, name="synopsis-session-test")
    gate = threading.Event()
    first = pool.submit(gate.wait)
    second = pool.submit(lambda: "second")
    pool.shutdown(cancel_pending=False)
    with pytest.raises(RuntimeError):
        pool.submit(lambda: "late")
    gate.set()
    assert (first.result(timeout=60), second.result(timeout=60)) == (True, "second")


def test_the_pool_runs_each_call_in_the_submitters_context() -> None:
    """Like an asyncio task: a context variable set by the caller is seen by the job."""
    pool = DaemonPool(2, name="synopsis-session-test")
    token = REQUEST.set("turn-7")
    try:
        assert pool.submit(REQUEST.get).result(timeout=60) == "turn-7"
        assert call_within(REQUEST.get, 60, on_timeout=RuntimeError, name="t") == "turn-7"
    finally:
        REQUEST.reset(token)
        pool.shutdown(cancel_pending=True)


def test_call_within_raises_the_given_error_when_time_runs_out() -> None:
    gate = threading.Event()
    try:
        with pytest.raises(LookupError):
            call_within(gate.wait, 0.01, on_timeout=LookupError, name="synopsis-session-test")
    finally:
        gate.set()
