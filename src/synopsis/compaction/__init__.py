"""In-place compaction: replace old history with one structured summary before a model call.

The pieces, in the order a compaction runs them: :mod:`.trigger` and :mod:`.decision`
(when), :mod:`.orphans` (tool results without their call, healed), :mod:`.language` (the
summary's language when none is set), :mod:`.plan` (what to summarize and what to keep,
pure), the summarizer call, :mod:`.summary` (post-processing and the user-message back-fill,
pure), :mod:`.skills` (loaded skills kept verbatim), :mod:`.archive` (nothing is lost;
:mod:`.store_archive` keeps it in a memory store, and :mod:`.history` lets the agent search
it as a tool). :mod:`.options` holds every option in one value, :mod:`._flow` the run written
once, :mod:`.compactor` its sync and async drivers and :mod:`.model` the compacting model
wrappers; :mod:`.result` is what a compaction returns. Every message compaction produces is
marked in its text (:mod:`synopsis.messages`), so its output can go to a provider as it is.
"""

import typing as _typing

from synopsis._lazy import exports as _exports

if _typing.TYPE_CHECKING:
    from synopsis.compaction.archive import (
        Archive,
        ArchiveHit,
        AsyncSearchableArchive,
        JsonlArchive,
        MemoryArchive,
        SearchableArchive,
    )
    from synopsis.compaction.compactor import AsyncCompactor, CompactionResult, Compactor
    from synopsis.compaction.history import HistoryTool, history_tool
    from synopsis.compaction.model import AsyncCompactingModel, CompactingModel
    from synopsis.compaction.options import CompactionOptions, ToolClearing
    from synopsis.compaction.plan import CompactionPlan, KeepTail, plan_compaction
    from synopsis.compaction.recall import Recall
    from synopsis.compaction.skills import SkillConfig
    from synopsis.compaction.store_archive import AsyncStoreArchive, StoreArchive
    from synopsis.compaction.trigger import Trigger, TriggerDecision
    from synopsis.events import CompactionSkipped


__all__ = [
    "Archive",
    "ArchiveHit",
    "AsyncCompactingModel",
    "AsyncCompactor",
    "AsyncSearchableArchive",
    "AsyncStoreArchive",
    "CompactingModel",
    "CompactionOptions",
    "CompactionPlan",
    "CompactionResult",
    "CompactionSkipped",
    "Compactor",
    "HistoryTool",
    "JsonlArchive",
    "KeepTail",
    "MemoryArchive",
    "Recall",
    "SearchableArchive",
    "SkillConfig",
    "StoreArchive",
    "ToolClearing",
    "Trigger",
    "TriggerDecision",
    "history_tool",
    "plan_compaction",
]

_EXPORTS = {
    "synopsis.compaction.archive": (
        "Archive",
        "ArchiveHit",
        "AsyncSearchableArchive",
        "JsonlArchive",
        "MemoryArchive",
        "SearchableArchive",
    ),
    "synopsis.compaction.history": ("HistoryTool", "history_tool"),
    "synopsis.compaction.store_archive": ("AsyncStoreArchive", "StoreArchive"),
    "synopsis.compaction.compactor": (
        "AsyncCompactor",
        "CompactionResult",
        "Compactor",
    ),
    "synopsis.compaction.model": (
        "AsyncCompactingModel",
        "CompactingModel",
    ),
    "synopsis.compaction.options": (
        "CompactionOptions",
        "ToolClearing",
    ),
    "synopsis.compaction.plan": (
        "CompactionPlan",
        "KeepTail",
        "plan_compaction",
    ),
    "synopsis.compaction.recall": ("Recall",),
    "synopsis.compaction.skills": ("SkillConfig",),
    "synopsis.compaction.trigger": (
        "Trigger",
        "TriggerDecision",
    ),
    "synopsis.events": ("CompactionSkipped",),
}

# Each name is imported the first time it is read (PEP 562; see synopsis._lazy).
__getattr__, __dir__ = _exports(__name__, _EXPORTS)
