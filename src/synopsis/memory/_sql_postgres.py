"""Pure SQL builders and ordered migrations for the PostgreSQL backend (no I/O).

Every builder returns a :class:`Statement`: composed SQL in which only the schema name is an
identifier (quoted by psycopg) and every value, user text included, is a bound parameter.

Layout (schema ``synopsis`` by default)::

    schema_version(version, applied_at)
    memories(id, tenant, namespace text[], key, text, kind, tags jsonb, terms, search_tsv,
             doc_len, embedding real[], created_at, updated_at, expires_at)
    summaries(tenant, session_id, version, user_id, text, covers_from, covers_to, model,
              content_hash, created_at)
    outbox(tenant, session_id, version -> summaries, enqueued_at, attempts)   pending copies

Times are epoch seconds (``double precision``) computed from the store's injected clock, so a
fake clock drives expiry exactly as it does on the other backends. ``terms`` holds the
space-joined :func:`~synopsis.memory._terms.document_terms` (BM25 counts its term frequencies
there); ``search_tsv`` turns them into a tsvector lexeme for lexeme (``array_to_tsvector``, no
parser or dictionary in between) and a GIN index on it finds the candidates of a keyword query.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, LiteralString

from psycopg import sql
from psycopg.types.json import Jsonb

from synopsis.memory._types import Namespace, SessionSummary
from synopsis.memory.ranking import BM25_B, BM25_K1

__all__ = [
    "MIGRATIONS",
    "Statement",
    "advisory_key",
    "delete_item",
    "delete_user_memories",
    "delete_user_summaries",
    "find_item",
    "get_item",
    "insert_item",
    "keyword_page",
    "list_namespaces",
    "lock_key",
    "prefix_range",
    "scope_stats",
    "search_newest",
    "upsert_items",
    "vector_candidates",
    "without_jit",
]


@dataclass(frozen=True, slots=True)
class Statement:
    """One SQL statement and its bound parameters."""

    query: sql.Composed
    params: Mapping[str, Any] = field(default_factory=dict)


def _sql(schema: str, template: LiteralString, **parts: sql.Composable) -> sql.Composed:
    return sql.SQL(template).format(s=sql.Identifier(schema), **parts)


def _stmt(
    schema: str,
    template: LiteralString,
    params: Mapping[str, Any] | None = None,
    **parts: sql.Composable,
) -> Statement:
    return Statement(_sql(schema, template, **parts), dict(params or {}))


def advisory_key(*labels: str) -> int:
    """A signed 64-bit advisory-lock key derived from ``labels`` (stable across processes)."""
    digest = hashlib.blake2b("\x1f".join(labels).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


# --- migrations ------------------------------------------------------------------------------

_V1: Final[tuple[LiteralString, ...]] = (
    """CREATE TABLE {s}.memories (
        id bigserial PRIMARY KEY,
        tenant text NOT NULL,
        namespace text[] NOT NULL,
        key text NOT NULL,
        text text NOT NULL,
        kind text NOT NULL,
        tags jsonb NOT NULL,
        terms text NOT NULL,
        search_tsv tsvector
            GENERATED ALWAYS AS (array_to_tsvector(string_to_array(terms, ' '))) STORED,
        doc_len integer NOT NULL,
        embedding real[],
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL,
        expires_at double precision,
        CONSTRAINT memories_address UNIQUE (tenant, namespace, key)
    )""",
    "CREATE INDEX memories_search ON {s}.memories USING gin (search_tsv)",
    "CREATE INDEX memories_tags ON {s}.memories USING gin (tags jsonb_path_ops)",
    "CREATE INDEX memories_newest ON {s}.memories (tenant, updated_at DESC)",
    "CREATE INDEX memories_expiry ON {s}.memories (expires_at) WHERE expires_at IS NOT NULL",
    """CREATE TABLE {s}.memory_terms (
        item_id bigint NOT NULL REFERENCES {s}.memories (id) ON DELETE CASCADE,
        tenant text NOT NULL,
        term text NOT NULL,
        tf integer NOT NULL,
        PRIMARY KEY (item_id, term)
    )""",
    "CREATE INDEX memory_terms_term ON {s}.memory_terms (tenant, term)",
    """CREATE TABLE {s}.summaries (
        tenant text NOT NULL,
        session_id text NOT NULL,
        version bigint NOT NULL,
        user_id text NOT NULL,
        text text NOT NULL,
        covers_from bigint NOT NULL,
        covers_to bigint NOT NULL,
        model text NOT NULL,
        content_hash text NOT NULL,
        created_at double precision NOT NULL,
        PRIMARY KEY (tenant, session_id, version)
    )""",
    "CREATE INDEX summaries_user ON {s}.summaries (tenant, user_id)",
    """CREATE TABLE {s}.outbox (
        tenant text NOT NULL,
        session_id text NOT NULL,
        version bigint NOT NULL,
        enqueued_at double precision NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        PRIMARY KEY (tenant, session_id, version),
        FOREIGN KEY (tenant, session_id, version)
            REFERENCES {s}.summaries (tenant, session_id, version) ON DELETE CASCADE
    )""",
)

# BM25 statistics come from the searched scope, so per-tenant term lookups are not needed.
_V2: Final[tuple[LiteralString, ...]] = (
    "DROP INDEX IF EXISTS {s}.memory_terms_term",
    "ALTER TABLE {s}.memory_terms DROP COLUMN IF EXISTS tenant",
)

# Namespace-prefix searches (one user's memories) use a range in "C" order, whatever the
# database's collation; without this index they scanned every item of the tenant. The
# included columns let BM25's scope statistics (count, total length) skip the table.
_V3: Final[tuple[LiteralString, ...]] = (
    "CREATE INDEX IF NOT EXISTS memories_scope ON {s}.memories"
    ' (tenant, namespace COLLATE "C") INCLUDE (doc_len, expires_at)',
)

# BM25 takes term frequencies from each memory's own ``terms`` (faster to search, and a put
# writes one row instead of one per distinct term), so the per-term table goes.
_V4: Final[tuple[LiteralString, ...]] = ("DROP TABLE IF EXISTS {s}.memory_terms",)

#: Ordered migrations; migration ``n`` (1-based) brings the schema to version ``n``.
MIGRATIONS: Final[tuple[tuple[LiteralString, ...], ...]] = (_V1, _V2, _V3, _V4)


def migration_lock(schema: str) -> Statement:
    """Serialize migrations of one schema across every replica (released at commit)."""
    return Statement(
        sql.Composed([sql.SQL("SELECT pg_advisory_xact_lock(%(key)s)")]),
        {"key": advisory_key("synopsis-migrate", schema)},
    )


def migration_prelude(schema: str) -> list[Statement]:
    """Create the schema and its version table if they are missing."""
    return [
        _stmt(schema, "CREATE SCHEMA IF NOT EXISTS {s}"),
        _stmt(
            schema,
            "CREATE TABLE IF NOT EXISTS {s}.schema_version ("
            " version integer PRIMARY KEY,"
            " applied_at timestamptz NOT NULL DEFAULT now())",
        ),
    ]


def current_version(schema: str) -> Statement:
    return _stmt(schema, "SELECT coalesce(max(version), 0) FROM {s}.schema_version")


def migration(schema: str, version: int) -> list[Statement]:
    """The statements of migration ``version`` followed by recording it."""
    steps = [_stmt(schema, template) for template in MIGRATIONS[version - 1]]
    steps.append(
        _stmt(schema, "INSERT INTO {s}.schema_version (version) VALUES (%(v)s)", {"v": version})
    )
    return steps


# --- memories --------------------------------------------------------------------------------

_ITEM_COLUMNS: Final = (
    "m.tenant, m.namespace, m.key, m.text, m.kind, m.tags, m.created_at, m.updated_at, m.expires_at"
)
_LIVE: Final = "(m.expires_at IS NULL OR m.expires_at > %(now)s)"


def find_item(schema: str, tenant: str, namespace: Namespace, key: str) -> Statement:
    """Lock the row at an address (live or expired): id, doc_len, expires_at, created_at."""
    return _stmt(
        schema,
        "SELECT m.id, m.expires_at, m.created_at FROM {s}.memories m"
        " WHERE m.tenant = %(tenant)s AND m.namespace = %(ns)s::text[] AND m.key = %(key)s"
        " FOR UPDATE",
        {"tenant": tenant, "ns": list(namespace), "key": key},
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemRow:
    """The values ``put`` writes."""

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

    def params(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "ns": list(self.namespace),
            "key": self.key,
            "text": self.text,
            "kind": self.kind,
            "tags": Jsonb(dict(self.tags)),
            "terms": " ".join(self.terms),
            "doc_len": len(self.terms),
            "embedding": None if self.embedding is None else list(self.embedding),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "expires_at": self.expires_at,
        }


def insert_item(schema: str, row: ItemRow) -> Statement:
    """Insert a new item; returns its id, or no row when another writer got there first."""
    return _stmt(
        schema,
        "INSERT INTO {s}.memories (tenant, namespace, key, text, kind, tags, terms, doc_len,"
        " embedding, created_at, updated_at, expires_at) VALUES (%(tenant)s, %(ns)s::text[],"
        " %(key)s, %(text)s, %(kind)s, %(tags)s, %(terms)s, %(doc_len)s, %(embedding)s::real[],"
        " %(created_at)s, %(updated_at)s, %(expires_at)s)"
        " ON CONFLICT (tenant, namespace, key) DO NOTHING RETURNING id",
        row.params(),
    )


def update_item(schema: str, item_id: int, row: ItemRow) -> Statement:
    """Replace the values of an existing item (its id stays)."""
    params = row.params()
    params["id"] = item_id
    return _stmt(
        schema,
        "UPDATE {s}.memories SET text = %(text)s, kind = %(kind)s, tags = %(tags)s,"
        " terms = %(terms)s, doc_len = %(doc_len)s, embedding = %(embedding)s::real[],"
        " created_at = %(created_at)s, updated_at = %(updated_at)s,"
        " expires_at = %(expires_at)s WHERE id = %(id)s",
        params,
    )


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
    " embedding, created_at, updated_at, expires_at)"
    " SELECT %(tenant)s::text, string_to_array(u.path, chr(31)), u.key, u.text, u.kind,"
    " u.tags::jsonb, u.terms, u.doc_len, u.embedding::real[], %(now)s::double precision,"
    " %(now)s::double precision, u.expires_at"
    " FROM unnest(%(paths)s::text[], %(keys)s::text[], %(texts)s::text[], %(kinds)s::text[],"
    " %(tags)s::text[], %(terms)s::text[], %(doc_lens)s::integer[], %(embeddings)s::text[],"
    " %(expires)s::double precision[]) WITH ORDINALITY"
    " AS u(path, key, text, kind, tags, terms, doc_len, embedding, expires_at, position)"
    " ORDER BY u.position"
    " ON CONFLICT (tenant, namespace, key) DO UPDATE SET text = excluded.text,"
    " kind = excluded.kind, tags = excluded.tags, terms = excluded.terms,"
    " doc_len = excluded.doc_len, embedding = excluded.embedding,"
    " updated_at = excluded.updated_at, expires_at = excluded.expires_at,"
    " created_at = CASE WHEN m.expires_at IS NOT NULL AND m.expires_at <= excluded.updated_at"
    " THEN excluded.created_at ELSE m.created_at END"
    " RETURNING m.namespace, m.key, m.created_at"
)


def upsert_items(schema: str, tenant: str, rows: Sequence[ItemRow], now: float) -> Statement:
    """Insert or replace many items of one tenant in one statement (addresses must differ).

    As ``put``: a replace keeps the id, and ``created_at`` unless the old item had expired.
    Returns ``namespace, key, created_at`` of every row. Namespaces travel as their
    labels joined by U+001F, which no label contains (control characters are refused).
    """
    params: dict[str, Any] = {"tenant": tenant, "now": now}
    params.update(
        paths=["\x1f".join(row.namespace) for row in rows],
        keys=[row.key for row in rows],
        texts=[row.text for row in rows],
        kinds=[row.kind for row in rows],
        tags=[json.dumps(dict(row.tags), ensure_ascii=False) for row in rows],
        terms=[" ".join(row.terms) for row in rows],
        doc_lens=[len(row.terms) for row in rows],
        embeddings=[_array_literal(row.embedding) for row in rows],
        expires=[row.expires_at for row in rows],
    )
    return _stmt(schema, _UPSERT_ITEMS, params)


def get_item(schema: str, tenant: str, namespace: Namespace, key: str, now: float) -> Statement:
    """The live item at an address."""
    return _stmt(
        schema,
        "SELECT " + _ITEM_COLUMNS + " FROM {s}.memories m WHERE m.tenant = %(tenant)s"
        " AND m.namespace = %(ns)s::text[] AND m.key = %(key)s AND " + _LIVE,
        {"tenant": tenant, "ns": list(namespace), "key": key, "now": now},
    )


def delete_item(schema: str, tenant: str, namespace: Namespace, key: str, now: float) -> Statement:
    """Delete the item at an address; returns whether it was live."""
    return _stmt(
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
    return _stmt(
        schema,
        "WITH gone AS (DELETE FROM {s}.memories m WHERE m.tenant = %(tenant)s"
        " AND m.namespace[1:2] = %(prefix)s::text[] AND " + _IN_PREFIX_RANGE + " RETURNING 1)"
        " SELECT count(*) FROM gone",
        {"tenant": tenant, **prefix_range(("user", user_id))},
    )


def sweep_expired(schema: str, now: float) -> Statement:
    """Delete every expired item of every tenant."""
    return _stmt(
        schema,
        "WITH gone AS (DELETE FROM {s}.memories m WHERE m.expires_at IS NOT NULL"
        " AND m.expires_at <= %(now)s RETURNING 1) SELECT count(*) FROM gone",
        {"now": now},
    )


def _scope(
    *, tenant: str, prefix: Namespace, kind: str | None, tags: Mapping[str, str], now: float
) -> tuple[sql.Composed, dict[str, Any]]:
    """WHERE clause of the live items a search may see: the tenant's, under ``prefix``."""
    clauses: list[LiteralString] = ["m.tenant = %(tenant)s", _LIVE]
    params: dict[str, Any] = {"tenant": tenant, "now": now}
    if prefix:
        # Whole-label prefix match; the range lets the memories_scope index find it.
        clauses.append("m.namespace[1:%(depth)s::integer] = %(prefix)s::text[]")
        clauses.append(_IN_PREFIX_RANGE)
        params.update(depth=len(prefix), **prefix_range(prefix))
    if kind is not None:
        clauses.append("m.kind = %(kind)s")
        params["kind"] = kind
    if tags:
        clauses.append("m.tags @> %(tags)s")
        params["tags"] = Jsonb(dict(tags))
    where = sql.SQL(" AND ").join(sql.SQL(clause) for clause in clauses)
    return sql.Composed([where]), params


