"""Long-term memory and session summaries: contracts and backends."""

from synopsis.memory._types import (
    AsyncMemoryStore,
    AsyncSummaryStore,
    MemoryItem,
    MemoryStore,
    Namespace,
    NamespaceLike,
    NewMemory,
    OutboxEntry,
    SearchHit,
    SessionSummary,
    SummaryStore,
    normalize_namespace,
)

__all__ = [
    "AsyncMemoryStore",
    "AsyncSummaryStore",
    "MemoryItem",
    "MemoryStore",
    "Namespace",
    "NamespaceLike",
    "NewMemory",
    "OutboxEntry",
    "SearchHit",
    "SessionSummary",
    "SummaryStore",
    "normalize_namespace",
]
