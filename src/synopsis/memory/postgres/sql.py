"""Pure SQL builders for the PostgreSQL backend's memories and searches (no I/O).

The schema, its migrations and the :class:`Statement` value live in
:mod:`synopsis.memory.postgres.schema` (re-exported here); summaries and the outbox in
:mod:`synopsis.memory.postgres.summaries`. Every value, user text included, is a bound
parameter; only the schema name is an identifier.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, LiteralString, TypedDict, Unpack

from psycopg import sql
from psycopg.types.json import Jsonb

from synopsis.memory._types import Namespace
from synopsis.memory.postgres.schema import (
    MIGRATIONS,
    Statement,
    advisory_key,
    current_version,
    migration,
    migration_lock,
    migration_prelude,
    stmt,
)
from synopsis.memory.ranking import BM25_B, BM25_K1

__all__ = [
    "MIGRATIONS",
    "SCAN_SCOPE",
    "ItemRow",
    "Scope",
    "Statement",
    "advisory_key",
    "current_version",
    "delete_item",
    "delete_user_memories",
    "get_item",
    "keyword_page",
    "lexemes_query_text",
    "list_namespaces",
    "migration",
    "migration_lock",
    "migration_prelude",
    "prefix_range",
    "scope_stats",
    "search_newest",
    "search_settings",
    "stmt",
    "sweep_expired",
    "tenant_stats",
    "tenant_terms",
    "tier_page",
    "tsquery_text",
    "upsert_items",
    "vector_candidates",
]


# --- memories --------------------------------------------------------------------------------

#: A keyword search reads every item of a scope this small instead of asking the GIN index.
SCAN_SCOPE: Final = 4_000
_ITEM_COLUMNS: Final = (
    "m.tenant, m.namespace, m.key, m.text, m.kind, m.tags, m.created_at, m.updated_at,"
    " m.expires_at, m.context"
)
_LIVE: Final = "(m.expires_at IS NULL OR m.expires_at > %(now)s)"


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemRow:
    """The values ``put`` writes; ``restored``: ``created_at`` replaces an existing one."""

    tenant: str
    namespace: Namespace
    key: str
    text: str
    kind: str
    tags: Mapping[str, str]
    terms: Sequence[str]
    embedding: Sequence[float] | None
    created_at: float
    updated_at: float
    expires_at: float | None
    restored: bool = False
    context: str = ""
    #: The identity of the embedder that made ``embedding`` (None without one).
    embedder: str | None = None


def _array_literal(vector: Sequence[float] | None) -> str | None:
    """A vector as the text of a ``real[]`` (so rows of any dimension share one parameter)."""
    if vector is None:
        return None
    return "{" + ",".join(_real_text(x) for x in vector) + "}"


def _real_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(float(value))


_UPSERT_ITEMS: Final = (
    "INSERT INTO {s}.memories AS m (tenant, namespace, key, text, kind, tags, terms, doc_len,"
    " embedding, embedder, created_at, updated_at, expires_at, context)"
    " SELECT %(tenant)s::text, string_to_array(u.r->>0, chr(31)), u.r->>1, u.r->>2, u.r->>3,"
    " u.r->4, u.r->>5, (u.r->>6)::integer, (u.r->>7)::real[], u.r->>12,"
    " (u.r->>8)::double precision, (u.r->>9)::double precision, (u.r->>10)::double precision,"
    " u.r->>11"
    " FROM jsonb_array_elements(%(rows)s::jsonb) WITH ORDINALITY AS u(r, position)"
    " ORDER BY u.position"
    " ON CONFLICT (tenant, namespace, key) DO UPDATE SET text = excluded.text,"
    " kind = excluded.kind, tags = excluded.tags, terms = excluded.terms,"
    " context = excluded.context,"
    " doc_len = excluded.doc_len, embedding = excluded.embedding, embedder = excluded.embedder,"
    " updated_at = excluded.updated_at, expires_at = excluded.expires_at,"
    " created_at = CASE WHEN (m.expires_at IS NOT NULL AND m.expires_at <= %(now)s)"
    " OR array_to_string(excluded.namespace, chr(31)) || chr(30) || excluded.key"
    " = ANY(%(restored)s::text[]) THEN excluded.created_at ELSE m.created_at END"
    " RETURNING array_to_string(m.namespace, chr(31)), m.key, m.created_at"
)


def _row_values(row: ItemRow) -> list[object]:
    """One row of the JSON batch, in the order ``_UPSERT_ITEMS`` reads it (``r->>0`` ...)."""
    return [
        "\x1f".join(row.namespace), row.key, row.text, row.kind, dict(row.tags),
        " ".join(row.terms), len(row.terms), _array_literal(row.embedding),
        row.created_at, row.updated_at, row.expires_at, row.context, row.embedder,
    ]  # fmt: skip


def upsert_items(schema: str, tenant: str, rows: Sequence[ItemRow], now: float) -> Statement:
    """Insert or replace many items of one tenant in one statement (addresses must differ).

    As ``put``: a replace keeps the id, and ``created_at`` unless the old item had expired
    by ``now`` or the row is ``restored``. Rows are written, and existing rows locked, in
    the order given. Returns ``path, key, created_at`` of every row, ``path`` being the
    namespace's labels joined by U+001F (text reads back faster than an array).

    The rows travel as one JSON array of arrays: one parameter, encoded by the json module
    in C (ASCII-escaped, which encodes faster), rather than a dozen arrays the driver
    encodes value by value. Times are JSON numbers: Python writes the shortest text that
    reads back as the same double, jsonb keeps it as an exact decimal and ``double
    precision`` reads it back, so no time changes on the way. Namespaces travel as their
    labels joined by U+001F, which no label contains (control characters are refused); a
    restored address adds U+001E and the key.
    """
    payload = json.dumps([_row_values(row) for row in rows], allow_nan=False)
    restored = ["\x1f".join(row.namespace) + "\x1e" + row.key for row in rows if row.restored]
    params = {"tenant": tenant, "now": now, "rows": payload, "restored": restored}
    return stmt(schema, _UPSERT_ITEMS, params)


def get_item(schema: str, tenant: str, namespace: Namespace, key: str, now: float) -> Statement:
    """The live item at an address."""
    return stmt(
        schema,
        "SELECT " + _ITEM_COLUMNS + " FROM {s}.memories m WHERE m.tenant = %(tenant)s"
        " AND m.namespace = %(ns)s::text[] AND m.key = %(key)s AND " + _LIVE,
        {"tenant": tenant, "ns": list(namespace), "key": key, "now": now},
    )


def delete_item(schema: str, tenant: str, namespace: Namespace, key: str, now: float) -> Statement:
    """Delete the item at an address; returns whether it was live."""
    return stmt(
        schema,
        "DELETE FROM {s}.memories m WHERE m.tenant = %(tenant)s"
        " AND m.namespace = %(ns)s::text[] AND m.key = %(key)s RETURNING " + _LIVE,
        {"tenant": tenant, "ns": list(namespace), "key": key, "now": now},
    )


_IN_PREFIX_RANGE: Final = (
    'm.namespace COLLATE "C" >= %(prefix)s::text[] AND m.namespace COLLATE "C" < %(past)s::text[]'
)


def prefix_range(prefix: Namespace) -> dict[str, list[str]]:
    """Bounds ``prefix <= ns < past`` (in "C" order) of the namespaces under ``prefix``.

    ``past`` is ``prefix`` with U+0001 appended to its last label. The only other namespaces
    in between would hold that label followed by NUL, which no label can; the exact label
    test next to the range keeps the search correct regardless.
    """
    return {"prefix": list(prefix), "past": [*prefix[:-1], prefix[-1] + "\x01"]}


def delete_user_memories(schema: str, tenant: str, user_id: str) -> Statement:
    """Delete every memory (live or expired) under ``("user", user_id)``; returns the count."""
    return stmt(
        schema,
        "WITH gone AS (DELETE FROM {s}.memories m WHERE m.tenant = %(tenant)s"
        " AND m.namespace[1:2] = %(prefix)s::text[] AND " + _IN_PREFIX_RANGE + " RETURNING 1)"
        " SELECT count(*) FROM gone",
        {"tenant": tenant, **prefix_range(("user", user_id))},
    )


def sweep_expired(schema: str, now: float) -> Statement:
    """Delete every expired item of every tenant."""
    return stmt(
        schema,
        "WITH gone AS (DELETE FROM {s}.memories m WHERE m.expires_at IS NOT NULL"
        " AND m.expires_at <= %(now)s RETURNING 1) SELECT count(*) FROM gone",
        {"now": now},
    )


class Scope(TypedDict):
    """What a search may see: live items of ``tenant`` under ``prefix`` at ``now``.

    Only items of one of ``kinds`` (any when None), of none of ``exclude_kinds``, carrying
    every one of ``tags``.
    """

    tenant: str
    prefix: Namespace
    kinds: Sequence[str] | None
    exclude_kinds: Sequence[str]
    tags: Mapping[str, str]
    now: float


def _scope(**scope: Unpack[Scope]) -> tuple[sql.Composed, dict[str, Any]]:
    """WHERE clause of the live items a search may see: the tenant's, under ``prefix``."""
    prefix, kinds, tags = scope["prefix"], scope["kinds"], scope["tags"]
    clauses: list[LiteralString] = ["m.tenant = %(tenant)s", _LIVE]
    params: dict[str, Any] = {"tenant": scope["tenant"], "now": scope["now"]}
    if prefix:
        # Whole-label prefix match; the range lets the memories_scope index find it.
        clauses.append("m.namespace[1:%(depth)s::integer] = %(prefix)s::text[]")
        clauses.append(_IN_PREFIX_RANGE)
        params.update(depth=len(prefix), **prefix_range(prefix))
    if kinds is not None:
        clauses.append("m.kind = ANY(%(kinds)s::text[])")
        params["kinds"] = list(kinds)
    if scope["exclude_kinds"]:
        clauses.append("m.kind <> ALL(%(exclude_kinds)s::text[])")
        params["exclude_kinds"] = list(scope["exclude_kinds"])
    if tags:
        clauses.append("m.tags @> %(tags)s")
        params["tags"] = Jsonb(dict(tags))
    where = sql.SQL(" AND ").join(sql.SQL(clause) for clause in clauses)
    return sql.Composed([where]), params


