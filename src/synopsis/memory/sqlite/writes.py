"""Batched writes on the SQLite backend: ``put_many``'s upsert and the bulk load.

Both run inside the caller's write transaction and write the same rows with the same
statements (a multi-row upsert per chunk, then the vectors). A **bulk load** differs only in
what keeps the derived data: ``put_many`` leaves it to the per-row insert triggers (each new
row adds itself to the FTS5 index and to its tenant's totals), a bulk load drops those two
triggers for the transaction and rebuilds what they would have written once, set-based,
before the transaction ends:

* the FTS5 rows of every new item, in one ``INSERT ... SELECT`` over the new rowids;
* each tenant's ``tenant_totals`` (count, total length), added in one grouped statement;
* the covering ``memories_scope`` index, when the load is at least as large as the table
  (then building it once, sorted, costs less than inserting each row into it): dropped
  before the rows go in, created again after.

New rows are exactly those with a rowid above the largest one before the load (SQLite gives
a new row ``max(rowid) + 1`` until the largest possible rowid is taken; with rowids that
high the load keeps the triggers). A replaced row goes through the update triggers, which
stay, so its FTS5 row and its tenant's length are kept as by ``put``. Everything is in the
caller's transaction: a failure (or a crash) rolls the rows, the rebuilt statistics and the
schema changes back together, and the statistics after a load are those ``put_many`` leaves
(``tests/conformance/test_bulk_load.py`` checks searches for equal scores).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Final

from synopsis._sql import Statement
from synopsis._sql import sqlite as lite
from synopsis.memory._backend import Vector
from synopsis.memory._checks import PutRequest
from synopsis.memory.ranking import pack_vector
from synopsis.memory.sqlite import sql
from synopsis.memory.sqlite.schema import ROW_TRIGGERS, SCOPE_INDEX

__all__ = ["bulk_load", "upsert_batch", "write_vectors"]

#: Rows per statement of a batched upsert (also bounded by SQLite's limit on bound values).
UPSERT_CHUNK: Final = 500
#: Rowids below this are followed by ``max(rowid) + 1`` for certain (SQLite's maximum is
#: 2**63 - 1); above it a bulk load keeps the per-row triggers.
_ROWID_ROOM: Final = 2**62

_MARK: Final = Statement(
    "SELECT coalesce((SELECT max(id) FROM memories), 0),"
    " coalesce((SELECT sum(items) FROM tenant_totals), 0)"
)


def upsert_batch(
    conn: sqlite3.Connection,
    requests: Sequence[PutRequest],
    terms: Sequence[Sequence[str]],
    now: float,
) -> list[tuple[int, float]]:
    """Upsert the rows (a few multi-row statements); ``(id, created_at)`` of each, in order."""
    room = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) - 2
    max_rows = max(1, min(UPSERT_CHUNK, room // sql.UPSERT_ROW_VALUES))
    written: dict[tuple[str, str], tuple[int, float]] = {}
    for upsert in sql.upsert_memories(requests, terms, now, max_rows=max_rows):
        for path, key, memory_id, created in conn.execute(upsert.text, upsert.params):
            written[(path, key)] = (memory_id, created)
    return [written[(sql.encode_path(r.namespace), r.key)] for r in requests]


def write_vectors(
    conn: sqlite3.Connection,
    ids: Sequence[int],
    vectors: Sequence[Vector] | None,
    embedder_id: str | None,
) -> None:
    """Store each item's vector, or (no vectors) drop the vectors of ``ids``."""
    room = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    follow = (
        sql.delete_vectors(ids, max_rows=min(UPSERT_CHUNK, room))
        if vectors is None
        else sql.upsert_vectors(
            [(i, pack_vector(v), embedder_id) for i, v in zip(ids, vectors, strict=True)],
            max_rows=max(1, min(UPSERT_CHUNK, room // 3)),
        )
    )
    for statement in follow:
        lite.execute(conn, statement)


def before_load(*, rebuild_index: bool) -> list[Statement]:
    """What a bulk load changes before its rows go in: the insert triggers go (and the index)."""
    drops = [Statement(f"DROP TRIGGER {name}") for name, _ in ROW_TRIGGERS]
    return [*drops, Statement("DROP INDEX memories_scope")] if rebuild_index else drops


def after_load(first_new: int, *, rebuild_index: bool) -> list[Statement]:
    """What a bulk load rebuilds once its rows are in (rows with rowid >= ``first_new`` are
    new): their FTS5 rows, the tenants' totals, the insert triggers (and the index)."""
    rebuilt = [
        Statement(
            "INSERT INTO memories_fts (rowid, terms) SELECT id, terms FROM memories WHERE id >= ?",
            (first_new,),
        ),
        Statement(
            "INSERT INTO tenant_totals (tenant, items, length)"
            " SELECT tenant, count(*), sum(doc_len) FROM memories WHERE id >= ? GROUP BY tenant"
            " ON CONFLICT (tenant) DO UPDATE SET"
            " items = items + excluded.items, length = length + excluded.length",
            (first_new,),
        ),
        *(Statement(create) for _, create in ROW_TRIGGERS),
    ]
    return [*rebuilt, Statement(SCOPE_INDEX)] if rebuild_index else rebuilt


def bulk_load(
    conn: sqlite3.Connection,
    requests: Sequence[PutRequest],
    terms: Sequence[Sequence[str]],
    vectors: Sequence[Vector] | None,
    embedder_id: str | None,
    now: float,
) -> int:
    """Inside a write transaction: write the rows as ``put_many`` does, the derived data
    rebuilt once (see the module docstring); how many rows were written."""
    last_id, rows = conn.execute(_MARK.text).fetchone()
    bulk = last_id < _ROWID_ROOM
    rebuild_index = bulk and len(requests) >= rows
    for statement in before_load(rebuild_index=rebuild_index) if bulk else ():
        lite.execute(conn, statement)
    paths = [sql.encode_path(r.namespace) for r in requests]
    order = sorted(range(len(requests)), key=lambda i: (paths[i], requests[i].key))
    ordered = [requests[i] for i in order]
    ids = [
        memory_id for memory_id, _ in upsert_batch(conn, ordered, [terms[i] for i in order], now)
    ]
    if vectors is not None:
        write_vectors(conn, ids, [vectors[i] for i in order], embedder_id)
    else:  # only a replaced row (an old rowid) can hold a vector
        write_vectors(conn, [i for i in ids if i <= last_id], None, embedder_id)
    for statement in after_load(last_id + 1, rebuild_index=rebuild_index) if bulk else ():
        lite.execute(conn, statement)
    return len(requests)
