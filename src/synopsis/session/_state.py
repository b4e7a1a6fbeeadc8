"""Shared state of SessionMemory and AsyncSessionMemory: store protocols, results, registry.

The registry is the in-process part of "at most one job per session": a set of sessions
(tenant, user, session id) with a job in flight, failure cooldowns and the newest summary
end seen per session (a lower bound, so a stale value only costs one extra store read inside
the job). Across processes the store decides: a job claims its session there before it
calls the model, and its writes carry the user's deletion generation read at admission.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from synopsis.events import (
    SessionMemoryFailed,
    SessionSummarySaved,
    SessionSummaryStarted,
    failure,
)
from synopsis.memory import AsyncSessionStore, SessionStore, SessionSummary
from synopsis.session._events import abandoned_error
from synopsis.session.context import is_due

__all__ = [
    "AsyncSessionStore",
    "Job",
    "Registry",
    "ScheduleResult",
    "SessionStore",
    "SkipReason",
    "abandoned_event",
    "new_job",
    "saved_event",
    "started_event",
]

#: A session: (tenant, user_id, session_id).
Key = tuple[str, str, str]
SkipReason = Literal["not_due", "no_summarizer", "in_flight", "cooldown", "closed", "error"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleResult:
    """What :meth:`SessionMemory.after_turn` did: scheduled a job, or why not."""

    scheduled: bool
    reason: Literal["scheduled"] | SkipReason
    #: Messages not covered by the latest known summary.
    pending_messages: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    tenant: str
    user_id: str
    session_id: str
    messages: list[dict[str, Any]]
    #: The user's deletion generation at admission: the job's writes are refused once a
    #: ``delete_user`` (of any process) has moved it.
    generation: int

    @property
    def key(self) -> Key:
        return (self.tenant, self.user_id, self.session_id)


def new_job(ids: Key, messages: Sequence[Mapping[str, Any]], generation: int) -> Job:
    """A job of session ``ids`` over a private copy of the history."""
    tenant, user_id, session_id = ids
    return Job(
        tenant=tenant,
        user_id=user_id,
        session_id=session_id,
        messages=copy.deepcopy([dict(m) for m in messages]),
        generation=generation,
    )


class Registry:
    """In-flight jobs, failure cooldowns and known summary ends of this process's sessions."""

    def __init__(self, clock: Callable[[], float], cooldown: float) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._cooldown = cooldown
        self._in_flight: set[Key] = set()
        self._failed_at: dict[Key, float] = {}
        self._covers: dict[Key, int] = {}

    def known_covers(self, key: Key) -> int | None:
        with self._lock:
            return self._covers.get(key)

    def remember_covers(self, key: Key, covers_to: int) -> None:
        with self._lock:
            self._covers[key] = max(covers_to, self._covers.get(key, 0))

    def claim(self, key: Key) -> SkipReason | None:
        """Register a job for ``key``, or say why not."""
        with self._lock:
            if key in self._in_flight:
                return "in_flight"
            failed_at = self._failed_at.get(key)
            if failed_at is not None and self._clock() - failed_at < self._cooldown:
                return "cooldown"
            self._in_flight.add(key)
            return None

    def release(self, key: Key, *, failed: bool) -> None:
        with self._lock:
            self._in_flight.discard(key)
            if failed:
                self._failed_at[key] = self._clock()
            else:
                self._failed_at.pop(key, None)

    def admit(self, key: Key, length: int, covers: int, every: int) -> ScheduleResult:
        """Decide whether a history of ``length`` messages starts a job now; if so (the result
        says ``scheduled``), the session is claimed in this process."""
        pending = max(length - covers, 0)
        if not is_due(length, covers, every):
            return ScheduleResult(scheduled=False, reason="not_due", pending_messages=pending)
        refused = self.claim(key)
        if refused is not None:
            return ScheduleResult(scheduled=False, reason=refused, pending_messages=pending)
        return ScheduleResult(scheduled=True, reason="scheduled", pending_messages=pending)

    def forget_user(self, tenant: str, user_id: str) -> None:
        """Forget what is known of the user's sessions (their summaries are being deleted)."""
        with self._lock:
            for key in [k for k in self._covers if k[:2] == (tenant, user_id)]:
                del self._covers[key]


def started_event(
    job: Job,
    start: int,
    end: int,
    prev: SessionSummary | None,
    *,
    redacted: dict[str, int] | None = None,
) -> SessionSummaryStarted:
    return SessionSummaryStarted(
        tenant=job.tenant,
        user_id=job.user_id,
        session_id=job.session_id,
        from_index=start,
        to_index=end,
        previous_version=prev.version if prev else 0,
        redacted=redacted or {},
    )


def saved_event(summary: SessionSummary, memory_written: bool) -> SessionSummarySaved:
    return SessionSummarySaved(
        tenant=summary.tenant,
        user_id=summary.user_id,
        session_id=summary.session_id,
        version=summary.version,
        covers_to=summary.covers_to,
        model=summary.model,
        memory_written=memory_written,
    )


def abandoned_event(job: Job, close_timeout: float | None) -> SessionMemoryFailed:
    """The report of a job that ``close()`` stopped waiting for."""
    return failure("job", job.tenant, job.session_id, abandoned_error(close_timeout or 0.0))