def search_newest(schema: str, *, limit: int, offset: int, **scope: Unpack[Scope]) -> Statement:
    """A page of the visible items, newest first (no query)."""
    where, params = _scope(**scope)
    params.update(limit=limit, offset=offset)
    return stmt(
        schema,
        "SELECT " + _ITEM_COLUMNS + " FROM {s}.memories m WHERE {where}"
        ' ORDER BY m.updated_at DESC, m.key COLLATE "C", m.namespace COLLATE "C"'
        " LIMIT %(limit)s OFFSET %(offset)s",
        params,
        where=where,
    )


def scope_stats(schema: str, **scope: Unpack[Scope]) -> Statement:
    """Number of visible items in scope and the sum of their lengths (BM25's N and avgdl)."""
    where, params = _scope(**scope)
    return stmt(
        schema,
        "SELECT count(*), coalesce(sum(m.doc_len), 0) FROM {s}.memories m WHERE {where}",
        params,
        where=where,
    )


def tenant_stats(schema: str, tenant: str, now: float) -> Statement:
    """:func:`scope_stats` of a whole tenant (no prefix, kinds or tags), without counting it.

    The sum of the tenant's ``tenant_totals`` deltas, less its expired items not yet swept
    (few, found through ``memories_expiry``).
    """
    return stmt(
        schema,
        "SELECT coalesce((SELECT sum(t.items) FROM {s}.tenant_totals t"
        " WHERE t.tenant = %(tenant)s), 0) - e.items,"
        " coalesce((SELECT sum(t.length) FROM {s}.tenant_totals t"
        " WHERE t.tenant = %(tenant)s), 0) - e.length"
        " FROM (SELECT count(*) AS items, coalesce(sum(m.doc_len), 0) AS length"
        " FROM {s}.memories m WHERE m.expires_at <= %(now)s AND m.tenant = %(tenant)s) e",
        {"tenant": tenant, "now": now},
    )


