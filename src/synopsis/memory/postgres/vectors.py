"""Pure SQL builders for ``reembed`` on the PostgreSQL backend (no I/O).

Statements that embed the memories lacking a vector of the store's embedder (none at all, or
one another model made): count them, read a batch of them (oldest first), write their vectors
with the embedder's identity; and one that forgets every vector of a tenant (``reembed
--all``). A vector is written only while the item still holds the text that was embedded, so
a ``put`` that replaced the text meanwhile keeps its own vector (or none), and the item is
picked up by the next batch.

``embedder`` is NULL exactly when ``embedding`` is, except for embeddings stored before
identities were recorded (an unknown model): ``embedder IS DISTINCT FROM`` the store's
identity therefore finds every item without a vector of the store's model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from synopsis.memory._types import Namespace
from synopsis.memory.postgres import sql as pg

__all__ = [
    "pg_adopt_vectors",
    "pg_count_unembedded",
    "pg_forget_vectors",
    "pg_set_vectors",
    "pg_unembedded",
]

_PG_LIVE: Final = (
    " FROM {s}.memories m WHERE m.tenant = %(tenant)s"
    " AND (m.expires_at IS NULL OR m.expires_at > %(now)s)"
)
_PG_UNEMBEDDED: Final = _PG_LIVE + " AND m.embedder IS DISTINCT FROM %(embedder)s"


def pg_count_unembedded(schema: str, tenant: str, now: float, embedder: str | None) -> pg.Statement:
    """How many live items of the tenant have no vector of ``embedder`` (None: no vector)."""
    params = {"tenant": tenant, "now": now, "embedder": embedder}
    if embedder is None:
        return pg.stmt(schema, "SELECT count(*)" + _PG_LIVE + " AND m.embedding IS NULL", params)
    return pg.stmt(schema, "SELECT count(*)" + _PG_UNEMBEDDED, params)


def pg_unembedded(schema: str, tenant: str, now: float, limit: int, embedder: str) -> pg.Statement:
    """``namespace, key, text`` of up to ``limit`` live items without a vector of
    ``embedder``, oldest first."""
    return pg.stmt(
        schema,
        "SELECT m.namespace, m.key, m.text" + _PG_UNEMBEDDED + " ORDER BY m.id LIMIT %(limit)s",
        {"tenant": tenant, "now": now, "limit": limit, "embedder": embedder},
    )


def pg_set_vectors(
    schema: str,
    tenant: str,
    rows: Sequence[tuple[Namespace, str, str, Sequence[float]]],
    embedder: str,
) -> pg.Statement:
    """Store each vector, made by ``embedder``, on its ``(namespace, key)`` while the text is
    still ``text``.

    Returns one row per item written.
    """
    params = {
        "tenant": tenant,
        "embedder": embedder,
        "paths": ["\x1f".join(ns) for ns, _, _, _ in rows],
        "keys": [key for _, key, _, _ in rows],
        "texts": [text for _, _, text, _ in rows],
        "embeddings": [pg._array_literal(vector) for _, _, _, vector in rows],
    }
    return pg.stmt(
        schema,
        "UPDATE {s}.memories AS m SET embedding = u.embedding::real[], embedder = %(embedder)s"
        " FROM unnest(%(paths)s::text[], %(keys)s::text[], %(texts)s::text[],"
        " %(embeddings)s::text[]) AS u(path, key, text, embedding)"
        " WHERE m.tenant = %(tenant)s AND m.namespace = string_to_array(u.path, chr(31))"
        " AND m.key = u.key AND m.text = u.text RETURNING m.id",
        params,
    )


def pg_forget_vectors(schema: str, tenant: str) -> pg.Statement:
    """Drop the embedding of every item of the tenant (expired ones too); one row returned,
    the count."""
    return pg.stmt(
        schema,
        "WITH gone AS (UPDATE {s}.memories SET embedding = NULL, embedder = NULL"
        " WHERE tenant = %(tenant)s AND embedding IS NOT NULL RETURNING 1)"
        " SELECT count(*) FROM gone",
        {"tenant": tenant},
    )


def pg_adopt_vectors(schema: str, tenant: str, embedder: str) -> pg.Statement:
    """Stamp the tenant's embeddings of unknown model (stored before version 8) ``embedder``;
    one row returned, the count."""
    return pg.stmt(
        schema,
        "WITH adopted AS (UPDATE {s}.memories SET embedder = %(embedder)s"
        " WHERE tenant = %(tenant)s AND embedding IS NOT NULL AND embedder IS NULL RETURNING 1)"
        " SELECT count(*) FROM adopted",
        {"tenant": tenant, "embedder": embedder},
    )
