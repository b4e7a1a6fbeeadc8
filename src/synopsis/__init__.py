"""synopsis: keep LLM agents working past their context window, and remember earlier sessions.

The curated public API. Everything else is importable from its module but not promised.
"""

import inspect as _inspect
import logging as _logging
import sys as _sys
import typing as _typing

from synopsis.compaction.archive import Archive, JsonlArchive, MemoryArchive
from synopsis.compaction.compactor import AsyncCompactor, CompactionResult, Compactor
from synopsis.compaction.history import HistoryTool, history_tool
from synopsis.compaction.model import AsyncCompactingModel, CompactingModel
from synopsis.compaction.options import CompactionOptions
from synopsis.compaction.plan import KeepTail
from synopsis.compaction.skills import SkillConfig
from synopsis.compaction.store_archive import AsyncStoreArchive, StoreArchive
from synopsis.compaction.trigger import Trigger, TriggerDecision
from synopsis.errors import (
    AllModelsFailed,
    CompactionError,
    ConfigError,
    ContextLengthExceeded,
    CoolingDown,
    InvalidInput,
    InvalidMessage,
    InvalidNamespace,
    InvalidSummary,
    MigrationError,
    ModelError,
    ModelTimeout,
    NotFound,
    PermanentModelError,
    ProviderUnavailable,
    RateLimited,
    RetryExhausted,
    SessionConflict,
    StoreError,
    SynopsisError,
    TenantMismatch,
    TransientModelError,
    Unauthorized,
    UpstreamNotConfigured,
    UserDeleted,
)
from synopsis.events import (
    AfterSummarize,
    BeforeSummarize,
    CompactionSkipped,
    GenerateSummary,
    OutboxReplayed,
    SessionMemoryFailed,
    SessionSummarySaved,
    SessionSummaryStarted,
    SessionSummaryTruncated,
    SummarizeFailed,
    ToolOutputsCleared,
    ValuesRedacted,
)
from synopsis.models import AsyncModel, Model, ModelResponse, ModelSettings, Usage, resolve_model
from synopsis.models.extractive import AsyncExtractiveModel, ExtractiveModel
from synopsis.models.failover import (
    AsyncFailoverModel,
    AsyncRetryingModel,
    FailoverModel,
    RetryingModel,
)
from synopsis.models.retry import Cooldown, RetryPolicy
from synopsis.prompts import CHINESE, ENGLISH, PromptSet
from synopsis.redact import Redactor
from synopsis.session.memory import AsyncSessionMemory, ScheduleResult, SessionMemory
from synopsis.session.options import SessionOptions
from synopsis.summarizer import AsyncSummarizer, Summarizer, SummaryResult
from synopsis.tokens import TokenCount, TokenCounter
from synopsis.transcripts import Transcript, dump_transcript, load_transcript
from synopsis.validation import validate_messages

__version__ = "0.1.0"

# A library does not configure logging: without this, Python's last-resort handler prints our
# warnings to stderr in applications that never set logging up.
_logging.getLogger("synopsis").addHandler(_logging.NullHandler())

__all__ = [
    "CHINESE",
    "ENGLISH",
    "AfterSummarize",
    "AllModelsFailed",
    "Archive",
    "AsyncCompactingModel",
    "AsyncCompactor",
    "AsyncExtractiveModel",
    "AsyncFailoverModel",
    "AsyncModel",
    "AsyncRetryingModel",
    "AsyncSessionMemory",
    "AsyncStoreArchive",
    "AsyncSummarizer",
    "BeforeSummarize",
    "CompactingModel",
    "CompactionError",
    "CompactionOptions",
    "CompactionResult",
    "CompactionSkipped",
    "Compactor",
    "ConfigError",
    "ContextLengthExceeded",
    "Cooldown",
    "CoolingDown",
    "ExtractiveModel",
    "FailoverModel",
    "GenerateSummary",
    "HistoryTool",
    "InvalidInput",
    "InvalidMessage",
    "InvalidNamespace",
    "InvalidSummary",
    "JsonlArchive",
    "KeepTail",
    "MemoryArchive",
    "MigrationError",
    "Model",
    "ModelError",
    "ModelResponse",
    "ModelSettings",
    "ModelTimeout",
    "NotFound",
    "OutboxReplayed",
    "PermanentModelError",
    "PromptSet",
    "ProviderUnavailable",
    "RateLimited",
    "Redactor",
    "RetryExhausted",
    "RetryPolicy",
    "RetryingModel",
    "ScheduleResult",
    "SessionConflict",
    "SessionMemory",
    "SessionMemoryFailed",
    "SessionOptions",
    "SessionSummarySaved",
    "SessionSummaryStarted",
    "SessionSummaryTruncated",
    "SkillConfig",
    "StoreArchive",
    "StoreError",
    "SummarizeFailed",
    "Summarizer",
    "SummaryResult",
    "SynopsisError",
    "TenantMismatch",
    "TokenCount",
    "TokenCounter",
    "ToolOutputsCleared",
    "Transcript",
    "TransientModelError",
    "Trigger",
    "TriggerDecision",
    "Unauthorized",
    "UpstreamNotConfigured",
    "Usage",
    "UserDeleted",
    "ValuesRedacted",
    "dump_transcript",
    "history_tool",
    "load_transcript",
    "resolve_model",
    "validate_messages",
]


def _present_public_classes() -> None:
    """Show each public class under the path a user imports it from (``synopsis.Compactor``,
    not ``synopsis.compaction.compactor.Compactor``; ``synopsis.compaction.CompactionPlan``
    for a subpackage's own API), as httpx does: reprs, tracebacks and pickles name that path.

    A class's string annotations are resolved first, in the module that defines them, so
    ``typing.get_type_hints`` (and pydantic, FastAPI) still read them once ``__module__`` has
    moved. The subpackages go first, so a class both export ends up under ``synopsis``.
    """
    spaces = ("synopsis.compaction", "synopsis.session", "synopsis.redact", "synopsis.models")
    for space in (*spaces, __name__):
        module = _sys.modules[space]
        for name in module.__all__:
            value = vars(module).get(name)  # never a lazy attribute (an optional extra)
            if isinstance(value, type) and value.__module__ != space:
                _resolve_annotations(value)
                value.__module__ = space


def _resolve_annotations(cls: type) -> None:
    own = _inspect.get_annotations(cls)
    if not any(isinstance(hint, str) for hint in own.values()):
        return
    try:
        hints = _typing.get_type_hints(cls, include_extras=True)
    except Exception:  # unresolvable before the move too: nothing is lost
        return
    cls.__annotations__ = {name: hints.get(name, hint) for name, hint in own.items()}


_present_public_classes()