def _quoted(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def tsquery_text(terms: Sequence[str]) -> str:
    """An OR tsquery of every tier lexeme (``'term/':*``) of each term.

    Quoted, so user syntax (``&``, ``!``, ``:*``) stays inert; a term never holds ``/``.
    """
    return " | ".join(_quoted(term + "/") + ":*" for term in terms)


def lexemes_query_text(lexemes: Sequence[str]) -> str:
    """An OR tsquery of exactly these (tier) lexemes."""
    return " | ".join(_quoted(lexeme) for lexeme in lexemes)


# BM25 in the database, with the arithmetic of ``ranking.bm25_scope_scores`` in the same order
# (so the scores are the in-memory backend's, bit for bit). ``c``: the visible items sharing a
# query term, each with its frequency of every query term (``tfs``, in query order, counted in
# the item's own ``terms``, split once); ``d``: each term's IDF over the scope, from one pass
# over ``c``; ``page``: the best items, each score summed in query-term order (a term an item
# lacks adds 0.0, which changes no sum). Ties go newest first, then by key and namespace in
# code point order (``hit_order``). Only the requested page leaves the server. The per-term
# expressions are written out for the query's terms (bound parameters, never text), so no
# row runs a sub-query.
_KEYWORD_PAGE: Final = (
    "WITH c AS MATERIALIZED (SELECT x.id, x.doc_len, x.updated_at, x.key, x.namespace,"
    "   ARRAY[{tfs}]::integer[] AS tfs FROM ({source}) x),"
    " d AS MATERIALIZED ({idfs}),"
    " page AS (SELECT c.id, {score} AS score FROM c CROSS JOIN d"
    '   ORDER BY score DESC, c.updated_at DESC, c.key COLLATE "C", c.namespace COLLATE "C"'
    "   LIMIT %(limit)s OFFSET %(offset)s)"
    " SELECT " + _ITEM_COLUMNS + ", page.score FROM page JOIN {s}.memories m ON m.id = page.id"
    ' ORDER BY page.score DESC, m.updated_at DESC, m.key COLLATE "C", m.namespace COLLATE "C"'
)
_WORDS: Final = (
    "SELECT m.id, m.doc_len, m.updated_at, m.key, m.namespace, string_to_array(m.terms, ' ') AS w"
)
#: Candidates through the GIN index on the terms (a large scope).
_FROM_INDEX: Final = (
    _WORDS + " FROM {s}.memories m WHERE {where} AND m.search_tsv @@ %(tsq)s::tsquery"
)
#: Candidates among the scope's items, found first through ``memories_scope`` (a small scope:
#: a common term's postings run through every other user's items). ``OFFSET 0`` keeps the
#: planner from merging the two steps back into one.
_FROM_SCOPE: Final = (
    _WORDS + " FROM (SELECT m.id, m.doc_len, m.updated_at, m.key, m.namespace, m.terms,"
    " m.search_tsv FROM {s}.memories m WHERE {where} OFFSET 0) m"
    " WHERE m.search_tsv @@ %(tsq)s::tsquery"
)
_TF: Final = "cardinality(array_positions(x.w, {term}::text))"
_IDF: Final = (
    "greatest(ln(((%(size)s::bigint - count(*) FILTER (WHERE c.tfs[{i}] > 0))::float8"
    " + 0.5::float8) / (count(*) FILTER (WHERE c.tfs[{i}] > 0)::float8 + 0.5::float8)),"
    " 1e-6::float8)"
)
_TERM_SCORE: Final = (
    "CASE WHEN c.tfs[{i}] > 0 THEN d.idf[{i}] * c.tfs[{i}]::float8 * %(k1_plus_1)s::float8"
    " / (c.tfs[{i}]::float8 + %(k1)s::float8 * (%(one_minus_b)s::float8"
    " + %(b)s::float8 * c.doc_len::float8 / %(average)s::float8)) ELSE 0::float8 END"
)


def search_settings() -> Statement:
    """Turn JIT compilation and generic plans off for the rest of the transaction.

    A keyword search over many candidates looks expensive to the planner, which then spends
    100-350 ms compiling a query that runs about a second; it never pays off here. And psycopg
    prepares a statement run five times on a connection, after which PostgreSQL may plan it
    once for any parameters: blind to the tsquery, that plan filters every item of the tenant
    (a search of 2 ms took 40-55 ms from the 11th run on, at 1,000,000 memories).
    """
    return Statement(
        sql.Composed(
            [sql.SQL("SET LOCAL jit = off; SET LOCAL plan_cache_mode = force_custom_plan")]
        )
    )


def keyword_page(
    schema: str,
    *,
    terms: Sequence[str],
    scope_size: int,
    average: float,
    limit: int,
    offset: int,
    **scope: Unpack[Scope],
) -> Statement:
    """A page of the visible items sharing a query term, best BM25 first, score last.

    ``scope_size`` and ``average`` (document length) describe every visible item in scope,
    as :func:`scope_stats` counts them; the score is the in-memory backend's BM25. A scope
    of at most ``SCAN_SCOPE`` items is read whole; a larger one asks the GIN index.
    """
    where, params = _scope(**scope)
    source = _FROM_SCOPE if scope_size <= SCAN_SCOPE else _FROM_INDEX
    positions = [sql.Literal(i) for i in range(1, len(terms) + 1)]
    parts = {
        "source": sql.SQL(source).format(s=sql.Identifier(schema), where=where),
        "tfs": sql.SQL(", ").join(
            sql.SQL(_TF).format(term=sql.Placeholder(f"t{i}")) for i in range(len(terms))
        ),
        "idfs": sql.SQL("SELECT ARRAY[{}]::float8[] AS idf FROM c").format(
            sql.SQL(", ").join(sql.SQL(_IDF).format(i=i) for i in positions)
        ),
        "score": sql.SQL(" + ").join(
            [sql.SQL("0::float8"), *(sql.SQL(_TERM_SCORE).format(i=i) for i in positions)]
        ),
    }
    params.update({f"t{i}": term for i, term in enumerate(terms)})
    params.update(
        tsq=tsquery_text(terms), size=scope_size, average=average,
        k1=BM25_K1, b=BM25_B, k1_plus_1=BM25_K1 + 1, one_minus_b=1 - BM25_B,
        limit=limit, offset=offset,
    )  # fmt: skip
    return stmt(schema, _KEYWORD_PAGE, params, **parts)


_FROM_TIERS: Final = (
    _WORDS + " FROM {s}.memories m WHERE m.tenant = %(tenant)s AND " + _LIVE
    + " AND m.search_tsv @@ %(tsq)s::tsquery"
)  # fmt: skip


def tier_page(
    schema: str,
    *,
    tenant: str,
    now: float,
    terms: Sequence[str],
    lexemes: Sequence[str],
    idf: Sequence[float],
    average: float,
    limit: int,
) -> Statement:
    """The best ``limit`` live items of ``tenant`` holding one of the tier ``lexemes``.

    Scored exactly as :func:`keyword_page` scores them (every query term counted in the
    item's own terms), with each term's IDF given (BM25 over the whole tenant).
    """
    positions = [sql.Literal(i) for i in range(1, len(terms) + 1)]
    parts = {
        "source": sql.SQL(_FROM_TIERS).format(s=sql.Identifier(schema)),
        "tfs": sql.SQL(", ").join(
            sql.SQL(_TF).format(term=sql.Placeholder(f"t{i}")) for i in range(len(terms))
        ),
        "idfs": sql.SQL("SELECT %(idf)s::float8[] AS idf"),
        "score": sql.SQL(" + ").join(
            [sql.SQL("0::float8"), *(sql.SQL(_TERM_SCORE).format(i=i) for i in positions)]
        ),
    }
    params: dict[str, Any] = {f"t{i}": term for i, term in enumerate(terms)}
    params.update(
        tenant=tenant, now=now, tsq=lexemes_query_text(lexemes), idf=list(idf), average=average,
        k1=BM25_K1, b=BM25_B, k1_plus_1=BM25_K1 + 1, one_minus_b=1 - BM25_B,
        limit=limit, offset=0,
    )  # fmt: skip
    return stmt(schema, _KEYWORD_PAGE, params, **parts)


_TENANT_TERMS: Final = (
    "SELECT s.items, s.length, t.lexemes, t.counts, e.counts"
    " FROM ({stats}) AS s(items, length),"
    " (SELECT coalesce(array_agg(x.lexeme), '{{}}') AS lexemes,"
    "  coalesce(array_agg(x.items), '{{}}') AS counts FROM (SELECT x.lexeme, sum(x.items) AS items"
    "  FROM unnest(%(low)s::text[], %(high)s::text[]) AS r(lo, hi),"
    "  LATERAL (SELECT t.lexeme, t.items FROM {s}.term_tiers t WHERE t.tenant = %(tenant)s"
    '   AND t.lexeme >= r.lo COLLATE "C" AND t.lexeme < r.hi COLLATE "C") x'
    "  GROUP BY x.lexeme) x) t,"
    " (SELECT ARRAY[{expired}]::bigint[] AS counts FROM {s}.memories m"
    "  WHERE m.expires_at <= %(now)s AND m.tenant = %(tenant)s) e"
)


def tenant_terms(schema: str, tenant: str, terms: Sequence[str], now: float) -> Statement:
    """Everything a whole-tenant search plans with, in one row (run after ``search_settings``).

    The tenant's item count and total length (:func:`tenant_stats`); each tier lexeme
    (``term/F/L``) of ``terms`` with its items (expired ones not yet swept included), as two
    arrays; and, per term, how many expired items not yet swept hold it.
    """
    stats = tenant_stats(schema, tenant, now)
    expired = sql.SQL(", ").join(
        sql.SQL("count(*) FILTER (WHERE m.search_tsv @@ {}::tsquery)").format(
            sql.Placeholder(f"q{i}")
        )
        for i in range(len(terms))
    )
    params: dict[str, Any] = {f"q{i}": tsquery_text([term]) for i, term in enumerate(terms)}
    # A term never holds "/" (U+002F); "0" (U+0030) sorts right after it.
    params.update(stats.params, low=[t + "/" for t in terms], high=[t + "0" for t in terms])
    return stmt(schema, _TENANT_TERMS, params, stats=stats.query, expired=expired)


def vector_candidates(schema: str, embedder: str | None, **scope: Unpack[Scope]) -> Statement:
    """Every visible item in scope with its embedding if ``embedder`` made it, else NULL.

    In insertion order (``id``; a replace keeps it), so equal similarities rank as on the
    in-memory backend.
    """
    where, params = _scope(**scope)
    params["embedder"] = embedder
    return stmt(
        schema,
        "SELECT " + _ITEM_COLUMNS + ", CASE WHEN m.embedder = %(embedder)s THEN m.embedding END"
        " FROM {s}.memories m WHERE {where} ORDER BY m.id",
        params,
        where=where,
    )


def list_namespaces(
    schema: str,
    *,
    tenant: str,
    prefix: Namespace,
    max_depth: int | None,
    now: float,
    limit: int,
    offset: int,
) -> Statement:
    """Distinct visible namespaces under ``prefix``, cut to ``max_depth`` labels, sorted."""
    where, params = _scope(
        tenant=tenant, prefix=prefix, kinds=None, exclude_kinds=(), tags={}, now=now
    )
    params.update(depth=len(prefix), max_depth=max_depth, limit=limit, offset=offset)
    return stmt(
        schema,
        "SELECT d.ns FROM (SELECT DISTINCT CASE WHEN %(max_depth)s::integer IS NULL"
        " THEN m.namespace ELSE m.namespace[1:%(max_depth)s::integer] END AS ns"
        " FROM {s}.memories m WHERE {where}) AS d"
        ' ORDER BY d.ns COLLATE "C" LIMIT %(limit)s OFFSET %(offset)s',
        params,
        where=where,
    )
