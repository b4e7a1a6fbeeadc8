"""Events emitted around a summarization, delivered to callbacks (and OpenTelemetry).

Order: ``before_summarize`` -> ``generate_summary`` (one per attempt, primary then
failover) -> ``after_summarize`` on success, or ``summarize_failed`` when every model failed.
Every event is a frozen dataclass with ``to_dict()`` for logs and JSON; errors are serialized.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal, Protocol, TypeVar

__all__ = [
    "AfterSummarize",
    "BeforeSummarize",
    "Event",
    "EventHandler",
    "GenerateSummary",
    "SummarizeFailed",
    "aemit",
    "check_sync_handlers",
    "emit",
]

Phase = Literal["primary", "failover"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BeforeSummarize:
    name: ClassVar[str] = "before_summarize"
    reason: str
    tokens: int
    message_count: int
    session_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.name, **asdict(self)}


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerateSummary:
    name: ClassVar[str] = "generate_summary"
    attempt: int
    phase: Phase
    model: str
    latency_s: float
    ok: bool
    error: dict[str, Any] | None = None
    session_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.name, **asdict(self)}


@dataclass(frozen=True, slots=True, kw_only=True)
class AfterSummarize:
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

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.name, **asdict(self)}


@dataclass(frozen=True, slots=True, kw_only=True)
class SummarizeFailed:
    name: ClassVar[str] = "summarize_failed"
    reason: str
    error: dict[str, Any]
    attempts: int
    fallback: str | None = None
    session_id: str | None = None
    errors: Sequence[dict[str, Any]] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["errors"] = list(self.errors)
        return {"event": self.name, **data}


_log = logging.getLogger("synopsis.events")

Event = BeforeSummarize | GenerateSummary | AfterSummarize | SummarizeFailed
EventHandler = Callable[[Event], None] | Callable[[Event], Awaitable[None]]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


E = TypeVar("E", bound=_Named)


def is_async_handler(handler: object) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one."""
    call = getattr(handler, "__call__", None)  # noqa: B004 - callable objects too
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def check_sync_handlers(handlers: Sequence[EventHandler]) -> None:
    """Reject coroutine functions where only synchronous delivery is possible."""
    for handler in handlers:
        if is_async_handler(handler):
            raise TypeError(
                f"async event handler {handler!r} given to a synchronous API; "
                "use the Async* twin or a sync handler"
            )


def deliver(
    handlers: Sequence[Callable[[E], object]], event: E, *, log: logging.Logger, api: str
) -> None:
    """Call sync handlers; a failing one is logged, an async one (named in ``api``) ignored."""
    for handler in handlers:
        try:
            result = handler(event)
        except Exception:
            log.exception("event handler %r failed on %s", handler, event.name)
            continue
        if inspect.isawaitable(result):
            if hasattr(result, "close"):
                result.close()
            log.error("async event handler %r ignored by %s", handler, api)


async def adeliver(
    handlers: Sequence[Callable[[E], object]], event: E, *, log: logging.Logger
) -> None:
    """Call sync or async handlers, awaiting the async ones; a failing one is logged."""
    for handler in handlers:
        try:
            result = handler(event)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("event handler %r failed on %s", handler, event.name)


def emit(handlers: Sequence[EventHandler], event: Event) -> None:
    """Deliver ``event`` to sync handlers. A failing handler is logged, never fatal."""
    deliver(handlers, event, log=_log, api="a synchronous API")


async def aemit(handlers: Sequence[EventHandler], event: Event) -> None:
    """Deliver ``event`` to sync or async handlers, awaiting the async ones."""
    await adeliver(handlers, event, log=_log)
