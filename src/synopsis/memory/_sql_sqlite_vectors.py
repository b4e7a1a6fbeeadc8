"""Pure SQL builders for ``reembed`` on the SQLite backend (no I/O).

Three statements embed the memories written without an embedder: count them, read a batch
of them (oldest first), and write their vectors. A vector is written only while the item
still holds the text that was embedded, so a ``put`` that replaced the text meanwhile keeps
its own vector (or none), and the item is picked up by the next batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from synopsis.memory import _sql_sqlite as lite
from synopsis.memory._types import Namespace

__all__ = ["sqlite_count_unembedded", "sqlite_set_vectors", "sqlite_unembedded"]

_SQLITE_UNEMBEDDED: Final = (
    " FROM memories AS m WHERE m.tenant = ? AND (m.expires_at IS NULL OR m.expires_at > ?)"
    " AND NOT EXISTS (SELECT 1 FROM memory_vectors AS v WHERE v.memory_id = m.id)"
)


def sqlite_count_unembedded(tenant: str, now: float) -> lite.Statement:
    """How many live items of the tenant have no vector."""
    return lite.Statement("SELECT count(*)" + _SQLITE_UNEMBEDDED, (tenant, now))


def sqlite_unembedded(tenant: str, now: float, limit: int) -> lite.Statement:
    """``path, key, text`` of up to ``limit`` live items without a vector, oldest id first."""
    return lite.Statement(
        "SELECT m.path, m.key, m.text" + _SQLITE_UNEMBEDDED + " ORDER BY m.id LIMIT ?",
        (tenant, now, limit),
    )


def sqlite_set_vectors(
    tenant: str, rows: Sequence[tuple[Namespace, str, str, bytes]]
) -> lite.Batch:
    """Store each packed vector on its ``(namespace, key)`` while the text is still ``text``."""
    return lite.Batch(
        "INSERT INTO memory_vectors (memory_id, vector)"
        " SELECT m.id, ? FROM memories AS m"
        " WHERE m.tenant = ? AND m.path = ? AND m.key = ? AND m.text = ?"
        " ON CONFLICT (memory_id) DO UPDATE SET vector = excluded.vector",
        [(blob, tenant, lite.encode_path(ns), key, text) for ns, key, text, blob in rows],
    )
