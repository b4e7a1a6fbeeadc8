"""synopsis: keep LLM agents working past their context window, and remember earlier sessions.

The curated public API. Everything else is importable from its module but not promised.
"""

from synopsis.compaction.archive import Archive, JsonlArchive, MemoryArchive
from synopsis.compaction.compactor import (
    AsyncCompactingModel,
    AsyncCompactor,
    CompactingModel,
    CompactionResult,
    Compactor,
)
from synopsis.compaction.options import CompactionOptions
from synopsis.compaction.plan import KeepTail
from synopsis.compaction.skills import SkillConfig
from synopsis.compaction.trigger import Trigger, TriggerDecision
from synopsis.errors import (
    AllModelsFailed,
    CompactionError,
    ConfigError,
    ContextLengthExceeded,
    InvalidInput,
    InvalidMessage,
    InvalidNamespace,
    InvalidSummary,
    ModelError,
    ModelTimeout,
    NotFound,
    PermanentModelError,
    ProviderUnavailable,
    RateLimited,
    RetryExhausted,
    StoreError,
    SynopsisError,
    TenantMismatch,
    TransientModelError,
)
from synopsis.events import AfterSummarize, BeforeSummarize, GenerateSummary, SummarizeFailed
from synopsis.messages import validate_messages
from synopsis.models import AsyncModel, Model, ModelResponse, ModelSettings, Usage
from synopsis.models._resolve import resolve_model
from synopsis.models.extractive import AsyncExtractiveModel, ExtractiveModel
from synopsis.models.retry import Cooldown, RetryPolicy
from synopsis.prompts import CHINESE, ENGLISH, PromptSet
from synopsis.session.memory import AsyncSessionMemory, SessionMemory
from synopsis.summarizer import AsyncSummarizer, Summarizer, SummaryResult
from synopsis.tokens import TokenCount, TokenCounter
from synopsis.transcripts import Transcript, dump_transcript, load_transcript

__version__ = "0.1.0"

__all__ = [
    "CHINESE",
    "ENGLISH",
    "AfterSummarize",
    "AllModelsFailed",
    "Archive",
    "AsyncCompactingModel",
    "AsyncCompactor",
    "AsyncExtractiveModel",
    "AsyncModel",
    "AsyncSessionMemory",
    "AsyncSummarizer",
    "BeforeSummarize",
    "CompactingModel",
    "CompactionError",
    "CompactionOptions",
    "CompactionResult",
    "Compactor",
    "ConfigError",
    "ContextLengthExceeded",
    "Cooldown",
    "ExtractiveModel",
    "GenerateSummary",
    "InvalidInput",
    "InvalidMessage",
    "InvalidNamespace",
    "InvalidSummary",
    "JsonlArchive",
    "KeepTail",
    "MemoryArchive",
    "Model",
    "ModelError",
    "ModelResponse",
    "ModelSettings",
    "ModelTimeout",
    "NotFound",
    "PermanentModelError",
    "PromptSet",
    "ProviderUnavailable",
    "RateLimited",
    "RetryExhausted",
    "RetryPolicy",
    "SessionMemory",
    "SkillConfig",
    "StoreError",
    "SummarizeFailed",
    "Summarizer",
    "SummaryResult",
    "SynopsisError",
    "TenantMismatch",
    "TokenCount",
    "TokenCounter",
    "Transcript",
    "TransientModelError",
    "Trigger",
    "TriggerDecision",
    "Usage",
    "dump_transcript",
    "load_transcript",
    "resolve_model",
    "validate_messages",
]