def search_newest(
    schema: str,
    *,
    tenant: str,
    prefix: Namespace,
    kind: str | None,
    tags: Mapping[str, str],
    now: float,
    limit: int,
    offset: int,
) -> Statement:
    """A page of the visible items, newest first (no query)."""
    where, params = _scope(tenant=tenant, prefix=prefix, kind=kind, tags=tags, now=now)
    params.update(limit=limit, offset=offset)
    return _stmt(
        schema,
        "SELECT " + _ITEM_COLUMNS + " FROM {s}.memories m WHERE {where}"
        ' ORDER BY m.updated_at DESC, m.key COLLATE "C", m.namespace COLLATE "C"'
        " LIMIT %(limit)s OFFSET %(offset)s",
        params,
        where=where,
    )


def scope_stats(
    schema: str,
    *,
    tenant: str,
    prefix: Namespace,
    kind: str | None,
    tags: Mapping[str, str],
    now: float,
) -> Statement:
    """Number of visible items in scope and the sum of their lengths (BM25's N and avgdl)."""
    where, params = _scope(tenant=tenant, prefix=prefix, kind=kind, tags=tags, now=now)
    return _stmt(
        schema,
        "SELECT count(*), coalesce(sum(m.doc_len), 0) FROM {s}.memories m WHERE {where}",
        params,
        where=where,
    )


