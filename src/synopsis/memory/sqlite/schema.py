"""The SQLite backend's schema: ordered migrations and the version table (no I/O).

Layout::

    synopsis_schema(version)
    memories(id, tenant, path, key, text, kind, tags, terms, doc_len, created_at, updated_at,
             expires_at, context)                                   unique (tenant, path, key)
    memories_fts(terms)                                    FTS5 over memories.terms
    tenant_totals(tenant, items, length)                   kept by triggers on memories
    memory_vectors(memory_id -> memories, vector, embedder)
    summaries, outbox, user_generations, summary_jobs      (see migrations 1 and 2)

``terms`` holds the space-joined :func:`~synopsis.memory.ranking.indexed_terms` and
``doc_len`` their number (BM25's document length). ``memories_scope`` covers what BM25's scope
statistics read (count and total length of the live items under a prefix, of a kind or not of
excluded kinds) and what a small scope's keyword search reads (terms and the tie-breaking
columns). ``embedder`` is the identity
of the model that made the vector (:mod:`synopsis.memory._identity`); NULL for a vector stored
before identities were recorded, which no store's embedder matches.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CREATE_VERSION_TABLE",
    "MIGRATIONS",
    "PRAGMAS",
    "READ_VERSION",
    "ROW_TRIGGERS",
    "SCOPE_INDEX",
    "WRITE_VERSION",
]

#: The per-row insert triggers a bulk load drops and re-creates (:data:`ROW_TRIGGERS`).
_FTS_INSERT: Final = """CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, terms) VALUES (new.id, new.terms);
    END"""
_FTS_TRIGGERS: Final = (
    _FTS_INSERT,
    """CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, terms)
        VALUES ('delete', old.id, old.terms);
    END""",
)
_TOTALS_INSERT: Final = """CREATE TRIGGER memories_totals_insert AFTER INSERT ON memories BEGIN
            INSERT INTO tenant_totals (tenant, items, length) VALUES (new.tenant, 1, new.doc_len)
            ON CONFLICT (tenant) DO UPDATE SET
                items = items + 1, length = length + excluded.length;
        END"""
#: What an update trigger does: the old terms out of the FTS5 index, the new ones in.
_FTS_REINDEX: Final = """
            INSERT INTO memories_fts (memories_fts, rowid, terms)
            VALUES ('delete', old.id, old.terms);
            INSERT INTO memories_fts (rowid, terms) VALUES (new.id, new.terms);
        END"""
#: ``(name, CREATE statement)`` of the per-row insert triggers, as the migrations made them.
ROW_TRIGGERS: Final = (
    ("memories_fts_insert", _FTS_INSERT),
    ("memories_totals_insert", _TOTALS_INSERT),
)
#: The covering scope index (migration 6), as a bulk load re-creates it.
SCOPE_INDEX: Final = (
    "CREATE INDEX memories_scope ON memories"
    " (tenant, path, expires_at, doc_len, updated_at, key, kind, terms)"
)

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
        *_FTS_TRIGGERS,
        "CREATE TRIGGER memories_fts_update AFTER UPDATE ON memories BEGIN" + _FTS_REINDEX,
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
    # 4: BM25 statistics of the searched scope instead of FTS5's whole-table ones. Each item's
    # length is stored (``doc_len``) and ``memories_scope`` covers a scope's count and total
    # length. The full-text index is rebuilt with the ``ascii`` tokenizer, which splits on ASCII
    # spaces and punctuation only: every stored term is then exactly one token, whatever its
    # script or Unicode version, so a term's postings are exactly the items holding it. An
    # update re-indexes an item only when its terms changed.
    (
        "DROP TRIGGER memories_fts_insert",
        "DROP TRIGGER memories_fts_delete",
        "DROP TRIGGER memories_fts_update",
        "DROP TABLE memories_fts",
        "ALTER TABLE memories ADD COLUMN doc_len INTEGER NOT NULL DEFAULT 0",
        """UPDATE memories SET doc_len = CASE WHEN terms = '' THEN 0
            ELSE length(terms) - length(replace(terms, ' ', '')) + 1 END""",
        # Covering: a scope's count and length, and a small scope's keyword candidates, are
        # read from one contiguous index range instead of a table row per item.
        "CREATE INDEX memories_scope ON memories"
        " (tenant, path, expires_at, doc_len, updated_at, key, terms)",
        """CREATE VIRTUAL TABLE memories_fts USING fts5 (
            terms, content='memories', content_rowid='id', tokenize='ascii',
            detail='none', columnsize=0
        )""",
        "INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')",
        *_FTS_TRIGGERS,
        "CREATE TRIGGER memories_fts_update AFTER UPDATE OF terms ON memories\n"
        "        WHEN old.terms IS NOT new.terms BEGIN" + _FTS_REINDEX,
        # Each tenant's item count and total length, kept by triggers, so a tenant-wide search
        # reads two numbers instead of counting every item (expired ones not yet swept are
        # subtracted at search time). A put never moves an item to another tenant.
        """CREATE TABLE tenant_totals (
            tenant TEXT PRIMARY KEY,
            items INTEGER NOT NULL,
            length INTEGER NOT NULL
        ) WITHOUT ROWID""",
        """INSERT INTO tenant_totals (tenant, items, length)
            SELECT tenant, count(*), sum(doc_len) FROM memories GROUP BY tenant""",
        _TOTALS_INSERT,
        """CREATE TRIGGER memories_totals_delete AFTER DELETE ON memories BEGIN
            UPDATE tenant_totals SET items = items - 1, length = length - old.doc_len
            WHERE tenant = old.tenant;
        END""",
        """CREATE TRIGGER memories_totals_update AFTER UPDATE OF doc_len ON memories
        WHEN old.doc_len IS NOT new.doc_len BEGIN
            UPDATE tenant_totals SET length = length + new.doc_len - old.doc_len
            WHERE tenant = new.tenant;
        END""",
    ),
    # 5: which model made each vector. Vectors stored before are of an unknown model (NULL):
    # they count as missing until ``reembed`` replaces them (see synopsis.memory._identity).
    ("ALTER TABLE memory_vectors ADD COLUMN embedder TEXT",),
    # 6: ``kind`` in the covering scope index. Session recall leaves transcript kinds out of
    # every search, and without it counting the filtered scope read each of the user's rows
    # from the table (2x a user's search at 1M memories; free with it, docs/benchmarks.md).
    (
        "DROP INDEX memories_scope",
        SCOPE_INDEX,
    ),
)

CREATE_VERSION_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS synopsis_schema (version INTEGER NOT NULL)"
)
READ_VERSION: Final = "SELECT max(version) FROM synopsis_schema"
WRITE_VERSION: Final = "INSERT INTO synopsis_schema (version) VALUES (?)"
#: Per connection. The page cache may grow to 64 MiB (SQLite's default is 2 MiB): at a million
#: memories the address and scope indexes take random-order inserts, and a small cache reads
#: their pages again and again.
PRAGMAS: Final = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA foreign_keys = ON",
    "PRAGMA cache_size = -65536",
)
