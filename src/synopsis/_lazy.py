"""The public API's names, loaded on first use (PEP 562), so ``import synopsis`` is cheap.

A package lists what it exports and the module each name lives in; :func:`exports` gives it
the module ``__getattr__`` and ``__dir__`` that import that module the first time the name is
read, and cache the value in the package. ``import synopsis`` then loads no store, no
redaction pattern, no model and no third-party library; ``synopsis.Compactor`` loads what a
compactor needs, once.

A public class shows the path a user imports it from (``synopsis.Compactor``, not
``synopsis.compaction.compactor.Compactor``; ``synopsis.compaction.CompactionPlan`` for a
subpackage's own API), as httpx does, so reprs, tracebacks and pickles name that path. A name
the top level exports shows ``synopsis`` whichever package it is first read from, so the path
does not depend on the order of imports. A class's string annotations are resolved first, in
the module that defines them, so ``typing.get_type_hints`` (and pydantic, FastAPI) still read
them once ``__module__`` has moved.
"""

from __future__ import annotations

import importlib
import sys
import typing as _typing

from synopsis import errors as _errors

if _typing.TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["TOP_LEVEL", "exports"]

#: What ``synopsis`` exports, by the module that defines it.
TOP_LEVEL: dict[str, tuple[str, ...]] = {
    "synopsis.compaction.archive": ("Archive", "JsonlArchive", "MemoryArchive"),
    "synopsis.compaction.compactor": ("AsyncCompactor", "CompactionResult", "Compactor"),
    "synopsis.compaction.history": ("HistoryTool", "history_tool"),
    "synopsis.compaction.model": ("AsyncCompactingModel", "CompactingModel"),
    "synopsis.compaction.options": ("CompactionOptions",),
    "synopsis.compaction.plan": ("KeepTail",),
    "synopsis.compaction.skills": ("SkillConfig",),
    "synopsis.compaction.store_archive": ("AsyncStoreArchive", "StoreArchive"),
    "synopsis.compaction.trigger": ("Trigger", "TriggerDecision"),
    "synopsis.errors": tuple(_errors.__all__),
    "synopsis.events": (
        "AfterSummarize",
        "ArchiveRecalled",
        "BeforeSummarize",
        "CompactionSkipped",
        "GenerateSummary",
        "OrphanToolResultsDropped",
        "OutboxReplayed",
        "SessionMemoryFailed",
        "SessionSummarySaved",
        "SessionSummaryStarted",
        "SessionSummaryTruncated",
        "SummarizeFailed",
        "ToolOutputsCleared",
        "ValuesRedacted",
    ),
    "synopsis.models": (
        "AsyncModel",
        "Model",
        "ModelResponse",
        "ModelSettings",
        "Usage",
        "resolve_model",
    ),
    "synopsis.models.extractive": ("AsyncExtractiveModel", "ExtractiveModel"),
    "synopsis.models.failover": (
        "AsyncFailoverModel",
        "AsyncRetryingModel",
        "FailoverModel",
        "RetryingModel",
    ),
    "synopsis.models.retry": ("Cooldown", "RetryPolicy"),
    "synopsis.prompts": ("CHINESE", "ENGLISH", "PromptSet"),
    "synopsis.redact": ("Redactor",),
    "synopsis.session.memory": ("AsyncSessionMemory", "ScheduleResult", "SessionMemory"),
    "synopsis.session.options": ("SessionOptions",),
    "synopsis.summarizer": ("AsyncSummarizer", "Summarizer", "SummaryResult"),
    "synopsis.tokens": ("TokenCount", "TokenCounter"),
    "synopsis.transcripts": ("Transcript", "dump_transcript", "load_transcript"),
    "synopsis.validation": ("validate_messages",),
}
_TOP_NAMES = frozenset(name for names in TOP_LEVEL.values() for name in names)


def exports(
    package: str, table: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, which exports ``table``'s names."""
    where = {name: module for module, names in table.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        if isinstance(value, type):
            _present(value, "synopsis" if name in _TOP_NAMES else package)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__


def _present(cls: type, space: str) -> None:
    if cls.__module__ in (space, "synopsis"):
        return
    _resolve_annotations(cls)
    cls.__module__ = space


def _resolve_annotations(cls: type) -> None:
    import inspect  # only once a class is presented: neither is needed to import synopsis
    import typing

    own = inspect.get_annotations(cls)
    if not any(isinstance(hint, str) for hint in own.values()):
        return
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:  # unresolvable before the move too: nothing is lost
        return
    cls.__annotations__ = {name: hints.get(name, hint) for name, hint in own.items()}