def tsquery_text(terms: Sequence[str]) -> str:
    """An OR tsquery of quoted lexemes: user syntax (``&``, ``!``, ``:*``) stays inert."""
    quoted = ("'" + term.replace("\\", "\\\\").replace("'", "''") + "'" for term in terms)
    return " | ".join(quoted)


# BM25 in the database, with the arithmetic of ``_recall.bm25_scores`` in the same order (so
# the scores are the in-memory backend's, bit for bit): ``c`` the visible items sharing a query
# term, each with its frequency of every query term (``tfs``, in query order, counted in the
# item's own ``terms``); ``d`` each term's IDF over the scope; ``page`` the best items, each
# score summed in query-term order. Ties go newest first, then by key and namespace in code
# point order (``hit_order``). Only the requested page leaves the server.
_KEYWORD_PAGE: Final = (
    "WITH c AS MATERIALIZED (SELECT m.id, m.doc_len, m.updated_at, m.key, m.namespace,"
    "   ARRAY(SELECT cardinality(array_positions(string_to_array(m.terms, ' '), q.term))"
    "     FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS q(term, pos) ORDER BY q.pos) AS tfs"
    "   FROM {s}.memories m WHERE {where} AND m.search_tsv @@ %(tsq)s::tsquery),"
    " d AS MATERIALIZED (SELECT p.pos, greatest(ln(((%(size)s::bigint - count(*))::float8"
    "   + 0.5::float8) / (count(*)::float8 + 0.5::float8)), 1e-6::float8) AS idf"
    "   FROM generate_series(1, cardinality(%(terms)s::text[])) AS p(pos)"
    "   JOIN c ON c.tfs[p.pos] > 0 GROUP BY p.pos),"
    " page AS (SELECT c.id, (SELECT sum(d.idf * c.tfs[d.pos]::float8 * %(k1_plus_1)s::float8"
    "   / (c.tfs[d.pos]::float8 + %(k1)s::float8 * (%(one_minus_b)s::float8"
    "   + %(b)s::float8 * c.doc_len::float8 / %(average)s::float8)) ORDER BY d.pos)"
    "   FROM d WHERE c.tfs[d.pos] > 0) AS score FROM c"
    '   ORDER BY score DESC, c.updated_at DESC, c.key COLLATE "C", c.namespace COLLATE "C"'
    "   LIMIT %(limit)s OFFSET %(offset)s)"
    " SELECT " + _ITEM_COLUMNS + ", page.score FROM page JOIN {s}.memories m ON m.id = page.id"
    ' ORDER BY page.score DESC, m.updated_at DESC, m.key COLLATE "C", m.namespace COLLATE "C"'
)


