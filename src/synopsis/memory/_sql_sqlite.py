"""SQL for the SQLite backend: the schema migrations and pure statement builders.

Nothing here touches a connection. Every value is a bound parameter; the only text ever
placed into SQL is fixed text written in this module (placeholders and column names).

Namespaces are stored as a ``path``: each label followed by ``\\x1f``. Labels may not hold
control characters (``normalize_namespace`` rejects them), so the separator never occurs
inside a label and the encoding is exact. A prefix matches whole labels with a range on the
path: every path starting with ``p`` (which ends with ``\\x1f``) lies in ``[p, p'[`` where
``p'`` is ``p`` with its last character raised to ``\\x20``; no ``LIKE`` is involved, and
binary (UTF-8) order of paths equals tuple order of namespaces.

Keyword search runs on an FTS5 table over the space-joined ``indexed_terms`` of each item
(kept in sync by triggers); a query is the ``query_terms``, each double-quoted, joined by
``OR``, so FTS5 syntax in user text is inert.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from synopsis.errors import InvalidNamespace
from synopsis.memory._checks import Claim, PutRequest, SearchRequest
from synopsis.memory._types import Namespace, SessionSummary

__all__ = [
    "MIGRATIONS",
    "SEPARATOR",
    "Batch",
    "Statement",
    "decode_path",
    "encode_path",
    "fts_query",
    "prefix_range",
]

SEPARATOR: Final = "\x1f"
_AFTER_SEPARATOR: Final = "\x20"

#: Schema version ``n`` is reached by running ``MIGRATIONS[n - 1]``; append, never edit.
MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (
        """CREATE TABLE memories (
            id INTEGER PRIMARY KEY,
            tenant TEXT NOT NULL,
            path TEXT NOT NULL,
            key TEXT NOT NULL,
            text TEXT NOT NULL,
            kind TEXT NOT NULL,
            tags TEXT NOT NULL,
            terms TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            expires_at REAL,
            UNIQUE (tenant, path, key)
        )""",
        "CREATE INDEX memories_recent ON memories (tenant, updated_at DESC)",
        "CREATE INDEX memories_expiry ON memories (expires_at) WHERE expires_at IS NOT NULL",
        """CREATE TABLE memory_vectors (
            memory_id INTEGER PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
            vector BLOB NOT NULL
        )""",
        """CREATE VIRTUAL TABLE memories_fts USING fts5 (
            terms, content='memories', content_rowid='id',
            tokenize='unicode61 remove_diacritics 2'
        )""",
        """CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts (rowid, terms) VALUES (new.id, new.terms);
        END""",
        """CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, terms)
            VALUES ('delete', old.id, old.terms);
        END""",
        """CREATE TRIGGER memories_fts_update AFTER UPDATE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, terms)
            VALUES ('delete', old.id, old.terms);
            INSERT INTO memories_fts (rowid, terms) VALUES (new.id, new.terms);
        END""",
        """CREATE TABLE summaries (
            tenant TEXT NOT NULL,
            session_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            user_id TEXT NOT NULL,
            text TEXT NOT NULL,
            covers_from INTEGER NOT NULL,
            covers_to INTEGER NOT NULL,
            model TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (tenant, session_id, version)
        )""",
        "CREATE INDEX summaries_user ON summaries (tenant, user_id)",
        """CREATE TABLE outbox (
            tenant TEXT NOT NULL,
            session_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            enqueued_at REAL NOT NULL,
            completed_at REAL,
            PRIMARY KEY (tenant, session_id, version),
            FOREIGN KEY (tenant, session_id, version)
                REFERENCES summaries (tenant, session_id, version) ON DELETE CASCADE
        )""",
        "CREATE INDEX outbox_pending ON outbox (enqueued_at) WHERE completed_at IS NULL",
    ),
    # 2: a session is (tenant, user_id, session_id), so two users' "main" never meet; the
    # deletion generation of each user and the summary-job claims. Every stored summary
    # already names its user, so rows are re-keyed as they are. SQLite cannot change a
    # primary key in place: the tables are rebuilt (renaming rewrites the foreign key).
    (
        """CREATE TABLE summaries_v2 (
            tenant TEXT NOT NULL,
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            text TEXT NOT NULL,
            covers_from INTEGER NOT NULL,
            covers_to INTEGER NOT NULL,
            model TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (tenant, user_id, session_id, version)
        )""",
        """INSERT INTO summaries_v2 (tenant, user_id, session_id, version, text, covers_from,
            covers_to, model, content_hash, created_at)
        SELECT tenant, user_id, session_id, version, text, covers_from, covers_to, model,
            content_hash, created_at FROM summaries""",
        """CREATE TABLE outbox_v2 (
            tenant TEXT NOT NULL,
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            enqueued_at REAL NOT NULL,
            completed_at REAL,
            PRIMARY KEY (tenant, user_id, session_id, version),
            FOREIGN KEY (tenant, user_id, session_id, version)
                REFERENCES summaries_v2 (tenant, user_id, session_id, version) ON DELETE CASCADE
        )""",
        """INSERT INTO outbox_v2 (tenant, user_id, session_id, version, attempts, enqueued_at,
            completed_at)
        SELECT o.tenant, s.user_id, o.session_id, o.version, o.attempts, o.enqueued_at,
            o.completed_at FROM outbox AS o JOIN summaries AS s
            ON s.tenant = o.tenant AND s.session_id = o.session_id AND s.version = o.version""",
        "DROP TABLE outbox",
        "DROP TABLE summaries",
        "ALTER TABLE summaries_v2 RENAME TO summaries",
        "ALTER TABLE outbox_v2 RENAME TO outbox",
        "CREATE INDEX outbox_pending ON outbox (enqueued_at) WHERE completed_at IS NULL",
        """CREATE TABLE user_generations (
            tenant TEXT NOT NULL,
            user_id TEXT NOT NULL,
            generation INTEGER NOT NULL,
            PRIMARY KEY (tenant, user_id)
        )""",
        """CREATE TABLE summary_jobs (
            tenant TEXT NOT NULL,
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            owner TEXT NOT NULL,
            covers_to INTEGER NOT NULL,
            expires_at REAL NOT NULL,
            PRIMARY KEY (tenant, user_id, session_id)
        )""",
    ),
    # 3: an item's context (words to find it by), and the text weighed TEXT_WEIGHT (2) times
    # in its indexed terms: an existing item has no context, so its terms are its text's
    # terms twice (the update trigger re-indexes each row).
    (
        "ALTER TABLE memories ADD COLUMN context TEXT NOT NULL DEFAULT ''",
        "UPDATE memories SET terms = terms || ' ' || terms WHERE terms <> ''",
    ),
)

CREATE_VERSION_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS synopsis_schema (version INTEGER NOT NULL)"
)
READ_VERSION: Final = "SELECT max(version) FROM synopsis_schema"
WRITE_VERSION: Final = "INSERT INTO synopsis_schema (version) VALUES (?)"
PRAGMAS: Final = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA foreign_keys = ON",
)

_MEMORY_COLUMNS: Final = (
    "m.id, m.path, m.key, m.text, m.kind, m.tags, m.created_at, m.updated_at, m.expires_at, "
    "m.context"
)
_SUMMARY_COLUMNS: Final = (
    "s.tenant, s.user_id, s.session_id, s.version, s.text, s.covers_from, s.covers_to, "
    "s.model, s.content_hash, s.created_at"
)


@dataclass(frozen=True, slots=True)
class Statement:
    sql: str
    params: tuple[object, ...] = ()


@dataclass(frozen=True, slots=True)
class Batch:
    """One statement run once per parameter row (``executemany``)."""

    sql: str
    rows: list[tuple[object, ...]]


# --- namespaces and queries --------------------------------------------------------------


def encode_path(namespace: Namespace) -> str:
    """The stored form of a namespace (each label followed by the separator)."""
    for label in namespace:
        if any(ord(c) < 32 for c in label):
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


def _scope(request: SearchRequest, now: float) -> tuple[str, tuple[object, ...]]:
    """The WHERE conditions of a search: tenant, prefix, liveness, kind and tags."""
    live_sql, live_params = _live(now)
    conditions = ["m.tenant = ?", live_sql]
    params: list[object] = [request.tenant, *live_params]
    bounds = prefix_range(request.prefix)
    if bounds is not None:
        conditions.append("m.path >= ? AND m.path < ?")
        params.extend(bounds)
    if request.kind is not None:
        conditions.append("m.kind = ?")
        params.append(request.kind)
    for name, value in sorted(request.tags.items()):
        conditions.append(
            "EXISTS (SELECT 1 FROM json_each(m.tags) AS t WHERE t.key = ? AND t.value = ?)"
        )
        params.extend((name, value))
    return " AND ".join(conditions), tuple(params)


# --- memories ----------------------------------------------------------------------------


_UPSERT: Final = """INSERT INTO memories
    (tenant, path, key, text, kind, tags, terms, created_at, updated_at, expires_at, context)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (tenant, path, key) DO UPDATE SET
    text = excluded.text, kind = excluded.kind, tags = excluded.tags,
    context = excluded.context,
    terms = excluded.terms, updated_at = excluded.updated_at,
    expires_at = excluded.expires_at,
    created_at = CASE
        WHEN ? OR (memories.expires_at IS NOT NULL AND memories.expires_at <= ?)
        THEN excluded.created_at ELSE memories.created_at END"""


def _memory_row(request: PutRequest, terms: Sequence[str], now: float) -> tuple[object, ...]:
    """The values a put of ``request`` at ``now`` writes (``terms``: its indexed terms).

    The last two fill the ``created_at`` rule: a restored ``created_at`` replaces the old
    one; otherwise it survives unless the old item had expired by ``now``.
    """
    restored = request.created_at is not None
    created = request.created_at if restored else now
    tags = json.dumps(request.tags, ensure_ascii=False, sort_keys=True)
    address = (request.tenant, encode_path(request.namespace), request.key)
    times = (created, request.updated(now), request.expiry(now))
    values = (*address, request.text, request.kind, tags, " ".join(terms), *times)
    return (*values, request.context, restored, now)


def upsert_memory(request: PutRequest, terms: Sequence[str], now: float) -> Statement:
    """Insert or replace one item; ``created_at`` survives a replace unless the old expired."""
    return Statement(_UPSERT + " RETURNING id, created_at", _memory_row(request, terms, now))


def upsert_memories(
    requests: Sequence[PutRequest], terms: Sequence[Sequence[str]], now: float
) -> Batch:
    """:func:`upsert_memory` for many items (``executemany``; the FTS triggers fire per row)."""
    pairs = zip(requests, terms, strict=True)
    return Batch(_UPSERT, [_memory_row(request, item_terms, now) for request, item_terms in pairs])


def select_written(tenant: str, addresses: Sequence[tuple[object, object]]) -> Statement:
    """``index, id, created_at`` of the items at ``(path, key)`` addresses (one query).

    ``index`` is the address's position in ``addresses``. ``CROSS JOIN`` keeps the address
    list as the outer loop, so each address is one lookup in the unique (tenant, path, key)
    index rather than a scan of the tenant's items.
    """
    return Statement(
        "SELECT a.key, m.id, m.created_at FROM json_each(?) AS a"
        " CROSS JOIN memories AS m ON m.tenant = ? AND m.path = a.value ->> 0"
        " AND m.key = a.value ->> 1",
        (json.dumps(addresses, ensure_ascii=False), tenant),
    )


def upsert_vectors(pairs: Sequence[tuple[int, bytes]]) -> Batch:
    """:func:`upsert_vector` for many ``(memory_id, blob)`` pairs."""
    return Batch(upsert_vector(0, b"").sql, list(pairs))


def delete_vectors(memory_ids: Sequence[int]) -> Batch:
    """:func:`delete_vector` for many ids."""
    return Batch(delete_vector(0).sql, [(memory_id,) for memory_id in memory_ids])


def upsert_vector(memory_id: int, blob: bytes) -> Statement:
    return Statement(
        "INSERT INTO memory_vectors (memory_id, vector) VALUES (?, ?) "
        "ON CONFLICT (memory_id) DO UPDATE SET vector = excluded.vector",
        (memory_id, blob),
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


def search_keyword(request: SearchRequest, now: float, *, limit: int, offset: int) -> Statement:
    """Items in scope sharing a term with the query, best BM25 first (higher is better)."""
    where, params = _scope(request, now)
    return Statement(
        f"SELECT {_MEMORY_COLUMNS}, -bm25(memories_fts) AS score "
        "FROM memories_fts JOIN memories AS m ON m.id = memories_fts.rowid "
        f"WHERE memories_fts MATCH ? AND {where} "
        "ORDER BY score DESC, m.updated_at DESC, m.key, m.path LIMIT ? OFFSET ?",
        (fts_query(request.terms), *params, limit, offset),
    )


def search_vectors(request: SearchRequest, now: float) -> Statement:
    """Every item in scope that has a vector, with the vector as the last column."""
    where, params = _scope(request, now)
    return Statement(
        f"SELECT {_MEMORY_COLUMNS}, v.vector FROM memories AS m "
        f"JOIN memory_vectors AS v ON v.memory_id = m.id WHERE {where}",
        params,
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
