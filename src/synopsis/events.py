"""Every event synopsis emits, and the one way they are delivered to callbacks.

Summarization (compaction and session jobs): ``before_summarize`` -> ``generate_summary`` (one
per attempt, primary then failover, delivered as it happens) -> ``after_summarize`` on
success (with the summary's ``model``, ``usage`` and ``calls``: what it cost), or
``summarize_failed`` when every model failed.

Compaction: ``tool_outputs_cleared`` (tier 1 replaced old tool results by stubs, archived; it
comes before ``before_summarize``, which follows only if the history is still over budget) and
``compaction_skipped`` (a compaction was due but nothing could be summarized without cutting
into the requested tail; ``skipped`` says why). ``orphan_tool_results_dropped``: the kept
tail held tool results whose call is not in the history (e.g. a framework trimmed it); they
were dropped from what is sent, so the turn goes on instead of failing at the provider.
``values_redacted`` (with ``redact=``: how many secrets and personal values of each kind a
compaction took out of what it sent, archived and returned; never the values) comes last,
but for ``archive_recalled`` (with ``recall=``: archived messages were put back into the
context for the newest user message, also on a call that did not compact).

Session memory:

* ``session_summary_started``: a background job began summarizing messages
  ``[from_index, to_index)``; with ``redact=``, ``redacted`` counts by kind the values taken
  out of its request.
* ``session_summary_saved``: a new summary version was stored; ``memory_written`` says
  whether the long-term copy was written too (if not, the outbox still holds it).
* ``session_memory_failed``: one stage failed (``load_summary``, ``summarize``,
  ``invalid_summary``, ``save``, ``memory_write``, ``recover``, ``recall`` or ``job``); the turn
  went on. ``error`` is the serialized exception. For ``memory_write`` failures ``attempts``
  is how many times that outbox entry has now failed (0 if it is no longer pending, None if
  the store could not count it); other stages leave it None.
* ``session_summary_truncated``: a summary was cut to its limit (the stored copy, or the copy
  injected into one request), with the sizes before and after.
* ``outbox_replayed``: ``recover()`` completed a memory write that an earlier job left pending.

Every event is a frozen dataclass with ``to_dict()`` for logs and JSON; errors are serialized.
A handler is any callable taking one event; async drivers also await handlers that return an
awaitable. A failing handler is logged and never reaches the caller.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal

from synopsis.errors import ConfigError, describe_error

__all__ = [
    "AfterSummarize",
    "AnyEvent",
    "ArchiveRecalled",
    "BeforeSummarize",
    "CompactionSkipped",
    "Event",
    "EventBase",
    "EventHandler",
    "GenerateSummary",
    "OrphanToolResultsDropped",
    "OutboxReplayed",
    "SessionEvent",
    "SessionEventHandler",
    "SessionMemoryFailed",
    "SessionSummarySaved",
    "SessionSummaryStarted",
    "SessionSummaryTruncated",
    "Stage",
    "SummarizeFailed",
    "ToolOutputsCleared",
    "ValuesRedacted",
    "aemit",
    "check_sync_handlers",
    "emit",
    "failure",
]

Phase = Literal["primary", "failover"]


@dataclass(frozen=True, slots=True)
class EventBase:
    """What every event shares: its ``name`` and :meth:`to_dict`."""

    #: The event's name, the ``event`` key of :meth:`to_dict` (``"after_summarize"``).
    name: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """``{"event": name, **fields}`` for logs and JSON (a tuple becomes a list)."""
        fields = {
            key: list(value) if isinstance(value, tuple) else value
            for key, value in asdict(self).items()
        }
        return {"event": self.name, **fields}


@dataclass(frozen=True, slots=True, kw_only=True)
class BeforeSummarize(EventBase):
    name: ClassVar[str] = "before_summarize"
    reason: str
    tokens: int
    message_count: int
    session_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerateSummary(EventBase):
    name: ClassVar[str] = "generate_summary"
    attempt: int
    phase: Phase
    model: str
    latency_s: float
    ok: bool
    error: dict[str, Any] | None = None
    session_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AfterSummarize(EventBase):
    name: ClassVar[str] = "after_summarize"
    reason: str
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    model: str
    attempts: int
    archive: str | None = None
    session_id: str | None = None
    #: What the summary cost: token usage summed over every answer (``prompt_tokens``,
    #: ``completion_tokens``, ``total_tokens``; None when no model reported it), and how many
    #: calls returned one.
    usage: dict[str, int] | None = None
    calls: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class SummarizeFailed(EventBase):
    name: ClassVar[str] = "summarize_failed"
    reason: str
    error: dict[str, Any]
    attempts: int
    fallback: str | None = None
    session_id: str | None = None
    errors: Sequence[dict[str, Any]] = field(default_factory=tuple)


# --- session memory ------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummaryStarted(EventBase):
    name: ClassVar[str] = "session_summary_started"
    tenant: str
    user_id: str
    session_id: str
    from_index: int
    to_index: int
    previous_version: int
    #: With ``redact=``: values of each kind taken out of the request (never the values).
    redacted: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummarySaved(EventBase):
    name: ClassVar[str] = "session_summary_saved"
    tenant: str
    user_id: str
    session_id: str
    version: int
    covers_to: int
    model: str
    memory_written: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionMemoryFailed(EventBase):
    name: ClassVar[str] = "session_memory_failed"
    stage: Stage
    tenant: str
    session_id: str | None
    error: dict[str, Any] = field(default_factory=dict)
    attempts: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxReplayed(EventBase):
    name: ClassVar[str] = "outbox_replayed"
    tenant: str
    session_id: str
    version: int


# --- compaction tiers and skips -----------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionSkipped(EventBase):
    name: ClassVar[str] = "compaction_skipped"
    reason: str
    skipped: str
    tokens: int
    message_count: int
    session_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutputsCleared(EventBase):
    name: ClassVar[str] = "tool_outputs_cleared"
    reason: str
    cleared: int
    arguments_cleared: int
    tokens_before: int
    tokens_after: int
    tokens_saved: int
    archive: str | None
    session_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OrphanToolResultsDropped(EventBase):
    """A compaction dropped tool results from the kept tail whose call is not in the history
    it sends (no provider accepts them): ``tool_call_ids`` and their ``indices`` in the input.
    An orphan in the part being summarized is read as a note instead, never dropped."""

    name: ClassVar[str] = "orphan_tool_results_dropped"
    reason: str
    tool_call_ids: tuple[str, ...]
    indices: tuple[int, ...]
    session_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ValuesRedacted(EventBase):
    """A compaction redacted ``total`` values: ``counts`` by kind (``{"email": 2}``)."""

    name: ClassVar[str] = "values_redacted"
    reason: str
    counts: dict[str, int]
    total: int
    session_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchiveRecalled(EventBase):
    """Automatic recall (``recall=``) put ``messages`` archived messages (at ``positions`` in
    the archive, when it knows them) into the context, in a block of ``tokens`` tokens within
    ``budget``, for the newest user message."""

    name: ClassVar[str] = "archive_recalled"
    reason: str
    messages: int
    positions: tuple[int, ...]
    tokens: int
    budget: int
    session_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummaryTruncated(EventBase):
    """A session summary was cut to its limit.

    ``target`` says which copy: ``stored`` (a new version, cut before it was saved, to
    ``max_summary_chars``) or ``injected`` (the text put into one request, cut to a number of
    tokens). ``original_chars`` and ``kept_chars`` are the sizes before and after (the marker
    included); ``limit`` is in ``unit``.
    """

    name: ClassVar[str] = "session_summary_truncated"
    tenant: str
    session_id: str
    version: int
    target: Literal["stored", "injected"]
    unit: Literal["chars", "tokens"]
    limit: int
    original_chars: int
    kept_chars: int


_log = logging.getLogger("synopsis.events")
_session_log = logging.getLogger("synopsis.session")

Event = (
    BeforeSummarize
    | GenerateSummary
    | AfterSummarize
    | SummarizeFailed
    | CompactionSkipped
    | ToolOutputsCleared
    | OrphanToolResultsDropped
    | ValuesRedacted
    | ArchiveRecalled
)
EventHandler = Callable[[Event], None] | Callable[[Event], Awaitable[None]]
SessionEvent = (
    SessionSummaryStarted
    | SessionSummarySaved
    | SessionMemoryFailed
    | OutboxReplayed
    | SessionSummaryTruncated
)
SessionEventHandler = Callable[[SessionEvent], None] | Callable[[SessionEvent], Awaitable[None]]
AnyEvent = Event | SessionEvent


def is_async_handler(handler: object) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one."""
    call = getattr(handler, "__call__", None)  # noqa: B004 - callable objects too
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def check_sync_handlers(handlers: Sequence[Callable[..., object]]) -> None:
    """Reject coroutine functions where only synchronous delivery is possible."""
    for handler in handlers:
        if is_async_handler(handler):
            raise ConfigError(
                f"async event handler {handler!r} given to a synchronous API; "
                "use the Async* twin or a sync handler"
            )