def without_jit() -> Statement:
    """Turn JIT compilation off for the rest of the transaction.

    A keyword search over many candidates looks expensive to the planner, which then spends
    100-350 ms compiling a query that runs about a second; it never pays off here.
    """
    return Statement(sql.Composed([sql.SQL("SET LOCAL jit = off")]))


def keyword_page(
    schema: str,
    *,
    tenant: str,
    prefix: Namespace,
    kind: str | None,
    tags: Mapping[str, str],
    now: float,
    terms: Sequence[str],
    scope_size: int,
    average: float,
    limit: int,
    offset: int,
) -> Statement:
    """A page of the visible items sharing a query term, best BM25 first, score last.

    ``scope_size`` and ``average`` (document length) describe every visible item in scope,
    as :func:`scope_stats` counts them; the score is the in-memory backend's BM25.
    """
    where, params = _scope(tenant=tenant, prefix=prefix, kind=kind, tags=tags, now=now)
    params.update(
        tsq=tsquery_text(terms), terms=list(terms), size=scope_size, average=average,
        k1=BM25_K1, b=BM25_B, k1_plus_1=BM25_K1 + 1, one_minus_b=1 - BM25_B,
        limit=limit, offset=offset,
    )  # fmt: skip
    return _stmt(schema, _KEYWORD_PAGE, params, where=where)


