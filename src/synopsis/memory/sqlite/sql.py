"""SQL for the SQLite backend: pure statement builders (the schema is in :mod:`.schema`).

Nothing here touches a connection. Every value is a bound parameter; the only text ever
placed into SQL is fixed text written in this module (placeholders and column names).

Namespaces are stored as a ``path``: each label followed by ``\\x1f``. Labels may not hold
control characters (``normalize_namespace`` rejects them), so the separator never occurs
inside a label and the encoding is exact. A prefix matches whole labels with a range on the
path: every path starting with ``p`` (which ends with ``\\x1f``) lies in ``[p, p'[`` where
``p'`` is ``p`` with its last character raised to ``\\x20``; no ``LIKE`` is involved, and
binary (UTF-8) order of paths equals tuple order of namespaces.

Keyword search ranks with BM25 over the searched scope (the live items of the tenant under the
prefix, of the kinds asked for and none left out, with the tags), as every backend does.
:func:`scope_stats` counts the scope and sums its lengths (an index-only scan of
``memories_scope`` unless kinds or tags are filtered, or ``tenant_totals`` for a whole
tenant); :func:`keyword_page` scores the candidates in SQL: every item of a small scope
(one user's memories are a short range of ``memories_scope``, so the search never looks at the
rest of the table) or the FTS5 match over the space-joined ``indexed_terms`` (kept in sync by
triggers; the query is the ``query_terms``, each double-quoted, joined by ``OR``, so FTS5
syntax in user text is inert). FTS5's own ``bm25()`` is not used: it counts its statistics
over the whole table, every tenant and user included.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Final

from synopsis._sql import Statement
from synopsis.errors import InvalidNamespace
from synopsis.memory._checks import (
    PutRequest,
    SearchRequest,
)
from synopsis.memory._guards import Claim
from synopsis.memory._types import Namespace, SessionSummary, has_control
from synopsis.memory.ranking import BM25_B, BM25_K1
from synopsis.memory.sqlite.schema import (
    CREATE_VERSION_TABLE,
    MIGRATIONS,
    PRAGMAS,
    READ_VERSION,
    WRITE_VERSION,
)

__all__ = [
    "CREATE_VERSION_TABLE",
    "MIGRATIONS",
    "PRAGMAS",
    "READ_VERSION",
    "SEPARATOR",
    "WRITE_VERSION",
    "Statement",
    "decode_path",
    "encode_path",
    "fts_query",
    "keyword_page",
    "postings_probe",
    "prefix_range",
    "scope_stats",
]

SEPARATOR: Final = "\x1f"
_AFTER_SEPARATOR: Final = "\x20"

_MEMORY_COLUMNS: Final = (
    "m.id, m.path, m.key, m.text, m.kind, m.tags, m.created_at, m.updated_at, m.expires_at, "
    "m.context"
)
_SUMMARY_COLUMNS: Final = (
    "s.tenant, s.user_id, s.session_id, s.version, s.text, s.covers_from, s.covers_to, "
    "s.model, s.content_hash, s.created_at"
)


# --- namespaces and queries --------------------------------------------------------------


@lru_cache(maxsize=65_536)
def encode_path(namespace: Namespace) -> str:
    """The stored form of a namespace (each label followed by the separator); cached, as a
    batch encodes each of its namespaces for every row and again to read its ids back."""
    for label in namespace:
        if has_control(label):
            raise InvalidNamespace("namespace labels may not contain control characters")
    return "".join(label + SEPARATOR for label in namespace)


def decode_path(path: str) -> Namespace:
    """The inverse of :func:`encode_path`."""
    return tuple(path.split(SEPARATOR)[:-1])


def prefix_range(prefix: Namespace) -> tuple[str, str] | None:
    """``(low, high)`` such that ``low <= path < high`` selects the prefix; None = everything."""
    if not prefix:
        return None
    low = encode_path(prefix)
    return low, low[:-1] + _AFTER_SEPARATOR


def fts_query(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression: every term a quoted string, joined by OR."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def _live(now: float) -> tuple[str, tuple[object, ...]]:
    return "(m.expires_at IS NULL OR m.expires_at > ?)", (now,)


def _marks(values: Sequence[object]) -> str:
    """One ``?`` per value, comma-separated (the values are bound, never spliced)."""
    return ", ".join("?" for _ in values)


def _scope(request: SearchRequest, now: float) -> tuple[str, tuple[object, ...]]:
    """The WHERE conditions of a search: tenant, prefix, liveness, kinds and tags."""
    live_sql, live_params = _live(now)
    conditions = ["m.tenant = ?", live_sql]
    params: list[object] = [request.tenant, *live_params]
    bounds = prefix_range(request.prefix)
    if bounds is not None:
        conditions.append("m.path >= ? AND m.path < ?")
        params.extend(bounds)
    if request.kinds is not None:
        conditions.append(f"m.kind IN ({_marks(request.kinds)})")
        params.extend(request.kinds)
    if request.exclude_kinds:
        conditions.append(f"m.kind NOT IN ({_marks(request.exclude_kinds)})")
        params.extend(request.exclude_kinds)
    for name, value in sorted(request.tags.items()):
        conditions.append(
            "EXISTS (SELECT 1 FROM json_each(m.tags) AS t WHERE t.key = ? AND t.value = ?)"
        )
        params.extend((name, value))
    return " AND ".join(conditions), tuple(params)


# --- memories ----------------------------------------------------------------------------


_UPSERT_COLUMNS: Final = """INSERT INTO memories
    (tenant, path, key, text, kind, tags, terms, doc_len, created_at, updated_at, expires_at,
    context)
