"""Compaction's own events, until :mod:`synopsis.events` takes them in.

``compaction_skipped``: a compaction was due (the trigger fired, or it was asked for) but the
plan found nothing worth summarizing, e.g. the requested tail covers the whole history or only
the previous summary would be re-summarized. ``skipped`` says why; the history is unchanged.

``tool_outputs_cleared``: tier 1 replaced ``cleared`` old tool results (and the arguments of
``arguments_cleared`` calls) by stubs, archived at ``archive``; ``tokens_saved`` is
``tokens_before - tokens_after``. It comes before ``before_summarize``, which follows only if
the history is still over budget.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar, cast

from synopsis.events import AnyEvent, Event

__all__ = ["CompactionEvent", "CompactionSkipped", "ToolOutputsCleared", "deliverable"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionSkipped:
    name: ClassVar[str] = "compaction_skipped"
    reason: str
    skipped: str
    tokens: int
    message_count: int
    session_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.name, **asdict(self)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutputsCleared:
    name: ClassVar[str] = "tool_outputs_cleared"
    reason: str
    cleared: int
    arguments_cleared: int
    tokens_before: int
    tokens_after: int
    tokens_saved: int
    archive: str | None
    session_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.name, **asdict(self)}


#: Every event a compaction emits.
CompactionEvent = Event | CompactionSkipped | ToolOutputsCleared


def deliverable(event: CompactionEvent) -> AnyEvent:
    """``event`` as :func:`synopsis.events.emit` takes it (delivery only reads ``name``)."""
    return cast("AnyEvent", event)
