"""The PostgreSQL backend's schema: ordered migrations, and the statement value (no I/O).

Every builder returns a :class:`Statement`: composed SQL in which only the schema name is an
identifier (quoted by psycopg) and every value, user text included, is a bound parameter.

Layout (schema ``synopsis`` by default)::

    schema_version(version, applied_at)
    memories(id, tenant, namespace text[], key, text, kind, tags jsonb, terms, search_tsv,
             doc_len, embedding real[], embedder, created_at, updated_at, expires_at, context)
    summaries(tenant, user_id, session_id, version, text, covers_from, covers_to, model,
              content_hash, created_at)
    outbox(tenant, user_id, session_id, version -> summaries, enqueued_at, attempts)
                                                            pending memory copies
    user_generations(tenant, user_id, generation)           deletions of each user
    summary_jobs(tenant, user_id, session_id, owner, covers_to, expires_at)   job claims
    tenant_totals(id, tenant, items, length)      deltas of each tenant's count and length
    term_tiers(tenant, lexeme, shard, items)      items per tenant and tier lexeme

Times are epoch seconds (``double precision``) computed from the store's injected clock, so a
fake clock drives expiry exactly as it does on the other backends. ``terms`` holds the
space-joined :func:`~synopsis.memory.ranking.indexed_terms` (BM25 counts its term frequencies
there); ``search_tsv`` holds each distinct term once, as a tier lexeme ``term/F/L``
(``memory_lexemes``, no parser or dictionary in between; see :mod:`synopsis.memory.postgres.tiers`),
and a GIN index on it finds the candidates of a keyword query. ``embedder`` is the identity of
the model that made ``embedding`` (:mod:`synopsis.memory._identity`); NULL with an embedding
stored before identities were recorded, which no store's embedder matches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, LiteralString

from psycopg import sql

__all__ = [
    "MIGRATIONS",
    "Statement",
    "advisory_key",
    "current_version",
    "migration",
    "migration_lock",
    "migration_prelude",
    "stmt",
]


@dataclass(frozen=True, slots=True)
class Statement:
    """One SQL statement and its bound parameters.

    A ``deferred`` statement is sent at once and its rows are not waited for: the driver
    returns no rows for it, and hands them back (in order) ahead of the rows of the next
    statement that is not deferred. The server works on it while the plan prepares what
    comes next (a batch upsert's next chunk). A plan ends with a statement that is not.
    """

    query: sql.Composed
    params: Mapping[str, Any] = field(default_factory=dict)
    deferred: bool = False


def _sql(schema: str, template: LiteralString, **parts: sql.Composable) -> sql.Composed:
    return sql.SQL(template).format(s=sql.Identifier(schema), **parts)


def stmt(
    schema: str,
    template: LiteralString,
    params: Mapping[str, Any] | None = None,
    **parts: sql.Composable,
) -> Statement:
    """``template`` with ``{s}`` the quoted schema (and other ``parts``), bound to ``params``."""
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

# A session is (tenant, user_id, session_id): two users' "main" are two sessions. Every stored
# summary already names its user (and a session never changed user), so the rows keep their
# data and only the keys change; the outbox learns each entry's user from its summary. Then
# the deletion generation of each user and the summary-job claims. (The constraint names
# dropped here are the ones PostgreSQL gave the constraints of migration 1.)
_V5: Final[tuple[LiteralString, ...]] = (
    "ALTER TABLE {s}.outbox ADD COLUMN user_id text",
    "UPDATE {s}.outbox o SET user_id = x.user_id FROM {s}.summaries x"
    " WHERE x.tenant = o.tenant AND x.session_id = o.session_id AND x.version = o.version",
    "ALTER TABLE {s}.outbox ALTER COLUMN user_id SET NOT NULL",
    "ALTER TABLE {s}.outbox DROP CONSTRAINT outbox_tenant_session_id_version_fkey",
    "ALTER TABLE {s}.outbox DROP CONSTRAINT outbox_pkey",
    "ALTER TABLE {s}.summaries DROP CONSTRAINT summaries_pkey",
    "ALTER TABLE {s}.summaries ADD CONSTRAINT summaries_pkey"
    " PRIMARY KEY (tenant, user_id, session_id, version)",
    "ALTER TABLE {s}.outbox ADD CONSTRAINT outbox_pkey"
    " PRIMARY KEY (tenant, user_id, session_id, version)",
    "ALTER TABLE {s}.outbox ADD CONSTRAINT outbox_summary"
    " FOREIGN KEY (tenant, user_id, session_id, version)"
    " REFERENCES {s}.summaries (tenant, user_id, session_id, version) ON DELETE CASCADE",
    # The new primary key starts with (tenant, user_id): it serves what this index did.
    "DROP INDEX IF EXISTS {s}.summaries_user",
    """CREATE TABLE {s}.user_generations (
        tenant text NOT NULL,
        user_id text NOT NULL,
        generation bigint NOT NULL,
        PRIMARY KEY (tenant, user_id)
    )""",
    """CREATE TABLE {s}.summary_jobs (
        tenant text NOT NULL,
        user_id text NOT NULL,
        session_id text NOT NULL,
        owner text NOT NULL,
        covers_to bigint NOT NULL,
        expires_at double precision NOT NULL,
        PRIMARY KEY (tenant, user_id, session_id)
    )""",
)

# An item's context (words to find it by), and the text weighed TEXT_WEIGHT (2) times in its
# indexed terms: an existing item has no context, so its terms are its text's terms twice.
_V6: Final[tuple[LiteralString, ...]] = (
    "ALTER TABLE {s}.memories ADD COLUMN context text NOT NULL DEFAULT ''",
    "UPDATE {s}.memories SET terms = terms || ' ' || terms, doc_len = doc_len * 2"
    " WHERE terms <> ''",
)

# Each tenant's item count and total length (BM25's N and mean length of a tenant-wide search)
# without counting the tenant's items at every search. Statement-level triggers append one
# delta row per tenant a write touches, so concurrent writers never wait on a shared row; a
# writer that wins a try-lock (it never waits) folds a tenant's deltas into one row once there
# are more than 64. Expired items not yet swept are subtracted at search time.
_V7: Final[tuple[LiteralString, ...]] = (
    """CREATE TABLE {s}.tenant_totals (
        id bigserial PRIMARY KEY,
        tenant text NOT NULL,
        items bigint NOT NULL,
        length bigint NOT NULL
    )""",
    "CREATE INDEX tenant_totals_tenant ON {s}.tenant_totals (tenant) INCLUDE (items, length)",
    "INSERT INTO {s}.tenant_totals (tenant, items, length)"
    " SELECT tenant, count(*), coalesce(sum(doc_len), 0) FROM {s}.memories GROUP BY tenant",
    """CREATE FUNCTION {s}.memories_totals() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        touched text[];
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO {s}.tenant_totals (tenant, items, length)
            SELECT n.tenant, count(*), sum(n.doc_len) FROM new_rows n GROUP BY n.tenant;
            SELECT array_agg(DISTINCT n.tenant) INTO touched FROM new_rows n;
        ELSIF TG_OP = 'DELETE' THEN
            INSERT INTO {s}.tenant_totals (tenant, items, length)
            SELECT o.tenant, -count(*), -sum(o.doc_len) FROM old_rows o GROUP BY o.tenant;
            SELECT array_agg(DISTINCT o.tenant) INTO touched FROM old_rows o;
        ELSE
            INSERT INTO {s}.tenant_totals (tenant, items, length)
            SELECT c.tenant, 0, sum(c.length) FROM (
                SELECT n.tenant, n.doc_len::bigint AS length FROM new_rows n
                UNION ALL SELECT o.tenant, -o.doc_len::bigint FROM old_rows o
            ) c GROUP BY c.tenant HAVING sum(c.length) <> 0;
            SELECT array_agg(DISTINCT n.tenant) INTO touched FROM new_rows n;
        END IF;
        IF touched IS NOT NULL
            AND pg_try_advisory_xact_lock(hashtext('synopsis-totals ' || TG_TABLE_SCHEMA)) THEN
            WITH crowded AS (
                SELECT t.tenant FROM unnest(touched) AS t(tenant)
                WHERE (SELECT count(*) FROM {s}.tenant_totals x WHERE x.tenant = t.tenant) > 64
            ), gone AS (
                DELETE FROM {s}.tenant_totals x WHERE x.tenant IN (SELECT tenant FROM crowded)
                RETURNING x.tenant, x.items, x.length
            )
            INSERT INTO {s}.tenant_totals (tenant, items, length)
            SELECT g.tenant, sum(g.items), sum(g.length) FROM gone g GROUP BY g.tenant;
        END IF;
        RETURN NULL;
    END
    $$""",
    "CREATE TRIGGER memories_totals_insert AFTER INSERT ON {s}.memories"
    " REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT"
    " EXECUTE FUNCTION {s}.memories_totals()",
    "CREATE TRIGGER memories_totals_update AFTER UPDATE ON {s}.memories"
    " REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT"
    " EXECUTE FUNCTION {s}.memories_totals()",
    "CREATE TRIGGER memories_totals_delete AFTER DELETE ON {s}.memories"
    " REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT"
    " EXECUTE FUNCTION {s}.memories_totals()",
)

# Which model made each embedding. Embeddings stored before are of an unknown model (NULL):
# they count as missing until ``reembed`` replaces them (see synopsis.memory._identity). A
# nullable column without a default: no row is rewritten.
_V8: Final[tuple[LiteralString, ...]] = ("ALTER TABLE {s}.memories ADD COLUMN embedder text",)

# Impact tiers for exact tenant-wide search (see ``synopsis.memory.postgres.tiers``). The GIN index
# holds each distinct term of an item as ``term/F/L`` (its frequency class and the item's
# length class), so a search can read a term's best tiers first; a plain term query becomes a
# prefix query ``'term/':*``. ``term_tiers`` counts each tenant's items per tier lexeme (the
# sum over a term's tiers is its document frequency, BM25's n, without reading postings),
# kept by statement-level triggers: each statement adds its per-lexeme deltas to one of 16
# counter rows picked by the backend's pid, in lexeme order, so concurrent writers seldom
# share a row and never deadlock over one; nothing grows beyond 16 rows per tenant and tier.
_V9: Final[tuple[LiteralString, ...]] = (
    """CREATE FUNCTION {s}.memory_lexemes(terms text, doc_len integer) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
        SELECT array_to_tsvector(coalesce(array_agg(t.w || '/' || CASE
            WHEN t.tf <= 8 THEN t.tf WHEN t.tf <= 15 THEN 9 WHEN t.tf <= 31 THEN 10
            WHEN t.tf <= 63 THEN 11 ELSE 12 END || '/' || width_bucket(doc_len,
            '{{1,2,3,4,6,8,12,16,24,32,48,64,96,128,192,256,384,512,768,1024,1536,2048,3072,
            4096,6144,8192,12288,16384,24576,32768,49152,65536,98304,131072,196608,262144,
            393216,524288,786432,1048576}}'::integer[])), '{{}}'::text[]))
        FROM (SELECT w, count(*) AS tf FROM unnest(string_to_array(terms, ' ')) AS w
              GROUP BY w) t
    $$""",
    "ALTER TABLE {s}.memories DROP COLUMN search_tsv",
    "ALTER TABLE {s}.memories ADD COLUMN search_tsv tsvector"
    " GENERATED ALWAYS AS ({s}.memory_lexemes(terms, doc_len)) STORED",
    "CREATE INDEX memories_search ON {s}.memories USING gin (search_tsv)",
    """CREATE TABLE {s}.term_tiers (
        tenant text NOT NULL,
        lexeme text COLLATE "C" NOT NULL,
        shard integer NOT NULL,
        items bigint NOT NULL,
        PRIMARY KEY (tenant, lexeme, shard)
    ) WITH (fillfactor = 80)""",
    "INSERT INTO {s}.term_tiers (tenant, lexeme, shard, items)"
    " SELECT m.tenant, l.lexeme, 0, count(*) FROM {s}.memories m,"
    " unnest(tsvector_to_array(m.search_tsv)) AS l(lexeme) GROUP BY m.tenant, l.lexeme",
    """CREATE FUNCTION {s}.memories_term_tiers() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO {s}.term_tiers AS t (tenant, lexeme, shard, items)
            SELECT n.tenant, l.lexeme, mod(pg_backend_pid(), 16), count(*)
            FROM new_rows n, unnest(tsvector_to_array(n.search_tsv)) AS l(lexeme)
            GROUP BY n.tenant, l.lexeme ORDER BY n.tenant, l.lexeme
            ON CONFLICT (tenant, lexeme, shard) DO UPDATE SET items = t.items + excluded.items;
        ELSIF TG_OP = 'DELETE' THEN
            INSERT INTO {s}.term_tiers AS t (tenant, lexeme, shard, items)
            SELECT o.tenant, l.lexeme, mod(pg_backend_pid(), 16), -count(*)
            FROM old_rows o, unnest(tsvector_to_array(o.search_tsv)) AS l(lexeme)
            GROUP BY o.tenant, l.lexeme ORDER BY o.tenant, l.lexeme
            ON CONFLICT (tenant, lexeme, shard) DO UPDATE SET items = t.items + excluded.items;
        ELSE
            INSERT INTO {s}.term_tiers AS t (tenant, lexeme, shard, items)
            SELECT c.tenant, c.lexeme, mod(pg_backend_pid(), 16), sum(c.items) FROM (
                SELECT n.tenant, l.lexeme, 1 AS items
                FROM new_rows n, unnest(tsvector_to_array(n.search_tsv)) AS l(lexeme)
                UNION ALL SELECT o.tenant, l.lexeme, -1
                FROM old_rows o, unnest(tsvector_to_array(o.search_tsv)) AS l(lexeme)
            ) c GROUP BY c.tenant, c.lexeme HAVING sum(c.items) <> 0
            ORDER BY c.tenant, c.lexeme
            ON CONFLICT (tenant, lexeme, shard) DO UPDATE SET items = t.items + excluded.items;
        END IF;
        RETURN NULL;
    END
    $$""",
    "CREATE TRIGGER memories_term_tiers_insert AFTER INSERT ON {s}.memories"
    " REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT"
    " EXECUTE FUNCTION {s}.memories_term_tiers()",
    "CREATE TRIGGER memories_term_tiers_update AFTER UPDATE ON {s}.memories"
    " REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT"
    " EXECUTE FUNCTION {s}.memories_term_tiers()",
    "CREATE TRIGGER memories_term_tiers_delete AFTER DELETE ON {s}.memories"
    " REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT"
    " EXECUTE FUNCTION {s}.memories_term_tiers()",
)

#: Ordered migrations; migration ``n`` (1-based) brings the schema to version ``n``.
MIGRATIONS: Final[tuple[tuple[LiteralString, ...], ...]] = (
    _V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8, _V9,
)  # fmt: skip


def migration_lock(schema: str) -> Statement:
    """Serialize migrations of one schema across every replica (released at commit)."""
    return Statement(
        sql.Composed([sql.SQL("SELECT pg_advisory_xact_lock(%(key)s)")]),
        {"key": advisory_key("synopsis-migrate", schema)},
    )


def migration_prelude(schema: str) -> list[Statement]:
    """Create the schema and its version table if they are missing."""
    return [
        stmt(schema, "CREATE SCHEMA IF NOT EXISTS {s}"),
        stmt(
            schema,
            "CREATE TABLE IF NOT EXISTS {s}.schema_version ("
            " version integer PRIMARY KEY,"
            " applied_at timestamptz NOT NULL DEFAULT now())",
        ),
    ]


def current_version(schema: str) -> Statement:
    return stmt(schema, "SELECT coalesce(max(version), 0) FROM {s}.schema_version")


def migration(schema: str, version: int) -> list[Statement]:
    """The statements of migration ``version`` followed by recording it."""
    steps = [stmt(schema, template) for template in MIGRATIONS[version - 1]]
    steps.append(
        stmt(schema, "INSERT INTO {s}.schema_version (version) VALUES (%(v)s)", {"v": version})
    )
    return steps
