"""Events of side-store session memory, delivered like the summarization events.

A handler is any callable taking one event (``handler(event)``); the async twin also awaits
handlers that return an awaitable. A failing handler is logged and never reaches the caller.

* ``session_summary_started``: a background job began summarizing messages
  ``[from_index, to_index)``.
* ``session_summary_saved``: a new summary version was stored; ``memory_written`` says
  whether the long-term copy was written too (if not, the outbox still holds it).
* ``session_memory_failed``: one stage failed (``load_summary``, ``summarize``,
  ``invalid_summary``, ``save``, ``memory_write``, ``recover``, ``recall`` or ``job``); the turn
  went on. ``error`` is the serialized exception. For ``memory_write`` failures ``attempts``
  is how many times that outbox entry has now failed (0 if it is no longer pending, None if
  the store could not count it); other stages leave it None.
* ``outbox_replayed``: :meth:`recover` completed a memory write that an earlier job left pending.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal

from synopsis.errors import ConfigError, describe_error
from synopsis.events import adeliver, deliver, is_async_handler

__all__ = [
    "OutboxReplayed",
    "SessionEvent",
    "SessionEventHandler",
    "SessionMemoryFailed",
    "SessionSummarySaved",
    "SessionSummaryStarted",
    "Stage",
    "aemit_session",
    "check_sync_session_handlers",
    "emit_session",
    "failure",
]

_log = logging.getLogger("synopsis.session")

Stage = Literal[
    "load_summary",
    "summarize",
    "invalid_summary",
    "save",
    "memory_write",
    "recover",
    "recall",
    "job",
]


def _event_dict(event: Any) -> dict[str, Any]:
    return {"event": event.name, **asdict(event)}


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummaryStarted:
    name: ClassVar[str] = "session_summary_started"
    tenant: str
    user_id: str
    session_id: str
    from_index: int
    to_index: int
    previous_version: int

    def to_dict(self) -> dict[str, Any]:
        return _event_dict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummarySaved:
    name: ClassVar[str] = "session_summary_saved"
    tenant: str
    user_id: str
    session_id: str
    version: int
    covers_to: int
    model: str
    memory_written: bool

    def to_dict(self) -> dict[str, Any]:
        return _event_dict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionMemoryFailed:
    name: ClassVar[str] = "session_memory_failed"
    stage: Stage
    tenant: str
    session_id: str | None
    error: dict[str, Any] = field(default_factory=dict)
    attempts: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return _event_dict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxReplayed:
    name: ClassVar[str] = "outbox_replayed"
    tenant: str
    session_id: str
    version: int

    def to_dict(self) -> dict[str, Any]:
        return _event_dict(self)


SessionEvent = SessionSummaryStarted | SessionSummarySaved | SessionMemoryFailed | OutboxReplayed
SessionEventHandler = Callable[[SessionEvent], None] | Callable[[SessionEvent], Awaitable[None]]


def emit_session(handlers: Sequence[SessionEventHandler], event: SessionEvent) -> None:
    """Deliver ``event`` to sync handlers; failures are logged, never raised."""
    deliver(handlers, event, log=_log, api="SessionMemory")


async def aemit_session(handlers: Sequence[SessionEventHandler], event: SessionEvent) -> None:
    """Deliver ``event`` to sync or async handlers; failures are logged, never raised."""
    await adeliver(handlers, event, log=_log)


def failure(
    stage: Stage,
    tenant: str,
    session_id: str | None,
    exc: BaseException,
    *,
    attempts: int | None = None,
) -> SessionMemoryFailed:
    """Log a failed stage and describe it as an event."""
    _log.warning(
        "session memory %s failed (tenant=%s, session=%s): %r", stage, tenant, session_id, exc
    )
    return SessionMemoryFailed(
        stage=stage,
        tenant=tenant,
        session_id=session_id,
        error=describe_error(exc),
        attempts=attempts,
    )


def check_sync_session_handlers(handlers: Sequence[SessionEventHandler]) -> None:
    """Reject coroutine functions where only synchronous delivery is possible."""
    for handler in handlers:
        if is_async_handler(handler):
            raise ConfigError(
                f"async event handler {handler!r} given to SessionMemory; "
                "use AsyncSessionMemory or a sync handler"
            )
