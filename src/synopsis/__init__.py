"""synopsis: keep LLM agents working past their context window, and remember earlier sessions.

The curated public API, each name loaded on first use. Everything else is importable from its
module but not promised.
"""

import logging as _logging
import typing as _typing

from synopsis._lazy import TOP_LEVEL as _TOP_LEVEL
from synopsis._lazy import exports as _exports

if _typing.TYPE_CHECKING:
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
        DatabaseError,
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
        ArchiveRecalled,
        BeforeSummarize,
        CompactionSkipped,
        GenerateSummary,
        OrphanToolResultsDropped,
        OutboxReplayed,
        SessionMemoryFailed,
        SessionSummarySaved,
        SessionSummaryStarted,
        SessionSummaryTruncated,
        SummarizeFailed,
        ToolOutputsCleared,
        ValuesRedacted,
    )
    from synopsis.models import (
        AsyncModel,
        Model,
        ModelResponse,
        ModelSettings,
        Usage,
        resolve_model,
    )
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
    "ArchiveRecalled",
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
    "DatabaseError",
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
    "OrphanToolResultsDropped",
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


# Each name is imported the first time it is read (PEP 562): ``import synopsis`` loads none of
# the stores, models, redaction patterns or third-party libraries (see synopsis._lazy).
__getattr__, __dir__ = _exports(__name__, _TOP_LEVEL)

# The errors are cheap (the standard library only) and every part raises them: load them now,
# so ``synopsis.errors.ConfigError`` shows ``synopsis.ConfigError`` however it was reached.
for _name in _TOP_LEVEL["synopsis.errors"]:
    __getattr__(_name)
del _name