def vector_candidates(
    schema: str,
    *,
    tenant: str,
    prefix: Namespace,
    kind: str | None,
    tags: Mapping[str, str],
    now: float,
) -> Statement:
    """Every visible item in scope with its stored embedding (NULL when never embedded).

    In insertion order (``id``; a replace keeps it), so equal similarities rank as on the
    in-memory backend.
    """
    where, params = _scope(tenant=tenant, prefix=prefix, kind=kind, tags=tags, now=now)
    return _stmt(
        schema,
        "SELECT " + _ITEM_COLUMNS + ", m.embedding FROM {s}.memories m WHERE {where} ORDER BY m.id",
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
    where, params = _scope(tenant=tenant, prefix=prefix, kind=None, tags={}, now=now)
    params.update(depth=len(prefix), max_depth=max_depth, limit=limit, offset=offset)
    return _stmt(
        schema,
        "SELECT d.ns FROM (SELECT DISTINCT CASE WHEN %(max_depth)s::integer IS NULL"
        " THEN m.namespace ELSE m.namespace[1:%(max_depth)s::integer] END AS ns"
        " FROM {s}.memories m WHERE {where}) AS d"
        ' ORDER BY d.ns COLLATE "C" LIMIT %(limit)s OFFSET %(offset)s',
        params,
        where=where,
    )


# --- summaries -------------------------------------------------------------------------------

_SUMMARY_COLUMNS: Final = (
    "x.tenant, x.user_id, x.session_id, x.version, x.text, x.covers_from, x.covers_to,"
    " x.model, x.content_hash, x.created_at"
)


def lock_key(tenant: str, session_id: str) -> Statement:
    """Serialize the savers of one session (released at commit)."""
    return Statement(
        sql.Composed([sql.SQL("SELECT pg_advisory_xact_lock(%(key)s)")]),
        {"key": advisory_key("synopsis-summary", tenant, session_id)},
    )


def summary_version(schema: str, tenant: str, session_id: str, version: int) -> Statement:
    return _stmt(
        schema,
        "SELECT " + _SUMMARY_COLUMNS + " FROM {s}.summaries x WHERE x.tenant = %(tenant)s"
        " AND x.session_id = %(session)s AND x.version = %(version)s",
        {"tenant": tenant, "session": session_id, "version": version},
    )


def summary_history(schema: str, tenant: str, session_id: str, *, latest: bool) -> Statement:
    """Every version of a session, oldest first (or only the newest)."""
    order: LiteralString = " ORDER BY x.version DESC LIMIT 1" if latest else " ORDER BY x.version"
    return _stmt(
        schema,
        "SELECT " + _SUMMARY_COLUMNS + " FROM {s}.summaries x WHERE x.tenant = %(tenant)s"
        " AND x.session_id = %(session)s" + order,
        {"tenant": tenant, "session": session_id},
    )


def insert_summary(
    schema: str, summary: SessionSummary, *, created_at: float, now: float
) -> list[Statement]:
    """The summary and its outbox entry (run in one transaction)."""
    params = {
        "tenant": summary.tenant,
        "user_id": summary.user_id,
        "session": summary.session_id,
        "version": summary.version,
        "text": summary.text,
        "covers_from": summary.covers_from,
        "covers_to": summary.covers_to,
        "model": summary.model,
        "hash": summary.content_hash,
        "created_at": created_at,
    }
    return [
        _stmt(
            schema,
            "INSERT INTO {s}.summaries (tenant, user_id, session_id, version, text, covers_from,"
            " covers_to, model, content_hash, created_at) VALUES (%(tenant)s, %(user_id)s,"
            " %(session)s, %(version)s, %(text)s, %(covers_from)s, %(covers_to)s, %(model)s,"
            " %(hash)s, %(created_at)s) ON CONFLICT DO NOTHING RETURNING 1",
            params,
        ),
        _stmt(
            schema,
            "INSERT INTO {s}.outbox (tenant, session_id, version, enqueued_at)"
            " VALUES (%(tenant)s, %(session)s, %(version)s, %(now)s) ON CONFLICT DO NOTHING",
            {**params, "now": now},
        ),
    ]


def pending_outbox(schema: str, tenant: str | None, limit: int) -> Statement:
    """Outbox entries, fewest attempts first, then oldest, of one tenant or of all.

    No index gives this order (completed entries are deleted, so the table holds only pending
    ones); PostgreSQL sorts them, which is cheap at outbox sizes.
    """
    return _stmt(
        schema,
        "SELECT " + _SUMMARY_COLUMNS + ", o.attempts FROM {s}.outbox o JOIN {s}.summaries x"
        " USING (tenant, session_id, version)"
        " WHERE %(tenant)s::text IS NULL OR o.tenant = %(tenant)s::text"
        " ORDER BY o.attempts, o.enqueued_at,"
        ' o.tenant COLLATE "C", o.session_id COLLATE "C", o.version'
        " LIMIT %(limit)s",
        {"tenant": tenant, "limit": limit},
    )


def complete_outbox(schema: str, tenant: str, session_id: str, version: int) -> Statement:
    return _stmt(
        schema,
        "DELETE FROM {s}.outbox WHERE tenant = %(tenant)s AND session_id = %(session)s"
        " AND version = %(version)s",
        {"tenant": tenant, "session": session_id, "version": version},
    )


def fail_outbox(schema: str, tenant: str, session_id: str, version: int) -> Statement:
    """Count one more failed attempt of a pending entry; returns the new count (no row: none)."""
    return _stmt(
        schema,
        "UPDATE {s}.outbox SET attempts = attempts + 1 WHERE tenant = %(tenant)s"
        " AND session_id = %(session)s AND version = %(version)s RETURNING attempts",
        {"tenant": tenant, "session": session_id, "version": version},
    )


def delete_user_summaries(schema: str, tenant: str, user_id: str) -> Statement:
    """Delete a user's summaries (their outbox entries go with them); returns the count."""
    return _stmt(
        schema,
        "WITH gone AS (DELETE FROM {s}.summaries WHERE tenant = %(tenant)s"
        " AND user_id = %(user_id)s RETURNING 1) SELECT count(*) FROM gone",
        {"tenant": tenant, "user_id": user_id},
    )