VALUES """
_UPSERT_SET: Final = """
ON CONFLICT (tenant, path, key) DO UPDATE SET
    text = excluded.text, kind = excluded.kind, tags = excluded.tags,
    context = excluded.context,
    terms = excluded.terms, doc_len = excluded.doc_len, updated_at = excluded.updated_at,
    expires_at = excluded.expires_at,
    created_at = CASE
        WHEN {restored} OR (memories.expires_at IS NOT NULL AND memories.expires_at <= ?)
        THEN excluded.created_at ELSE memories.created_at END"""
_ROW: Final = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
#: Bound values per row of :func:`upsert_memories` (the statement adds two of its own).
UPSERT_ROW_VALUES: Final = 12
_UPSERT: Final = _UPSERT_COLUMNS + _ROW + _UPSERT_SET.format(restored="?")
#: Whether an upserted row is restored: its address is in a JSON list of ``path \x1e key``.
_RESTORED_IN: Final = (
    "excluded.path || char(30) || excluded.key IN (SELECT value FROM json_each(?))"
)


def _memory_values(request: PutRequest, terms: Sequence[str], now: float) -> tuple[object, ...]:
    """The column values a put of ``request`` at ``now`` writes (``terms``: its indexed terms)."""
    created = now if request.created_at is None else request.created_at
    return (
        request.tenant,
        encode_path(request.namespace),
        request.key,
        request.text,
        request.kind,
        json.dumps(request.tags, ensure_ascii=False, sort_keys=True) if request.tags else "{}",
        " ".join(terms),
        len(terms),
        created,
        request.updated(now),
        request.expiry(now),
        request.context,
    )


def upsert_memory(request: PutRequest, terms: Sequence[str], now: float) -> Statement:
    """Insert or replace one item; ``created_at`` survives a replace unless the old expired.

    A restored ``created_at`` (the request has one) replaces the old one.
    """
    values = _memory_values(request, terms, now)
    restored = request.created_at is not None
    return Statement(_UPSERT + " RETURNING id, created_at", (*values, restored, now))


def upsert_memories(
    requests: Sequence[PutRequest], terms: Sequence[Sequence[str]], now: float, *, max_rows: int
) -> list[Statement]:
    """:func:`upsert_memory` for many items (distinct addresses): one statement per ``max_rows``.

    Each statement returns ``path, key, id, created_at`` of its rows. One statement per chunk,
    not one per row: the FTS5 insert trigger then costs a third (each statement that fires it
    makes FTS5 flush its pending terms).
    """
    statements = []
    for start in range(0, len(requests), max_rows):
        chunk = range(start, min(len(requests), start + max_rows))
        values = [v for i in chunk for v in _memory_values(requests[i], terms[i], now)]
        restored = [
            encode_path(requests[i].namespace) + "\x1e" + requests[i].key
            for i in chunk
            if requests[i].created_at is not None
        ]
        sql = (
            _UPSERT_COLUMNS
            + ", ".join([_ROW] * len(chunk))
            + _UPSERT_SET.format(restored=_RESTORED_IN)
            + " RETURNING path, key, id, created_at"
        )
        params = (*values, json.dumps(restored, ensure_ascii=False), now)
        statements.append(Statement(sql, params))
    return statements


def upsert_vectors(
    rows: Sequence[tuple[int, bytes, str | None]], *, max_rows: int
) -> list[Statement]:
    """:func:`upsert_vector` for many ``(memory_id, blob, embedder_id)`` rows: one multi-row
    statement per ``max_rows`` rows, so a batch costs a few statements, not one per item."""
    statements = []
    for start in range(0, len(rows), max_rows):
        chunk = rows[start : start + max_rows]
        values = ", ".join(["(?, ?, ?)"] * len(chunk))
        statements.append(
            Statement(
                f"INSERT INTO memory_vectors (memory_id, vector, embedder) VALUES {values} "
                "ON CONFLICT (memory_id) DO UPDATE SET vector = excluded.vector,"
                " embedder = excluded.embedder",
                tuple(value for row in chunk for value in row),
            )
        )
    return statements


def delete_vectors(memory_ids: Sequence[int], *, max_rows: int) -> list[Statement]:
    """:func:`delete_vector` for many ids: one statement per ``max_rows`` ids."""
    statements = []
    for start in range(0, len(memory_ids), max_rows):
        chunk = tuple(memory_ids[start : start + max_rows])
        marks = ", ".join(["?"] * len(chunk))
        statements.append(
            Statement(f"DELETE FROM memory_vectors WHERE memory_id IN ({marks})", chunk)
        )
    return statements


def upsert_vector(memory_id: int, blob: bytes, embedder_id: str | None) -> Statement:
    """Store the vector of an item, made by the embedder ``embedder_id``."""
    return Statement(
        "INSERT INTO memory_vectors (memory_id, vector, embedder) VALUES (?, ?, ?) "
        "ON CONFLICT (memory_id) DO UPDATE SET vector = excluded.vector,"
        " embedder = excluded.embedder",
        (memory_id, blob, embedder_id),
    )


def delete_vector(memory_id: int) -> Statement:
    return Statement("DELETE FROM memory_vectors WHERE memory_id = ?", (memory_id,))


def select_memory(tenant: str, namespace: Namespace, key: str, now: float) -> Statement:
    live_sql, live_params = _live(now)
    return Statement(
        f"SELECT {_MEMORY_COLUMNS} FROM memories AS m "
        f"WHERE m.tenant = ? AND m.path = ? AND m.key = ? AND {live_sql}",
        (tenant, encode_path(namespace), key, *live_params),
    )


def delete_memory(tenant: str, namespace: Namespace, key: str, now: float) -> Statement:
    """Delete one item (live or expired); RETURNING says whether it was still live."""
    return Statement(
        "DELETE FROM memories WHERE tenant = ? AND path = ? AND key = ? "
        "RETURNING (expires_at IS NULL OR expires_at > ?)",
        (tenant, encode_path(namespace), key, now),
    )


def search_recent(request: SearchRequest, now: float) -> Statement:
    """Items in scope, newest first, paged."""
    where, params = _scope(request, now)
    return Statement(
        f"SELECT {_MEMORY_COLUMNS}, NULL FROM memories AS m WHERE {where} "
        "ORDER BY m.updated_at DESC, m.key, m.path LIMIT ? OFFSET ?",
        (*params, request.limit, request.offset),
    )


def scope_stats(request: SearchRequest, now: float) -> Statement:
    """Number of items in the search's scope and the sum of their lengths (BM25's N, avgdl).

    A whole tenant (no prefix, kind filter or tags) reads its ``tenant_totals`` and subtracts
    its expired items not yet swept (found through ``memories_expiry``); other scopes are
    counted.
    """
    if not request.whole_tenant:
        where, params = _scope(request, now)
        return Statement(
            f"SELECT count(*), coalesce(sum(m.doc_len), 0) FROM memories AS m WHERE {where}",
            params,
        )
    return Statement(
        "SELECT coalesce(t.items, 0) - e.items, coalesce(t.length, 0) - e.length"
        " FROM (SELECT count(*) AS items, coalesce(sum(m.doc_len), 0) AS length"
        " FROM memories AS m INDEXED BY memories_expiry WHERE m.expires_at IS NOT NULL"
        " AND m.expires_at <= ? AND m.tenant = ?) AS e"
        " LEFT JOIN tenant_totals AS t ON t.tenant = ?",
        (now, request.tenant, request.tenant),
    )


def postings_probe(terms: Sequence[str], cap: int) -> Statement:
    """How many items of the whole table hold a query term, counted up to ``cap``."""
    return Statement(
        "SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)",
        (fts_query(terms), cap),
    )


# BM25 in SQL with the arithmetic of ``ranking.bm25_scope_scores`` in the same order, so the
# scores are the in-memory backend's bit for bit (IEEE doubles; ``ln`` is C's ``log``, as
# Python's ``math.log``). ``c``: the candidates, each with its frequency of every query term,
# counted in its stored terms (each term between single spaces once the separators are
# doubled, so ``replace`` finds every occurrence); ``d``: each term's IDF over the scope, from
# one pass over ``c``; ``page``: the best items, scores summed in query-term order (a term an
# item lacks adds 0.0, which changes no sum). Ties: newest first, then key and path in binary
# order (a path sorts as its namespace). Only the page leaves SQLite.
_KEYWORD_PAGE: Final = (
    "WITH c AS MATERIALIZED (SELECT x.id, x.doc_len, x.updated_at, x.key, x.path, {tfs}"
    " FROM (SELECT m.id, m.doc_len, m.updated_at, m.key, m.path,"
    " ' ' || replace(m.terms, ' ', '  ') || ' ' AS spaced {source}) AS x),"
    " d AS MATERIALIZED (SELECT {idfs} FROM c),"
    " page AS (SELECT c.id, {score} AS score FROM c CROSS JOIN d WHERE {held}"
    " ORDER BY score DESC, c.updated_at DESC, c.key, c.path LIMIT ? OFFSET ?)"
    f" SELECT {_MEMORY_COLUMNS}, page.score FROM page CROSS JOIN memories AS m"
    " ON m.id = page.id ORDER BY page.score DESC, m.updated_at DESC, m.key, m.path"
)
_TF: Final = "(length(x.spaced) - length(replace(x.spaced, ?, ''))) / length(?) AS tf{i}"
_IDF: Final = "ln(1 + (? - sum(c.tf{i} > 0) + 0.5) / (sum(c.tf{i} > 0) + 0.5)) AS idf{i}"
_TERM_SCORE: Final = (
    "CASE WHEN c.tf{i} > 0 THEN d.idf{i} * c.tf{i} * ? / (c.tf{i} + ? * (? + ? * c.doc_len / ?))"
    " ELSE 0.0 END"
)


def keyword_page(
    request: SearchRequest,
    now: float,
    *,
    scope_size: int,
    scope_length: int,
    scan: bool,
    limit: int,
    offset: int,
) -> Statement:
    """A page of the items in scope holding a query term, best BM25 first, score last.

    ``scope_size`` and ``scope_length`` describe every item in scope (:func:`scope_stats`).
    ``scan``: the candidates are the scope's items (read through ``memories_scope``: one
    user's items are a short range, so the search never walks a common term's postings
    through every other user's items); otherwise the FTS5 match, which drives the join
    (``CROSS JOIN``: the planner would otherwise walk the tenant's items and test each).
    """
    where, params = _scope(request, now)
    count = range(len(request.terms))
    needles = [f" {term} " for term in request.terms]
    if scan:  # a cheap membership test first: most of a scope's items hold no query term
        held = " OR ".join("instr(' ' || m.terms || ' ', ?) > 0" for _ in count)
        source = f"FROM memories AS m INDEXED BY memories_scope WHERE {where} AND ({held})"
        source_params: tuple[object, ...] = (*params, *needles)
    else:
        source = (
            "FROM memories_fts CROSS JOIN memories AS m ON m.id = memories_fts.rowid"
            f" WHERE memories_fts MATCH ? AND {where}"
        )
        source_params = (fts_query(request.terms), *params)
    sql = _KEYWORD_PAGE.format(
        tfs=", ".join(_TF.format(i=i) for i in count),
        source=source,
        idfs=", ".join(_IDF.format(i=i) for i in count),
        score=" + ".join(["0.0", *(_TERM_SCORE.format(i=i) for i in count)]),
        held=" OR ".join(f"c.tf{i} > 0" for i in count),
    )
    average = (scope_length / scope_size) or 1.0
    weights = (BM25_K1 + 1, BM25_K1, 1 - BM25_B, BM25_B, average)
    return Statement(
        sql,
        (
            *(value for needle in needles for value in (needle, needle)),
            *source_params,
            *(value for _ in count for value in (scope_size,)),
            *(value for _ in count for value in weights),
            limit,
            offset,
        ),
    )


def search_vectors(request: SearchRequest, now: float, embedder_id: str | None) -> Statement:
    """Every item in scope with a vector of ``embedder_id``, the vector as the last column."""
    where, params = _scope(request, now)
    return Statement(
        f"SELECT {_MEMORY_COLUMNS}, v.vector FROM memories AS m "
        f"JOIN memory_vectors AS v ON v.memory_id = m.id AND v.embedder = ? WHERE {where}",
        (embedder_id, *params),
    )


def list_paths(tenant: str, prefix: Namespace, now: float) -> Statement:
    live_sql, live_params = _live(now)
    sql = f"SELECT DISTINCT m.path FROM memories AS m WHERE m.tenant = ? AND {live_sql}"
    params: tuple[object, ...] = (tenant, *live_params)
    bounds = prefix_range(prefix)
    if bounds is not None:
        sql += " AND m.path >= ? AND m.path < ?"
        params += bounds
    return Statement(sql + " ORDER BY m.path", params)


def delete_prefix(tenant: str, prefix: Namespace) -> Statement:
    bounds = prefix_range(prefix)
    assert bounds is not None, "delete_prefix needs a non-empty prefix"
    return Statement(
        "DELETE FROM memories WHERE tenant = ? AND path >= ? AND path < ?", (tenant, *bounds)
    )


def sweep_expired(now: float) -> Statement:
    return Statement(
        "DELETE FROM memories WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,)
    )


# --- summaries and outbox ------------------------------------------------------------------


_SESSION: Final = "s.tenant = ? AND s.user_id = ? AND s.session_id = ?"
_ENTRY: Final = "tenant = ? AND user_id = ? AND session_id = ? AND version = ?"


def select_summary(tenant: str, user_id: str, session_id: str, version: int) -> Statement:
    return Statement(
        f"SELECT {_SUMMARY_COLUMNS} FROM summaries AS s WHERE {_SESSION} AND s.version = ?",
        (tenant, user_id, session_id, version),
    )


def select_latest_summary(tenant: str, user_id: str, session_id: str) -> Statement:
    return Statement(
        f"SELECT {_SUMMARY_COLUMNS} FROM summaries AS s WHERE {_SESSION} "
        "ORDER BY s.version DESC LIMIT 1",
        (tenant, user_id, session_id),
    )


def select_summary_history(tenant: str, user_id: str, session_id: str) -> Statement:
    return Statement(
        f"SELECT {_SUMMARY_COLUMNS} FROM summaries AS s WHERE {_SESSION} ORDER BY s.version",
        (tenant, user_id, session_id),
    )


def insert_summary(summary: SessionSummary, created_at: float) -> Statement:
    return Statement(
        "INSERT INTO summaries (tenant, user_id, session_id, version, text, covers_from, "
        "covers_to, model, content_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            summary.tenant,
            summary.user_id,
            summary.session_id,
            summary.version,
            summary.text,
            summary.covers_from,
            summary.covers_to,
            summary.model,
            summary.content_hash,
            created_at,
        ),
    )


def insert_outbox(summary: SessionSummary, now: float) -> Statement:
    return Statement(
        "INSERT INTO outbox (tenant, user_id, session_id, version, enqueued_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (summary.tenant, summary.user_id, summary.session_id, summary.version, now),
    )


def select_pending_outbox(tenant: str | None, limit: int) -> Statement:
    """Pending entries, fewest attempts first, then oldest; each with its user's generation.

    The partial index ``outbox_pending`` (on ``enqueued_at``) finds the pending rows but does
    not give this order, so SQLite sorts them; pending outboxes stay small, so that is cheap.
    """
    condition, params = ("", ()) if tenant is None else (" AND o.tenant = ?", (tenant,))
    return Statement(
        f"SELECT {_SUMMARY_COLUMNS}, o.attempts, coalesce(g.generation, 0) FROM outbox AS o "
        "JOIN summaries AS s USING (tenant, user_id, session_id, version) "
        "LEFT JOIN user_generations AS g USING (tenant, user_id) "
        f"WHERE o.completed_at IS NULL{condition} ORDER BY o.attempts, o.enqueued_at, "
        "o.tenant, o.user_id, o.session_id, o.version LIMIT ?",
        (*params, limit),
    )


def complete_outbox(
    tenant: str, user_id: str, session_id: str, version: int, now: float
) -> Statement:
    return Statement(
        f"UPDATE outbox SET completed_at = ? WHERE {_ENTRY} AND completed_at IS NULL",
        (now, tenant, user_id, session_id, version),
    )


def fail_outbox(tenant: str, user_id: str, session_id: str, version: int) -> Statement:
    """Count one more failed attempt of a pending entry; returns the new count (no row: none)."""
    return Statement(
        f"UPDATE outbox SET attempts = attempts + 1 WHERE {_ENTRY} AND completed_at IS NULL "
        "RETURNING attempts",
        (tenant, user_id, session_id, version),
    )


def delete_user_summaries(tenant: str, user_id: str) -> Statement:
    """Delete a user's summaries; their outbox entries go with them (ON DELETE CASCADE)."""
    return Statement("DELETE FROM summaries WHERE tenant = ? AND user_id = ?", (tenant, user_id))


# --- deletion generations and job claims -----------------------------------------------------


def select_generation(tenant: str, user_id: str) -> Statement:
    """The user's deletion generation (no row: 0)."""
    return Statement(
        "SELECT coalesce(max(generation), 0) FROM user_generations "
        "WHERE tenant = ? AND user_id = ?",
        (tenant, user_id),
    )


def bump_generation(tenant: str, user_id: str) -> Statement:
    return Statement(
        "INSERT INTO user_generations (tenant, user_id, generation) VALUES (?, ?, 1) "
        "ON CONFLICT (tenant, user_id) DO UPDATE SET generation = generation + 1",
        (tenant, user_id),
    )


def delete_user_claims(tenant: str, user_id: str) -> Statement:
    return Statement("DELETE FROM summary_jobs WHERE tenant = ? AND user_id = ?", (tenant, user_id))


def claim_job(claim: Claim, now: float) -> Statement:
    """Take the session's claim unless another owner's lease is live; RETURNING says if taken."""
    return Statement(
        "INSERT INTO summary_jobs (tenant, user_id, session_id, owner, covers_to, expires_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, user_id, session_id) DO UPDATE SET "
        "owner = excluded.owner, covers_to = excluded.covers_to, "
        "expires_at = excluded.expires_at "
        "WHERE summary_jobs.expires_at <= ? OR summary_jobs.owner = excluded.owner "
        "RETURNING 1",
        (
            claim.tenant,
            claim.user_id,
            claim.session_id,
            claim.owner,
            claim.covers_to,
            now + claim.lease_seconds,
            now,
        ),
    )


def release_job(tenant: str, user_id: str, session_id: str, owner: str) -> Statement:
    return Statement(
        "DELETE FROM summary_jobs WHERE tenant = ? AND user_id = ? AND session_id = ? "
        "AND owner = ?",
        (tenant, user_id, session_id, owner),
    )
