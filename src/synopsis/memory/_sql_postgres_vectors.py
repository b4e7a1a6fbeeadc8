"""Pure SQL builders for ``reembed`` on the PostgreSQL backend (no I/O).

Three statements embed the memories written without an embedder: count them, read a batch
of them (oldest first), and write their vectors. A vector is written only while the item
still holds the text that was embedded, so a ``put`` that replaced the text meanwhile keeps
its own vector (or none), and the item is picked up by the next batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from synopsis.memory import _sql_postgres as pg
from synopsis.memory._types import Namespace

__all__ = ["pg_count_unembedded", "pg_set_vectors", "pg_unembedded"]

_PG_UNEMBEDDED: Final = (
    " FROM {s}.memories m WHERE m.tenant = %(tenant)s AND m.embedding IS NULL"
    " AND (m.expires_at IS NULL OR m.expires_at > %(now)s)"
)


def pg_count_unembedded(schema: str, tenant: str, now: float) -> pg.Statement:
    """How many live items of the tenant have no vector."""
    return pg.stmt(schema, "SELECT count(*)" + _PG_UNEMBEDDED, {"tenant": tenant, "now": now})


def pg_unembedded(schema: str, tenant: str, now: float, limit: int) -> pg.Statement:
    """``namespace, key, text`` of up to ``limit`` live items without a vector, oldest first."""
    return pg.stmt(
        schema,
        "SELECT m.namespace, m.key, m.text" + _PG_UNEMBEDDED + " ORDER BY m.id LIMIT %(limit)s",
        {"tenant": tenant, "now": now, "limit": limit},
    )


def pg_set_vectors(
    schema: str, tenant: str, rows: Sequence[tuple[Namespace, str, str, Sequence[float]]]
) -> pg.Statement:
    """Store each vector on its ``(namespace, key)`` while the text is still ``text``.

    Returns one row per item written.
    """
    params = {
        "tenant": tenant,
        "paths": ["\x1f".join(ns) for ns, _, _, _ in rows],
        "keys": [key for _, key, _, _ in rows],
        "texts": [text for _, _, text, _ in rows],
        "embeddings": [pg._array_literal(vector) for _, _, _, vector in rows],
    }
    return pg.stmt(
        schema,
        "UPDATE {s}.memories AS m SET embedding = u.embedding::real[]"
        " FROM unnest(%(paths)s::text[], %(keys)s::text[], %(texts)s::text[],"
        " %(embeddings)s::text[]) AS u(path, key, text, embedding)"
        " WHERE m.tenant = %(tenant)s AND m.namespace = string_to_array(u.path, chr(31))"
        " AND m.key = u.key AND m.text = u.text RETURNING m.id",
        params,
    )
