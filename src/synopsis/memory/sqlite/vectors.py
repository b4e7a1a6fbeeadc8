"""Pure SQL builders for ``reembed`` on the SQLite backend (no I/O).

Statements that embed the memories lacking a vector of the store's embedder (none at all, or
one another model made): count them, read a batch of them (oldest first), write their vectors
with the embedder's identity; and one that forgets every vector of a tenant (``reembed
--all``). A vector is written only while the item still holds the text that was embedded, so
a ``put`` that replaced the text meanwhile keeps its own vector (or none), and the item is
picked up by the next batch.
"""

from __future__ import annotations

from collections.abc import Sequence

from synopsis.memory._types import Namespace
from synopsis.memory.sqlite import sql as lite

__all__ = [
    "sqlite_adopt_vectors",
    "sqlite_count_unembedded",
    "sqlite_forget_vectors",
    "sqlite_set_vectors",
    "sqlite_unembedded",
]


def _unembedded(tenant: str, now: float, embedder_id: str | None) -> lite.Statement:
    """FROM and WHERE of the tenant's live items without a vector of ``embedder_id``.

    None: without any vector.
    """
    own = "" if embedder_id is None else " AND v.embedder = ?"
    return lite.Statement(
        " FROM memories AS m WHERE m.tenant = ? AND (m.expires_at IS NULL OR m.expires_at > ?)"
        f" AND NOT EXISTS (SELECT 1 FROM memory_vectors AS v WHERE v.memory_id = m.id{own})",
        (tenant, now) if embedder_id is None else (tenant, now, embedder_id),
    )


def sqlite_count_unembedded(tenant: str, now: float, embedder_id: str | None) -> lite.Statement:
    """How many live items of the tenant have no vector of ``embedder_id`` (None: none)."""
    tail = _unembedded(tenant, now, embedder_id)
    return lite.Statement("SELECT count(*)" + tail.sql, tail.params)


def sqlite_unembedded(tenant: str, now: float, limit: int, embedder_id: str) -> lite.Statement:
    """``path, key, text`` of up to ``limit`` live items without a vector of ``embedder_id``,
    oldest id first."""
    tail = _unembedded(tenant, now, embedder_id)
    return lite.Statement(
        "SELECT m.path, m.key, m.text" + tail.sql + " ORDER BY m.id LIMIT ?", (*tail.params, limit)
    )


def sqlite_set_vectors(
    tenant: str, rows: Sequence[tuple[Namespace, str, str, bytes]], embedder_id: str
) -> lite.Batch:
    """Store each packed vector, made by ``embedder_id``, on its ``(namespace, key)`` while
    the text is still ``text``."""
    return lite.Batch(
        "INSERT INTO memory_vectors (memory_id, vector, embedder)"
        " SELECT m.id, ?, ? FROM memories AS m"
        " WHERE m.tenant = ? AND m.path = ? AND m.key = ? AND m.text = ?"
        " ON CONFLICT (memory_id) DO UPDATE SET vector = excluded.vector,"
        " embedder = excluded.embedder",
        [
            (blob, embedder_id, tenant, lite.encode_path(ns), key, text)
            for ns, key, text, blob in rows
        ],
    )


def sqlite_forget_vectors(tenant: str) -> lite.Statement:
    """Delete the vector of every item of the tenant (expired ones too)."""
    return lite.Statement(
        "DELETE FROM memory_vectors WHERE memory_id IN (SELECT id FROM memories WHERE tenant = ?)",
        (tenant,),
    )


def sqlite_adopt_vectors(tenant: str, embedder_id: str) -> lite.Statement:
    """Stamp the tenant's vectors of unknown model (stored before version 5) ``embedder_id``."""
    return lite.Statement(
        "UPDATE memory_vectors SET embedder = ? WHERE embedder IS NULL"
        " AND memory_id IN (SELECT id FROM memories WHERE tenant = ?)",
        (embedder_id, tenant),
    )
