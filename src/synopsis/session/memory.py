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

Neither class closes the store it was given; its owner does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from synopsis.errors import InvalidSummary
from synopsis.events import (
    OutboxReplayed,
    SessionEventHandler,
    aemit,
    check_sync_handlers,
    emit,
    failure,
)
from synopsis.memory._types import (
    OutboxEntry,
    SearchHit,
    SearchMode,
    SessionSummary,
    validate_tenant,
)
from synopsis.session._state import (
    AsyncSessionStore,
    Job,
    Registry,
    ScheduleResult,
    SessionStore,
    SkipReason,
    saved_event,
    started_event,
)
from synopsis.session.context import (
    build_messages,
    is_due,
    make_settings,
    memory_tags,
    next_summary,
    recall_query,
    split_system,
    summary_key,
    summary_namespace,
    summary_span,
)
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


#: How a background job ended: ``failed`` (nothing saved; the session cools down), ``saved``
#: (the summary is stored, its memory write failed and waits in the outbox) or ``done``.
JobOutcome = Literal["failed", "saved", "done"]


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
        self._settings = make_settings(
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
        self._clock = clock
        self._registry = Registry(clock, failure_cooldown)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="synopsis-session"
        )
        self._futures: set[concurrent.futures.Future[None]] = set()
        self._futures_lock = threading.Lock()
        self._closed = False

    # --- after each turn ---------------------------------------------------------------------

    def after_turn(
        self, tenant: str, user_id: str, session_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> ScheduleResult:
        """Schedule a background summary when due and return at once.

        Never waits for the model and never raises because of the model or the store (those
        failures become events); only an unusable ``tenant`` raises InvalidInput. ``messages``
        is the session's full history so far; it is copied when a job is scheduled.
        """
        if self._closed:
            return ScheduleResult(scheduled=False, reason="closed")
        if self._summarizer is None:
            return ScheduleResult(scheduled=False, reason="no_summarizer")
        key = (validate_tenant(tenant), session_id)
        covers = self._registry.known_covers(key)
        if covers is None:
            try:
                latest = self._store.latest_summary(tenant, session_id)
            except Exception as exc:
                emit(self._handlers, failure("load_summary", tenant, session_id, exc))
                return ScheduleResult(scheduled=False, reason="error")
            covers = latest.covers_to if latest else 0
            self._registry.remember_covers(key, covers)
        result, job = self._registry.admit(
            (tenant, user_id, session_id), messages, covers, self._settings.summarize_every
        )
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
        outcome: JobOutcome = "failed"
        try:
            outcome = self._summarize_and_write(job)
        except Exception as exc:  # last resort: a background job must not die silently
            emit(self._handlers, failure("job", job.tenant, job.session_id, exc))
        finally:
            self._registry.release(job.key, failed=outcome == "failed")
        if outcome == "done":  # the store just worked: replay what earlier jobs left
            self.recover(job.tenant, limit=10)

    def _summarize_and_write(self, job: Job) -> JobOutcome:
        prev = self._store.latest_summary(job.tenant, job.session_id)
        covers = prev.covers_to if prev else 0
        self._registry.remember_covers(job.key, covers)
        start, end = summary_span(job.messages, covers)
        if not is_due(end, covers, self._settings.summarize_every):
            return "done"
        emit(self._handlers, started_event(job, start, end, prev))
        assert self._summarizer is not None
        try:
            result = self._summarizer.summarize(
                job.messages[start:end],
                previous_summary=prev.text if prev else None,
                session_id=job.session_id,
            )
            summary = next_summary(
                tenant=job.tenant,
                user_id=job.user_id,
                session_id=job.session_id,
                previous=prev,
                result=result,
                covers_to=end,
                now=self._clock(),
            )
        except InvalidSummary as exc:
            emit(self._handlers, failure("invalid_summary", job.tenant, job.session_id, exc))
            return "failed"
        except Exception as exc:
            emit(self._handlers, failure("summarize", job.tenant, job.session_id, exc))
            return "failed"
        return self._dual_write(job, summary)

    def _dual_write(self, job: Job, summary: SessionSummary) -> JobOutcome:
        if self._registry.epoch(job.tenant, job.user_id) != job.epoch:
            return "done"  # the user was deleted while the model was thinking
        try:
            saved = self._store.save_summary(summary)
        except Exception as exc:
            emit(self._handlers, failure("save", job.tenant, job.session_id, exc))
            return "failed"
        self._registry.remember_covers(job.key, saved.covers_to)
        written = self._write_memory(saved)
        if self._registry.epoch(job.tenant, job.user_id) != job.epoch:
            self._store.delete_user(job.tenant, job.user_id)
            return "done"
        emit(self._handlers, saved_event(saved, written))
        return "done" if written else "saved"

    def _write_memory(self, summary: SessionSummary) -> bool:
        """The second write plus its outbox completion; a failure is counted on the entry."""
        try:
            self._store.put(
                summary.tenant,
                summary_namespace(summary.user_id, summary.session_id),
                summary_key(summary.version),
                summary.text,
                kind="summary",
                tags=memory_tags(summary),
            )
            self._store.complete_outbox(summary.tenant, summary.session_id, summary.version)
        except Exception as exc:
            attempts = self._count_failure(summary)
            event = failure(
                "memory_write", summary.tenant, summary.session_id, exc, attempts=attempts
            )
            emit(self._handlers, event)
            return False
        return True

    def _count_failure(self, summary: SessionSummary) -> int | None:
        """Count a failed write on its outbox entry; None if the store could not count it."""
        try:
            return self._store.fail_outbox(summary.tenant, summary.session_id, summary.version)
        except Exception:  # the store is down too; the entry keeps its count
            return None

    def recover(self, tenant: str | None = None, *, limit: int = 100) -> int:
        """Replay pending entries, fewest failures first; return how many completed."""
        try:
            entries: list[OutboxEntry] = self._store.pending_outbox(tenant, limit=limit)
        except Exception as exc:
            emit(self._handlers, failure("recover", tenant or "*", None, exc))
            return 0
        done = 0
        for entry in entries:
            if self._write_memory(entry.summary):
                done += 1
                emit(
                    self._handlers,
                    OutboxReplayed(
                        tenant=entry.summary.tenant,
                        session_id=entry.summary.session_id,
                        version=entry.summary.version,
                    ),
                )
        return done

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
        validate_tenant(tenant)
        system, body = split_system(messages, system_prompt)
        summary = None
        try:
            summary = self._store.latest_summary(tenant, session_id)
        except Exception as exc:
            emit(self._handlers, failure("load_summary", tenant, session_id, exc))
        question = recall_query(body, query)
        hits: list[SearchHit] = []
        if self._settings.hybrid and question and self._settings.recall_limit:
            try:
                hits = self._store.search(
                    tenant,
                    ("user", user_id),
                    query=question,
                    limit=self._settings.recall_limit * 4,
                    mode=self._settings.recall_mode,
                )
            except Exception as exc:
                emit(self._handlers, failure("recall", tenant, session_id, exc))
        return build_messages(
            self._settings,
            system=system,
            body=body,
            summary=summary,
            hits=hits,
            query=question,
            user_id=user_id,
            session_id=session_id,
        )

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
        return self._store.search(
            tenant,
            ("user", user_id),
            query=query,
            kind=kind,
            limit=limit,
            mode=mode or self._settings.recall_mode,
        )

    def delete_user(self, tenant: str, user_id: str) -> int:
        """Delete the user's memories, summaries and outbox entries; return how many."""
        self._registry.forget_user(validate_tenant(tenant), user_id)
        return self._store.delete_user(tenant, user_id)

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
        self._settings = make_settings(
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
        self._clock = clock
        self._registry = Registry(clock, failure_cooldown)
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    async def after_turn(
        self, tenant: str, user_id: str, session_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> ScheduleResult:
        """Schedule a background summary task when due and return at once (see SessionMemory)."""
        if self._closed:
            return ScheduleResult(scheduled=False, reason="closed")
        if self._summarizer is None:
            return ScheduleResult(scheduled=False, reason="no_summarizer")
        key = (validate_tenant(tenant), session_id)
        covers = self._registry.known_covers(key)
        if covers is None:
            try:
                latest = await self._store.latest_summary(tenant, session_id)
            except Exception as exc:
                await aemit(self._handlers, failure("load_summary", tenant, session_id, exc))
                return ScheduleResult(scheduled=False, reason="error")
            covers = latest.covers_to if latest else 0
            self._registry.remember_covers(key, covers)
        result, job = self._registry.admit(
            (tenant, user_id, session_id), messages, covers, self._settings.summarize_every
        )
        if job is not None:
            task = asyncio.get_running_loop().create_task(self._run(job))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return result

    async def _run(self, job: Job) -> None:
        outcome: JobOutcome = "failed"
        try:
            outcome = await self._summarize_and_write(job)
        except Exception as exc:  # last resort: a background job must not die silently
            await aemit(self._handlers, failure("job", job.tenant, job.session_id, exc))
        finally:
            self._registry.release(job.key, failed=outcome == "failed")
        if outcome == "done":
            await self.recover(job.tenant, limit=10)

    async def _summarize_and_write(self, job: Job) -> JobOutcome:
        prev = await self._store.latest_summary(job.tenant, job.session_id)
        covers = prev.covers_to if prev else 0
        self._registry.remember_covers(job.key, covers)
        start, end = summary_span(job.messages, covers)
        if not is_due(end, covers, self._settings.summarize_every):
            return "done"
        await aemit(self._handlers, started_event(job, start, end, prev))
        assert self._summarizer is not None
        try:
            result = await self._summarizer.summarize(
                job.messages[start:end],
                previous_summary=prev.text if prev else None,
                session_id=job.session_id,
            )
            summary = next_summary(
                tenant=job.tenant,
                user_id=job.user_id,
                session_id=job.session_id,
                previous=prev,
                result=result,
                covers_to=end,
                now=self._clock(),
            )
        except InvalidSummary as exc:
            await aemit(self._handlers, failure("invalid_summary", job.tenant, job.session_id, exc))
            return "failed"
        except Exception as exc:
            await aemit(self._handlers, failure("summarize", job.tenant, job.session_id, exc))
            return "failed"
        return await self._dual_write(job, summary)

    async def _dual_write(self, job: Job, summary: SessionSummary) -> JobOutcome:
        if self._registry.epoch(job.tenant, job.user_id) != job.epoch:
            return "done"
        try:
            saved = await self._store.save_summary(summary)
        except Exception as exc:
            await aemit(self._handlers, failure("save", job.tenant, job.session_id, exc))
            return "failed"
        self._registry.remember_covers(job.key, saved.covers_to)
        written = await self._write_memory(saved)
        if self._registry.epoch(job.tenant, job.user_id) != job.epoch:
            await self._store.delete_user(job.tenant, job.user_id)
            return "done"
        await aemit(self._handlers, saved_event(saved, written))
        return "done" if written else "saved"

    async def _write_memory(self, summary: SessionSummary) -> bool:
        try:
            await self._store.put(
                summary.tenant,
                summary_namespace(summary.user_id, summary.session_id),
                summary_key(summary.version),
                summary.text,
                kind="summary",
                tags=memory_tags(summary),
            )
            await self._store.complete_outbox(summary.tenant, summary.session_id, summary.version)
        except Exception as exc:
            attempts = await self._count_failure(summary)
            event = failure(
                "memory_write", summary.tenant, summary.session_id, exc, attempts=attempts
            )
            await aemit(self._handlers, event)
            return False
        return True

    async def _count_failure(self, summary: SessionSummary) -> int | None:
        tenant, session_id, version = summary.tenant, summary.session_id, summary.version
        try:
            return await self._store.fail_outbox(tenant, session_id, version)
        except Exception:
            return None

    async def recover(self, tenant: str | None = None, *, limit: int = 100) -> int:
        """Replay pending entries, fewest failures first; return how many completed."""
        try:
            entries = await self._store.pending_outbox(tenant, limit=limit)
        except Exception as exc:
            await aemit(self._handlers, failure("recover", tenant or "*", None, exc))
            return 0
        done = 0
        for entry in entries:
            if await self._write_memory(entry.summary):
                done += 1
                await aemit(
                    self._handlers,
                    OutboxReplayed(
                        tenant=entry.summary.tenant,
                        session_id=entry.summary.session_id,
                        version=entry.summary.version,
                    ),
                )
        return done

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
        validate_tenant(tenant)
        system, body = split_system(messages, system_prompt)
        summary = None
        try:
            summary = await self._store.latest_summary(tenant, session_id)
        except Exception as exc:
            await aemit(self._handlers, failure("load_summary", tenant, session_id, exc))
        question = recall_query(body, query)
        hits: list[SearchHit] = []
        if self._settings.hybrid and question and self._settings.recall_limit:
            try:
                hits = await self._store.search(
                    tenant,
                    ("user", user_id),
                    query=question,
                    limit=self._settings.recall_limit * 4,
                    mode=self._settings.recall_mode,
                )
            except Exception as exc:
                await aemit(self._handlers, failure("recall", tenant, session_id, exc))
        return build_messages(
            self._settings,
            system=system,
            body=body,
            summary=summary,
            hits=hits,
            query=question,
            user_id=user_id,
            session_id=session_id,
        )

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
        return await self._store.search(
            tenant,
            ("user", user_id),
            query=query,
            kind=kind,
            limit=limit,
            mode=mode or self._settings.recall_mode,
        )

    async def delete_user(self, tenant: str, user_id: str) -> int:
        """Delete the user's memories, summaries and outbox entries; return how many."""
        self._registry.forget_user(validate_tenant(tenant), user_id)
        return await self._store.delete_user(tenant, user_id)

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
