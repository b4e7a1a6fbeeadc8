"""Compaction's own event, until :mod:`synopsis.events` takes it in.

``compaction_skipped``: a compaction was due (the trigger fired, or it was asked for) but the
plan found nothing worth summarizing, e.g. the requested tail covers the whole history or only
the previous summary would be re-summarized. ``skipped`` says why; the history is unchanged.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar, cast

from synopsis.events import AnyEvent, Event

__all__ = ["CompactionEvent", "CompactionSkipped", "deliverable"]


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


#: Every event a compaction emits.
CompactionEvent = Event | CompactionSkipped


def deliverable(event: CompactionEvent) -> AnyEvent:
    """``event`` as :func:`synopsis.events.emit` takes it (delivery only reads ``name``)."""
    return cast("AnyEvent", event)
