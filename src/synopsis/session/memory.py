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

A session is (tenant, user_id, session_id): two users who both call their session ``main``
never see each other's summaries. At most one job per session runs in this process (an
in-process registry behind a lock). Across replicas the store decides: before it calls the
model a job claims its session in the store (a lease of ``summarize_timeout`` plus a minute),
and a replica that finds the session claimed by another skips the job without a model call
(the job ends ``claimed_elsewhere``), so one replica pays for each summary. ``owner`` names the
claimant (default: random per instance); a process that restarts under the same ``owner`` takes
its own unexpired claims back at once. Should a lease run
out under a hung call, summary versions are still unique per session: the second writer of
a version fails to save and reports a ``save`` failure; nothing is duplicated. A failed job
starts a cooldown for that session, which stops retry storms.

Deletion wins, across processes too: :meth:`SessionMemory.delete_user` (or the store's
``delete_user``, as the CLI runs it) moves the user's deletion generation in the store, and a
job admitted before carries the old one, so the store refuses its summary and its memory
copy; the job ends ``deleted``, with no data and no event.

:meth:`SessionMemory.build_context` builds the request: the system prompt with the summary
injected, optional recalled notes (``hybrid=True``), and a tool-safe window of recent messages
(see :mod:`synopsis.session.context`). Recall searches the store by keyword unless ``recall_mode``
says ``vector`` or ``hybrid`` (a store built with an embedder). :class:`AsyncSessionMemory`
is the asyncio twin.

Every workflow is written once, as a flow of steps in :mod:`synopsis.session._jobs`; the two
classes here only own the threads or tasks, the registry and the lifecycle, and carry the
steps out on the store, the summarizer and the event handlers (``_perform``, which every store
call passes and which traces it: see :mod:`synopsis.session._tracing`).

Nothing here can keep a process alive. A summarizer call gets ``summarize_timeout`` seconds
(default 120; None for no limit): the async twin cancels it, the sync twin stops waiting and
leaves the call on a daemon thread, its late result dropped; either way the job fails with a
``summarize`` failure (a ``ModelTimeout``) and the session is released. ``close()`` waits at
most ``close_timeout`` seconds (default 30) and reports each job it abandons as a ``job``
failure; ``close(wait=False)`` returns at once. Sync jobs run on daemon threads, which the
interpreter does not wait for at exit (see :mod:`synopsis.session._workers`).

A summary is bounded: a new version is cut to ``max_summary_chars`` (default 20,000) before it
is saved, and the injected text to ``max_summary_tokens`` and half of
``context_budget_tokens``; each cut is reported as a ``session_summary_truncated`` event.

With ``redact=`` (a :class:`~synopsis.redact.Redactor`, or True for the default one) a job
redacts what it sends the summarizer (the new messages and the previous summary) and the
summary before it is stored, so the stored versions, their long-term memory copies and the
outbox hold no value the redactor finds (:mod:`synopsis.session._redaction`).

Neither class closes the store it was given; its owner does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar, Unpack

from synopsis._flow import Emit, Flow, adrive, drive
from synopsis._options import check_twin, chosen_options
from synopsis.events import aemit, check_sync_handlers, emit, failure
from synopsis.memory import SearchHit, SearchMode
from synopsis.session import _jobs
from synopsis.session._jobs import Runtime, Step, timed_out
from synopsis.session._state import (
    AsyncSessionStore,
    Job,
    Registry,
    ScheduleResult,
    SessionStore,
    SkipReason,
    abandoned_event,
)
from synopsis.session._tracing import SessionTracer
from synopsis.session._workers import DaemonPool, call_within
from synopsis.session.options import SessionKeywords, SessionOptions
from synopsis.summarizer import AsyncSummarizerLike, Summarize, SummarizerLike
from synopsis.telemetry import Tracing

__all__ = [
    "AsyncSessionMemory",
    "AsyncSessionStore",
    "ScheduleResult",
    "SessionMemory",
    "SessionStore",
    "SkipReason",
]

StoreT = TypeVar("StoreT", SessionStore, AsyncSessionStore)
SummarizerT = TypeVar("SummarizerT", SummarizerLike, AsyncSummarizerLike)


