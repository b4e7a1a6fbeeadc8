"""Side-store session memory: summarize in the background, inject the summary, recall it later.

After each turn, :meth:`SessionMemory.after_turn` checks whether the session grew by
``summarize_every`` messages since its latest summary. If so it schedules one background
summarizer call and returns at once; the turn never waits for the model and never fails
because of it (every error is logged and reported as an event). The job summarizes only the
new messages, with the previous summary as context, then makes a **dual write**:

1. ``store.save_summary`` stores version ``n + 1`` and, in the same transaction, an outbox
   entry for the long-term copy;
2. ``store.put`` writes the same text as a memory of kind ``"summary"`` in namespace
   ``("user", user_id, "session", session_id)`` under key ``summary-v{n+1}``;
3. ``store.complete_outbox`` closes the entry.

If the process dies between 1 and 3, :meth:`SessionMemory.recover` (call it at start-up; jobs
also call it after each success) replays the pending entries. The memory key is deterministic,
so a replay is an upsert and never a duplicate. Every failed memory write (first try or
replay) is counted on its entry with ``store.fail_outbox``, and ``pending_outbox`` lists the
fewest-failed entries first, so an entry that always fails never blocks newer ones.

At most one job per (tenant, session) runs in this process (an in-process registry behind a
lock). Across replicas the store decides: summary versions are unique per session, so the
second writer of a version fails to save and reports a ``save`` failure; nothing is
duplicated. A failed job starts a cooldown for that session, which stops retry storms.

:meth:`SessionMemory.build_context` builds the request: the system prompt with the summary
injected, optional recalled notes (``hybrid=True``), and a tool-safe window of recent messages
(see :mod:`synopsis.session.context`). Recall searches the store by keyword unless ``recall_mode``
says ``vector`` or ``hybrid`` (a store built with an embedder). :class:`AsyncSessionMemory`
is the asyncio twin.

Every workflow is written once, as a flow of steps in :mod:`synopsis.session._jobs`; the two
classes here only own the threads or tasks, the registry and the lifecycle, and carry the
steps out on the store, the summarizer and the event handlers (``_perform``).

Neither class closes the store it was given; its owner does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from synopsis._flow import adrive, drive
from synopsis.events import SessionEventHandler, aemit, check_sync_handlers, emit, failure
from synopsis.memory._types import SearchHit, SearchMode
from synopsis.session import _jobs
from synopsis.session._jobs import Emit, Runtime, Step, StoreCall
from synopsis.session._state import (
    AsyncSessionStore,
    Job,
    Registry,
    ScheduleResult,
    SessionStore,
    SkipReason,
)
from synopsis.session.context import make_settings
from synopsis.summarizer import AsyncSummarizerLike, SummarizerLike
from synopsis.tokens import Estimator

__all__ = [
    "AsyncSessionMemory",
    "AsyncSessionStore",
    "ScheduleResult",
    "SessionMemory",
    "SessionStore",
    "SkipReason",
]


# ---------------------------------------------------------------------------------------------
# Sync


class SessionMemory:
    """Background session summaries with a dual write, context building and recall (threads)."""

    def __init__(
        self,
        *,
        store: SessionStore,
        summarizer: SummarizerLike | None,
        summarize_every: int = 20,
        window_messages: int | None = 40,
        window_tokens: int | None = None,
        context_budget_tokens: int | None = None,
        hybrid: bool = False,
        recall_limit: int = 5,
        recall_mode: SearchMode = "keyword",
        on_event: Sequence[SessionEventHandler] = (),
        clock: Callable[[], float] = time.time,
        max_workers: int = 2,
        failure_cooldown: float = 60.0,
        estimate: Estimator | None = None,
    ) -> None:
        settings = make_settings(
            summarize_every=summarize_every,
            window_messages=window_messages,
            window_tokens=window_tokens,
            context_budget_tokens=context_budget_tokens,
            hybrid=hybrid,
            recall_limit=recall_limit,
            recall_mode=recall_mode,
            estimate=estimate,
        )
        check_sync_handlers(on_event)
        self._store = store
        self._summarizer = summarizer
        self._handlers = tuple(on_event)
        self._registry = Registry(clock, failure_cooldown)
        self._runtime = Runtime(settings, self._registry, clock)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="synopsis-session"
        )
        self._futures: set[concurrent.futures.Future[None]] = set()
        self._futures_lock = threading.Lock()
        self._closed = False

    def _perform(self, step: Step) -> Any:
        """Carry out one step of a flow on the store, the summarizer or the handlers."""
        if isinstance(step, Emit):
            emit(self._handlers, step.event)
            return None
        return step.on(self._store if isinstance(step, StoreCall) else self._summarizer)

    # --- after each turn ---------------------------------------------------------------------

    def after_turn(
        self, tenant: str, user_id: str, session_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> ScheduleResult:
        """Schedule a background summary when due and return at once.

        Never waits for the model and never raises because of the model or the store (those
        failures become events); only an unusable ``tenant`` raises InvalidInput. ``messages``
        is the session's full history so far; it is copied when a job is scheduled.
        """
        flow = _jobs.admit_turn(
            self._runtime,
            (tenant, user_id, session_id),
            messages,
            closed=self._closed,
            has_summarizer=self._summarizer is not None,
        )
        result, job = drive(flow, self._perform)
        if job is not None:
            self._submit(job)
        return result

    def _submit(self, job: Job) -> None:
        try:
            future = self._executor.submit(self._run, job)
        except RuntimeError as exc:  # shut down between the check and the submit
            self._registry.release(job.key, failed=False)
            emit(self._handlers, failure("job", job.tenant, job.session_id, exc))
            return
        with self._futures_lock:
            self._futures.add(future)
        future.add_done_callback(self._forget)

    def _forget(self, future: concurrent.futures.Future[None]) -> None:
        with self._futures_lock:
            self._futures.discard(future)

    def _run(self, job: Job) -> None:
        with contextlib.closing(_jobs.run_job(self._runtime, job)) as flow:
            drive(flow, self._perform)

    def recover(self, tenant: str | None = None, *, limit: int = 100) -> int:
        """Replay pending entries, fewest failures first; return how many completed."""
        return drive(_jobs.recover(tenant, limit=limit), self._perform)

    # --- building a request ------------------------------------------------------------------

    def build_context(
        self,
        tenant: str,
        user_id: str,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        system_prompt: str | None = None,
        query: str | None = None,
    ) -> list[dict[str, Any]]:
        """The messages to send: system prompt + summary, [recalled notes], recent window."""
        flow = _jobs.build_context(
            self._runtime.settings,
            (tenant, user_id, session_id),
            messages,
            system_prompt=system_prompt,
            query=query,
        )
        return drive(flow, self._perform)

    def recall(
        self,
        tenant: str,
        user_id: str,
        query: str,
        *,
        limit: int = 10,
        kind: str | None = None,
        mode: SearchMode | None = None,
    ) -> list[SearchHit]:
        """Recall over every memory of the user, across all their sessions.

        ``mode`` defaults to the ``recall_mode`` this memory was built with.
        """
        flow = _jobs.recall(
            self._runtime.settings, tenant, user_id, query, limit=limit, kind=kind, mode=mode
        )
        return drive(flow, self._perform)

    def delete_user(self, tenant: str, user_id: str) -> int:
        """Delete the user's memories, summaries and outbox entries; return how many."""
        return drive(_jobs.delete_user(self._registry, tenant, user_id), self._perform)

    # --- lifecycle ---------------------------------------------------------------------------

    def drain(self, timeout: float | None = None) -> bool:
        """Wait for scheduled jobs (and the ones they schedule); False if ``timeout`` ran out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._futures_lock:
                pending = set(self._futures)
            if not pending:
                return True
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            _, not_done = concurrent.futures.wait(pending, timeout=left)
            if not_done:
                return False

    def close(self, *, wait: bool = True) -> None:
        """Stop accepting jobs; wait for running ones unless ``wait=False`` (queued are dropped)."""
        self._closed = True
        self._executor.shutdown(wait=wait, cancel_futures=not wait)

    def __enter__(self) -> SessionMemory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# Async


class AsyncSessionMemory:
    """The asyncio twin of :class:`SessionMemory`: jobs are tasks on the running loop."""

    def __init__(
        self,
        *,
        store: AsyncSessionStore,
        summarizer: AsyncSummarizerLike | None,
        summarize_every: int = 20,
        window_messages: int | None = 40,
        window_tokens: int | None = None,
        context_budget_tokens: int | None = None,
        hybrid: bool = False,
        recall_limit: int = 5,
        recall_mode: SearchMode = "keyword",
        on_event: Sequence[SessionEventHandler] = (),
        clock: Callable[[], float] = time.time,
        failure_cooldown: float = 60.0,
        estimate: Estimator | None = None,
    ) -> None:
        settings = make_settings(
            summarize_every=summarize_every,
            window_messages=window_messages,
            window_tokens=window_tokens,
            context_budget_tokens=context_budget_tokens,
            hybrid=hybrid,
            recall_limit=recall_limit,
            recall_mode=recall_mode,
            estimate=estimate,
        )
        self._store = store
        self._summarizer = summarizer
        self._handlers = tuple(on_event)
        self._registry = Registry(clock, failure_cooldown)
        self._runtime = Runtime(settings, self._registry, clock)
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    async def _perform(self, step: Step) -> Any:
        """Carry out one step of a flow, awaiting the store, the summarizer or the handlers."""
        if isinstance(step, Emit):
            await aemit(self._handlers, step.event)
            return None
        return await step.on(self._store if isinstance(step, StoreCall) else self._summarizer)

    async def after_turn(
        self, tenant: str, user_id: str, session_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> ScheduleResult:
        """Schedule a background summary task when due and return at once (see SessionMemory)."""
        flow = _jobs.admit_turn(
            self._runtime,
            (tenant, user_id, session_id),
            messages,
            closed=self._closed,
            has_summarizer=self._summarizer is not None,
        )
        result, job = await adrive(flow, self._perform)
        if job is not None:
            task = asyncio.get_running_loop().create_task(self._run(job))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return result

    async def _run(self, job: Job) -> None:
        # closing: a cancelled task still releases the session (the flow's finally runs)
        with contextlib.closing(_jobs.run_job(self._runtime, job)) as flow:
            await adrive(flow, self._perform)

    async def recover(self, tenant: str | None = None, *, limit: int = 100) -> int:
        """Replay pending entries, fewest failures first; return how many completed."""
        return await adrive(_jobs.recover(tenant, limit=limit), self._perform)

    async def build_context(
        self,
        tenant: str,
        user_id: str,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        system_prompt: str | None = None,
        query: str | None = None,
    ) -> list[dict[str, Any]]:
        """The messages to send: system prompt + summary, [recalled notes], recent window."""
        flow = _jobs.build_context(
            self._runtime.settings,
            (tenant, user_id, session_id),
            messages,
            system_prompt=system_prompt,
            query=query,
        )
        return await adrive(flow, self._perform)

    async def recall(
        self,
        tenant: str,
        user_id: str,
        query: str,
        *,
        limit: int = 10,
        kind: str | None = None,
        mode: SearchMode | None = None,
    ) -> list[SearchHit]:
        """Recall over every memory of the user, across all their sessions.

        ``mode`` defaults to the ``recall_mode`` this memory was built with.
        """
        flow = _jobs.recall(
            self._runtime.settings, tenant, user_id, query, limit=limit, kind=kind, mode=mode
        )
        return await adrive(flow, self._perform)

    async def delete_user(self, tenant: str, user_id: str) -> int:
        """Delete the user's memories, summaries and outbox entries; return how many."""
        return await adrive(_jobs.delete_user(self._registry, tenant, user_id), self._perform)

    async def drain(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Wait for scheduled jobs (and the ones they schedule); False if ``timeout`` ran out."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self._tasks:
            left = None if deadline is None else max(deadline - loop.time(), 0.0)
            _, not_done = await asyncio.wait(set(self._tasks), timeout=left)
            if not_done:
                return False
        return True

    async def aclose(self, *, wait: bool = True) -> None:
        """Stop accepting jobs; wait for running ones, or cancel them with ``wait=False``."""
        self._closed = True
        if wait:
            await self.drain()
            return
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def __aenter__(self) -> AsyncSessionMemory:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
