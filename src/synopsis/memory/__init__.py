"""Long-term memory and session summaries: the store contracts and their backends.

Every backend implements the same contracts, sync and async, and passes one conformance suite:
:class:`InMemoryStore` (tests, prototypes), :class:`SQLiteStore` (the embedded default) and
:class:`PostgresStore` (many replicas on one database; needs ``synopsis[postgres]``, imported
on first use). :func:`open_store` opens SQLite or PostgreSQL from a path or URL.
:func:`neighbour_contexts` gives chat turns the turns around them as their ``context``.
:data:`TRANSCRIPT_KINDS` are the kinds of stored transcripts (an adapter's raw session items,
messages compaction archived in a store: :data:`ARCHIVED_MESSAGE_KIND`),
which session recall leaves out: ``search(..., exclude_kinds=TRANSCRIPT_KINDS)`` does too.

Each backend has its folder (:mod:`synopsis.memory.sqlite`, :mod:`synopsis.memory.postgres`).
:mod:`synopsis.memory.kinds` (kinds and kind filters) and :mod:`synopsis.memory.rules` (the
checks and limits of stored input) serve code that checks input before a store sees it.
"""

import typing

from synopsis.errors import UserDeleted
from synopsis.memory._types import (
    AsyncMemoryStore,
    AsyncSessionStore,
    AsyncSummaryStore,
    Embedder,
    MemoryItem,
    MemoryStore,
    Namespace,
    NamespaceLike,
    NewMemory,
    OutboxEntry,
    SearchHit,
    SearchMode,
    SessionStore,
    SessionSummary,
    SummaryStore,
    normalize_namespace,
)
from synopsis.memory.inmemory import AsyncInMemoryStore, InMemoryStore
from synopsis.memory.kinds import ARCHIVED_MESSAGE_KIND, TRANSCRIPT_KINDS
from synopsis.memory.open import open_store
from synopsis.memory.ranking import neighbour_contexts
from synopsis.memory.sqlite import AsyncSQLiteStore, SQLiteStore

if typing.TYPE_CHECKING:
    from synopsis.memory.postgres import AsyncPostgresStore, PostgresStore

__all__ = [
    "ARCHIVED_MESSAGE_KIND",
    "TRANSCRIPT_KINDS",
    "AsyncInMemoryStore",
    "AsyncMemoryStore",
    "AsyncPostgresStore",
    "AsyncSQLiteStore",
    "AsyncSessionStore",
    "AsyncSummaryStore",
    "Embedder",
    "InMemoryStore",
    "MemoryItem",
    "MemoryStore",
    "Namespace",
    "NamespaceLike",
    "NewMemory",
    "OutboxEntry",
    "PostgresStore",
    "SQLiteStore",
    "SearchHit",
    "SearchMode",
    "SessionStore",
    "SessionSummary",
    "SummaryStore",
    "UserDeleted",
    "neighbour_contexts",
    "normalize_namespace",
    "open_store",
]

_POSTGRES = frozenset({"PostgresStore", "AsyncPostgresStore"})


def __getattr__(name: str) -> typing.Any:
    # psycopg is an optional extra: load the PostgreSQL backend only when it is asked for.
    if name in _POSTGRES:
        from synopsis.memory import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module 'synopsis.memory' has no attribute {name!r}")