class _Driver(Generic[StoreT, SummarizerT]):
    """What both twins share: the options, the registry, the tracer, and the flows they run."""

    def __init__(
        self, store: StoreT, summarizer: SummarizerT | None, options: SessionOptions
    ) -> None:
        self._store: StoreT = store
        self._summarizer: SummarizerT | None = summarizer
        self._handlers = tuple(options.on_event)
        self._registry = Registry(options.clock, options.failure_cooldown)
        owner = options.owner or uuid.uuid4().hex
        self._runtime = Runtime(options, self._registry, options.clock, owner=owner)
        self._tracer = SessionTracer(
            Tracing(tracer_provider=options.tracer_provider),
            store=store,
            summarizer=summarizer,
            trace_tenant=options.trace_tenant,
        )
        self._close_timeout = options.close_timeout
        self._closed = False

    @property
    def options(self) -> SessionOptions:
        """The options this memory was built with."""
        return self._runtime.options

    def _admission(
        self, ids: tuple[str, str, str], messages: Sequence[Mapping[str, Any]]
    ) -> Flow[Step, tuple[ScheduleResult, Job | None]]:
        return _jobs.admit_turn(
            self._runtime,
            ids,
            messages,
            closed=self._closed,
            has_summarizer=self._summarizer is not None,
        )

    def _context(
        self,
        ids: tuple[str, str, str],
        messages: Sequence[Mapping[str, Any]],
        system_prompt: str | None,
        query: str | None,
    ) -> tuple[Flow[Step, list[dict[str, Any]]], AbstractContextManager[Any]]:
        """The flow that builds a request, and the span that traces it."""
        flow = _jobs.build_context(
            self._runtime.options, ids, messages, system_prompt=system_prompt, query=query
        )
        return flow, self._tracer.build_context(ids[0], ids[2], len(messages))

    def _recall(
        self,
        tenant: str,
        user_id: str,
        query: str,
        limit: int,
        kind: str | Collection[str] | None,
        exclude_kinds: str | Collection[str] | None,
        mode: SearchMode | None,
    ) -> tuple[Flow[Step, list[SearchHit]], AbstractContextManager[Any]]:
        """The flow of a recall (its kind filter checked, its mode chosen), and its span."""
        mode = mode or self._runtime.options.recall_mode
        kinds = _jobs.recall_kinds(kind, exclude_kinds)
        flow = _jobs.recall(
            self._runtime.options, tenant, user_id, query, limit=limit, kinds=kinds, mode=mode
        )
        return flow, self._tracer.recall(tenant, limit=limit, kinds=kinds, mode=mode)


# ---------------------------------------------------------------------------------------------
# Sync


