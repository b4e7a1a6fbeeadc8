"""Schema migrations keep data: SQLite 1 -> 2 and PostgreSQL 4 -> 5 (summaries keyed by user).

Each test builds a database with the previous schema from the old statements (migrations are
append-only, so ``MIGRATIONS[:n]`` is exactly what older releases ran), fills it as the old
code would have, opens it with the current store and checks that every row is still there,
that each summary is served to its own user only, and that the outbox and the new tables work.

Every stored summary already named its user and a session could not change user, so no
legacy row has an unknown user: nothing needs to be hidden or guessed.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql as pgsql

from synopsis.memory.inmemory import InMemoryStore
from synopsis.memory.postgres import PostgresStore
from synopsis.memory.postgres import sql as q
from synopsis.memory.ranking import document_terms
from synopsis.memory.sqlite import SQLiteStore
from synopsis.memory.sqlite import sql as lite
from synopsis.session.memory import SessionMemory
from synopsis.summarizer import SummaryResult

T = "acme"
#: (user, session, version, text, created_at) of the summaries an old release stored.
SUMMARIES = [
    ("alice", "main", 1, "alice: my bank PIN is 4321", 100.0),
    ("alice", "main", 2, "alice: PIN 4321, likes coffee", 200.0),
    ("bob", "other", 1, "bob: likes tea", 150.0),
]
#: (user, session, version, attempts, completed): alice v1 done, the others pending.
OUTBOX = [
    ("alice", "main", 1, 0, True),
    ("alice", "main", 2, 2, False),
    ("bob", "other", 1, 0, False),
]
#: The memory copy of alice's version 2, and its search terms as versions before context.
COPY = SUMMARIES[1][3]
TERMS = document_terms(COPY)


class NoModel:
    def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:
        raise AssertionError("no summary is due in these tests")


def check_migrated(store: Any) -> None:
    """What every migrated database must show, whatever the backend."""
    [v1, v2] = store.summary_history(T, "alice", "main")
    assert (v1.text, v2.text, v2.covers_to, v2.model) == (SUMMARIES[0][3], SUMMARIES[1][3], 20, "m")
    assert v2.created_at is not None and v2.created_at.timestamp() == 200.0
    assert store.latest_summary(T, "bob", "main") is None  # the leak of issue #13, item 2
    assert store.latest_summary(T, "bob", "other").text == "bob: likes tea"
    pending = store.pending_outbox()
    assert [(e.summary.user_id, e.summary.version, e.attempts) for e in pending] == [
        ("bob", 1, 0),
        ("alice", 2, 2),
    ]
    assert all(e.generation == 0 for e in pending)
    assert store.fail_outbox(T, "alice", "main", 2) == 3
    store.complete_outbox(T, "bob", "other", 1)
    assert [e.summary.user_id for e in store.pending_outbox()] == ["alice"]
    [hit] = store.search(T, query="coffee")
    assert hit.item.key == "summary-v2" and hit.item.context == ""
    # the old terms were re-weighted: the item scores as one written now does
    fresh = InMemoryStore()
    fresh.put(T, hit.item.namespace, "summary-v2", COPY, kind="summary")
    assert hit.score == pytest.approx(fresh.search(T, query="coffee")[0].score)
    with SessionMemory(store=store, summarizer=NoModel(), summarize_every=50) as memory:
        for_bob = memory.build_context(T, "bob", "main", [{"role": "user", "content": "hi"}])
        for_alice = memory.build_context(T, "alice", "main", [{"role": "user", "content": "hi"}])
    assert "4321" not in str(for_bob)
    assert "4321" in str(for_alice)
    # the new keys and tables work on the migrated data
    bob = store.save_summary(replace(store.latest_summary(T, "bob", "other"), session_id="main"))
    assert store.latest_summary(T, "bob", "main") == bob
    assert store.claim_summary_job(T, "bob", "main", covers_to=5, owner="r", lease_seconds=9)
    assert store.delete_user(T, "alice") == 3  # two summaries (the outbox cascades), a memory
    assert [e.summary.user_id for e in store.pending_outbox()] == ["bob"]
    assert store.deletion_generation(T, "alice") == 1


# --- SQLite -------------------------------------------------------------------------------------


def build_sqlite_v1(path: Path) -> None:
    """A database as an old release left it: schema version 1, with summaries and outbox."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(lite.CREATE_VERSION_TABLE)
        for statement in lite.MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute(lite.WRITE_VERSION, (1,))
        for user, session, version, text, created in SUMMARIES:
            conn.execute(
                "INSERT INTO summaries (tenant, session_id, version, user_id, text, covers_from,"
                " covers_to, model, content_hash, created_at) VALUES (?, ?, ?, ?, ?, 0, ?, 'm',"
                " ?, ?)",
                (T, session, version, user, text, 10 * version, f"h-{text}", created),
            )
        for _, session, version, attempts, completed in OUTBOX:
            conn.execute(
                "INSERT INTO outbox (tenant, session_id, version, attempts, enqueued_at,"
                " completed_at) VALUES (?, ?, ?, ?, ?, ?)",
                (T, session, version, attempts, 300.0 + version, 400.0 if completed else None),
            )
        conn.execute(
            "INSERT INTO memories (tenant, path, key, text, kind, tags, terms, created_at,"
            " updated_at) VALUES (?, ?, 'summary-v2', ?, 'summary', '{}', ?, 200, 200)",
            (T, lite.encode_path(("user", "alice", "session", "main")), COPY, " ".join(TERMS)),
        )
    finally:
        conn.close()


