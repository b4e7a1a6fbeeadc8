"""Session events that :mod:`synopsis.events` does not know yet, and the errors of time limits.

``session_summary_truncated`` belongs in :mod:`synopsis.events` (in ``SessionEvent``); it lives
here until that module moves on. :func:`deliverable` is the one place that bridges the gap.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal, cast

from synopsis.errors import ModelTimeout
from synopsis.events import AnyEvent, SessionEvent

__all__ = [
    "SessionNotice",
    "SessionSummaryTruncated",
    "abandoned_error",
    "deliverable",
    "summarize_timeout_error",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummaryTruncated:
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

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.name, **asdict(self)}


#: Every event a session flow emits.
SessionNotice = SessionEvent | SessionSummaryTruncated


def deliverable(event: SessionNotice) -> AnyEvent:
    """``event`` typed for :func:`synopsis.events.emit`, which only types the events it knows."""
    return cast("AnyEvent", event)


def summarize_timeout_error(timeout: float) -> ModelTimeout:
    """What a summarizer call that outlived ``summarize_timeout`` fails with (both twins)."""
    return ModelTimeout(f"the summarizer gave no answer within {timeout:g} s (summarize_timeout)")


def abandoned_error(close_timeout: float) -> TimeoutError:
    """What a job still unfinished when ``close()`` stopped waiting is reported with."""
    return TimeoutError(
        f"job still running when close() stopped waiting after {close_timeout:g} s "
        "(close_timeout); it was abandoned"
    )