class SessionMemory(_Driver[SessionStore, SummarizerLike]):
    """Background session summaries with a dual write, context building and recall (threads).

    Options come as one :class:`~synopsis.session.options.SessionOptions` (``options=``) or as
    the same keyword arguments; ``max_workers`` (the job threads) belongs to this driver.
    """

    def __init__(
        self,
        *,
        store: SessionStore,
        summarizer: SummarizerLike | None,
        options: SessionOptions | None = None,
        max_workers: int = 2,
        **keywords: Unpack[SessionKeywords],
    ) -> None:
        chosen = chosen_options(SessionOptions, options, keywords, SessionOptions.from_keywords)
        check_sync_handlers(chosen.on_event)
        check_twin(
            store, role="store", method="latest_summary", async_=False, owner="SessionMemory"
        )
        check_twin(
            summarizer, role="summarizer", method="summarize", async_=False, owner="SessionMemory"
        )
        super().__init__(store, summarizer, chosen)
        self._workers = DaemonPool(max_workers, name="synopsis-session")
        self._jobs: dict[concurrent.futures.Future[None], Job] = {}
        self._jobs_lock = threading.Lock()

    def _perform(self, step: Step) -> Any:
        """Carry out one step of a flow on the store, the summarizer or the handlers."""
        with self._tracer.step(step) as record:
            result = self._carry_out(step)
            record(result)
        return result

    def _carry_out(self, step: Step) -> Any:
        if isinstance(step, Emit):
            emit(self._handlers, step.event)
            return None
        if isinstance(step, Summarize):
            return call_within(
                lambda: step.on(self._summarizer),
                step.timeout,
                on_timeout=lambda: timed_out(step),
                name="synopsis-session-summarize",
            )
        return step.on(self._store)

    # --- after each turn ---------------------------------------------------------------------

    def after_turn(
        self, tenant: str, user_id: str, session_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> ScheduleResult:
        """Schedule a background summary when due and return at once.

        Never waits for the model and never raises because of the model or the store (those
        failures become events); only an unusable ``tenant`` raises InvalidInput. ``messages``
        is the session's full history so far; it is copied when a job is scheduled.
        """
        flow = self._admission((tenant, user_id, session_id), messages)
        result, job = drive(flow, self._perform)
        if job is not None:
            self._submit(job)
        return result

    def _submit(self, job: Job) -> None:
        try:
            future = self._workers.submit(lambda: self._run(job))
        except RuntimeError as exc:  # shut down between the check and the submit
            self._registry.release(job.key, failed=False)
            emit(self._handlers, failure("job", job.tenant, job.session_id, exc))
            return
        with self._jobs_lock:
            self._jobs[future] = job
        future.add_done_callback(self._forget)

    def _forget(self, future: concurrent.futures.Future[None]) -> None:
        with self._jobs_lock:
            job = self._jobs.pop(future, None)
        if job is not None and future.cancelled():  # dropped by close() before it ran
            self._registry.release(job.key, failed=False)

    def _run(self, job: Job) -> None:
        with (
            self._tracer.job(job) as span,
            contextlib.closing(_jobs.run_job(self._runtime, job)) as flow,
        ):
            self._tracer.job_ended(span, drive(flow, self._perform))

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
        ids = (tenant, user_id, session_id)
        flow, traced = self._context(ids, messages, system_prompt, query)
        with traced as span:
            built = drive(flow, self._perform)
            self._tracer.counted(span, "synopsis.context.messages", built)
        return built

    def recall(
        self,
        tenant: str,
        user_id: str,
        query: str,
        *,
        limit: int = 10,
        kind: str | Collection[str] | None = None,
        exclude_kinds: str | Collection[str] | None = None,
        mode: SearchMode | None = None,
    ) -> list[SearchHit]:
        """Recall over every memory of the user, across all their sessions.

        ``kind``: only memories of this kind (or these kinds). ``exclude_kinds``: never these
        kinds; by default, stored transcripts (``synopsis.memory.TRANSCRIPT_KINDS``) unless
        ``kind`` asks for them. ``mode`` defaults to the ``recall_mode`` this memory was built
        with.
        """
        flow, traced = self._recall(tenant, user_id, query, limit, kind, exclude_kinds, mode)
        with traced as span:
            hits = drive(flow, self._perform)
            self._tracer.counted(span, "synopsis.recall.hits", hits)
        return hits

    def delete_user(self, tenant: str, user_id: str) -> int:
        """Delete the user's memories, summaries and outbox entries; return how many."""
        return drive(_jobs.delete_user(self._registry, tenant, user_id), self._perform)

    # --- lifecycle ---------------------------------------------------------------------------

    def drain(self, timeout: float | None = None) -> bool:
        """Wait for scheduled jobs (and the ones they schedule); False if ``timeout`` ran out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._jobs_lock:
                pending = set(self._jobs)
            if not pending:
                return True
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            _, not_done = concurrent.futures.wait(pending, timeout=left)
            if not_done:
                return False

    def close(self, *, wait: bool = True) -> None:
        """Stop accepting jobs, then wait for queued and running ones (``wait=True``).

        The wait lasts at most ``close_timeout`` seconds; jobs still unfinished then are
        abandoned (each reported as a ``job`` failure): a running one is left on its daemon
        thread, a queued one is dropped. ``wait=False`` drops the queued jobs and returns at
        once. Daemon threads never delay the exit of the process.
        """
        self._closed = True
        self._workers.shutdown(cancel_pending=not wait)
        if wait and not self.drain(self._close_timeout):
            abandoned = self._unfinished()
            self._workers.shutdown(cancel_pending=True)
            for job in abandoned:
                emit(self._handlers, abandoned_event(job, self._close_timeout))

    def _unfinished(self) -> list[Job]:
        with self._jobs_lock:
            return [job for future, job in self._jobs.items() if not future.done()]

    def __enter__(self) -> SessionMemory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if not self._closed:  # a close(wait=False) inside the block is not undone by a wait
            self.close()


# ---------------------------------------------------------------------------------------------
# Async


class AsyncSessionMemory(_Driver[AsyncSessionStore, AsyncSummarizerLike]):
    """The asyncio twin of :class:`SessionMemory`: jobs are tasks on the running loop."""

    def __init__(
        self,
        *,
        store: AsyncSessionStore,
        summarizer: AsyncSummarizerLike | None,
        options: SessionOptions | None = None,
        **keywords: Unpack[SessionKeywords],
    ) -> None:
        chosen = chosen_options(SessionOptions, options, keywords, SessionOptions.from_keywords)
        owner = "AsyncSessionMemory"
        check_twin(store, role="store", method="latest_summary", async_=True, owner=owner)
        check_twin(summarizer, role="summarizer", method="summarize", async_=True, owner=owner)
        super().__init__(store, summarizer, chosen)
        self._tasks: dict[asyncio.Task[None], Job] = {}

    async def _perform(self, step: Step) -> Any:
        """Carry out one step of a flow, awaiting the store, the summarizer or the handlers."""
        with self._tracer.step(step) as record:
            result = await self._carry_out(step)
            record(result)
        return result

    async def _carry_out(self, step: Step) -> Any:
        if isinstance(step, Emit):
            await aemit(self._handlers, step.event)
            return None
        if isinstance(step, Summarize):
            return await self._summarize(step)
        return await step.on(self._store)

    async def _summarize(self, step: Summarize) -> Any:
        """Await the summarizer, cancelling it after ``step.timeout`` seconds."""
        if step.timeout is None:
            return await step.on(self._summarizer)
        try:
            async with asyncio.timeout(step.timeout) as limit:
                return await step.on(self._summarizer)
        except TimeoutError:
            if limit.expired():
                raise timed_out(step) from None
            raise  # the summarizer's own

    async def after_turn(
        self, tenant: str, user_id: str, session_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> ScheduleResult:
        """Schedule a background summary task when due and return at once (see SessionMemory)."""
        flow = self._admission((tenant, user_id, session_id), messages)
        result, job = await adrive(flow, self._perform)
        if job is not None:
            task = asyncio.get_running_loop().create_task(self._run(job))
            self._tasks[task] = job
            task.add_done_callback(self._forget)
        return result

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)

    async def _run(self, job: Job) -> None:
        # closing: a cancelled task still releases the session (the flow's finally runs)
        with (
            self._tracer.job(job) as span,
            contextlib.closing(_jobs.run_job(self._runtime, job)) as flow,
        ):
            try:
                outcome = await adrive(flow, self._perform)
            except asyncio.CancelledError:
                self._tracer.job_ended(span, "cancelled")
                raise
            self._tracer.job_ended(span, outcome)

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
        ids = (tenant, user_id, session_id)
        flow, traced = self._context(ids, messages, system_prompt, query)
        with traced as span:
            built = await adrive(flow, self._perform)
            self._tracer.counted(span, "synopsis.context.messages", built)
        return built

    async def recall(
        self,
        tenant: str,
        user_id: str,
        query: str,
        *,
        limit: int = 10,
        kind: str | Collection[str] | None = None,
        exclude_kinds: str | Collection[str] | None = None,
        mode: SearchMode | None = None,
    ) -> list[SearchHit]:
        """Recall over every memory of the user (see :meth:`SessionMemory.recall`)."""
        flow, traced = self._recall(tenant, user_id, query, limit, kind, exclude_kinds, mode)
        with traced as span:
            hits = await adrive(flow, self._perform)
            self._tracer.counted(span, "synopsis.recall.hits", hits)
        return hits

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
        """Stop accepting jobs, then wait for running ones (``wait=True``).

        The wait lasts at most ``close_timeout`` seconds; jobs still unfinished then are
        cancelled and reported as ``job`` failures. ``wait=False`` cancels them at once.
        """
        self._closed = True
        if wait:
            if await self.drain(self._close_timeout):
                return
            for job in list(self._tasks.values()):
                await aemit(self._handlers, abandoned_event(job, self._close_timeout))
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def __aenter__(self) -> AsyncSessionMemory:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if not self._closed:  # an aclose(wait=False) inside the block is not undone by a wait
            await self.aclose()