def test_a_version_1_sqlite_database_is_migrated_with_its_data(tmp_path: Path) -> None:
    """Version 1 -> 3: rows kept, keys include the user, foreign key cascades, terms re-weighed."""
    path = tmp_path / "old.sqlite3"
    build_sqlite_v1(path)
    with SQLiteStore(path) as store:
        check_migrated(store)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute(lite.READ_VERSION).fetchone() == (len(lite.MIGRATIONS),)
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        references = conn.execute("PRAGMA foreign_key_list(outbox)").fetchall()
        assert {row[2] for row in references} == {"summaries"}
        assert [row[3] for row in references] == ["tenant", "user_id", "session_id", "version"]
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert {"summaries_v2", "outbox_v2"}.isdisjoint(tables)
        assert {"user_generations", "summary_jobs", "outbox_pending"} <= tables
    finally:
        conn.close()


def test_a_migrated_sqlite_database_opens_again_unchanged(tmp_path: Path) -> None:
    """The migration runs once; a second open changes nothing."""
    path = tmp_path / "old.sqlite3"
    build_sqlite_v1(path)
    SQLiteStore(path).close()
    with SQLiteStore(path) as store:
        assert len(store.summary_history(T, "alice", "main")) == 2
        assert len(store.pending_outbox()) == 2


# --- PostgreSQL ---------------------------------------------------------------------------------


@pytest.fixture
def schema(postgres_url: str) -> Iterator[str]:
    name = f"migrate_{uuid.uuid4().hex}"
    yield name
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(name)))


def build_postgres_v4(url: str, schema: str) -> None:
    """A schema as the previous release left it: version 4, with summaries and outbox."""
    s = pgsql.Identifier(schema)
    with psycopg.connect(url) as conn:
        steps = [*q.migration_prelude(schema)]
        for version in range(1, 5):
            steps += q.migration(schema, version)
        for statement in steps:
            conn.execute(statement.query, statement.params)
        for user, session, version, text, created in SUMMARIES:
            conn.execute(
                pgsql.SQL(
                    "INSERT INTO {}.summaries (tenant, session_id, version, user_id, text,"
                    " covers_from, covers_to, model, content_hash, created_at)"
                    " VALUES (%s, %s, %s, %s, %s, 0, %s, 'm', %s, %s)"
                ).format(s),
                (T, session, version, user, text, 10 * version, f"h-{text}", created),
            )
        for _, session, version, attempts, completed in OUTBOX:
            if not completed:  # PostgreSQL deletes completed entries
                conn.execute(
                    pgsql.SQL(
                        "INSERT INTO {}.outbox (tenant, session_id, version, attempts,"
                        " enqueued_at) VALUES (%s, %s, %s, %s, %s)"
                    ).format(s),
                    (T, session, version, attempts, 300.0 + version),
                )
        conn.execute(
            pgsql.SQL(
                "INSERT INTO {}.memories (tenant, namespace, key, text, kind, tags, terms,"
                " doc_len, created_at, updated_at) VALUES (%s, %s, 'summary-v2', %s, 'summary',"
                " '{{}}', %s, %s, 200, 200)"
            ).format(s),
            (T, ["user", "alice", "session", "main"], COPY, " ".join(TERMS), len(TERMS)),
        )


@pytest.mark.postgres
def test_a_version_4_postgres_schema_is_migrated_with_its_data(
    postgres_url: str, schema: str
) -> None:
    """Version 4 -> 6: rows kept, keys include the user, foreign key cascades, terms re-weighed."""
    build_postgres_v4(postgres_url, schema)
    with PostgresStore(postgres_url, schema=schema) as store:
        check_migrated(store)
    with psycopg.connect(postgres_url) as conn:
        versions = conn.execute(
            pgsql.SQL("SELECT max(version) FROM {}.schema_version").format(pgsql.Identifier(schema))
        ).fetchone()
        keys = conn.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE connamespace = %s::regnamespace AND conrelid::regclass::text LIKE %s"
            " ORDER BY conname",
            (schema, "%outbox"),
        ).fetchall()
    assert versions == (len(q.MIGRATIONS),)
    assert [name for name, _ in keys] == ["outbox_pkey", "outbox_summary"]
    assert "(tenant, user_id, session_id, version)" in keys[1][1]
    assert "ON DELETE CASCADE" in keys[1][1]