def emit(handlers: Sequence[Callable[..., object]], event: AnyEvent) -> None:
    """Call sync handlers; a failing one is logged, an async one ignored (and logged)."""
    for handler in handlers:
        try:
            result = handler(event)
        except Exception:
            _log.exception("event handler %r failed on %s", handler, event.name)
            continue
        if inspect.isawaitable(result):
            if hasattr(result, "close"):
                result.close()
            _log.error("async event handler %r ignored by a synchronous API", handler)


async def aemit(handlers: Sequence[Callable[..., object]], event: AnyEvent) -> None:
    """Call sync or async handlers, awaiting the async ones; a failing one is logged."""
    for handler in handlers:
        try:
            result = handler(event)
            if inspect.isawaitable(result):
                await result
        except Exception:
            _log.exception("event handler %r failed on %s", handler, event.name)


def failure(
    stage: Stage,
    tenant: str,
    session_id: str | None,
    exc: BaseException,
    *,
    attempts: int | None = None,
) -> SessionMemoryFailed:
    """Log a failed stage and describe it as an event."""
    _session_log.warning(
        "session memory %s failed (tenant=%s, session=%s): %r", stage, tenant, session_id, exc
    )
    return SessionMemoryFailed(
        stage=stage,
        tenant=tenant,
        session_id=session_id,
        error=describe_error(exc),
        attempts=attempts,
    )
