"""Schema migrations for scope-exact keyword search keep every memory and rank it right.

SQLite 3 -> 4 stores each item's length, adds the scope index, rebuilds the full-text index
with the ``ascii`` tokenizer and keeps each tenant's totals; PostgreSQL 6 -> 7 keeps each
tenant's totals. Each test builds the previous schema from the old statements (migrations are
append-only, so ``MIGRATIONS[:n]`` is what the previous release ran), fills it as the old code
did, opens it with the current store and checks that every item is still there, the new
columns and totals are right, and searches rank exactly as the in-memory store does on the
same data.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql as pgsql

from synopsis.memory.inmemory import InMemoryStore
from synopsis.memory.postgres import PostgresStore
from synopsis.memory.postgres import sql as pq
from synopsis.memory.ranking import indexed_terms
from synopsis.memory.sqlite import SQLiteStore
from synopsis.memory.sqlite import sql as lite
from synopsis.testing import FakeClock
from tests.postgres_history import build_postgres_at

#: (tenant, namespace, key, text) of what an old release stored.
ITEMS = [
    ("acme", ("user", "alice"), "a1", "Alice likes coffee and painting"),
    ("acme", ("user", "alice"), "a2", "coffee coffee, then more coffee"),
    ("acme", ("user", "alice", "session", "s1"), "a3", "用户喜欢喝咖啡"),
    ("acme", ("user", "bob"), "b1", "Bob paints; he likes tea, not coffee"),
    ("acme", ("user", "bob"), "b2", "café crème in Paris"),
    ("acme", ("user", "bob"), "b3", ""),
    ("globex", ("user", "alice"), "g1", "coffee " * 20),
    ("globex", ("user", "carol"), "g2", "咖啡 and tea"),
]
QUERIES = ("coffee", "tea coffee", "咖啡", "café", "cafe", "painting")
SCOPES: tuple[tuple[str, ...], ...] = ((), ("user", "alice"), ("user", "bob"))


def build_sqlite_v3(path: Path, clock: FakeClock) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(lite.CREATE_VERSION_TABLE)
        for version in (1, 2, 3):
            for statement in lite.MIGRATIONS[version - 1]:
                conn.execute(statement)
            conn.execute(lite.WRITE_VERSION, (version,))
        for tenant, namespace, key, text in ITEMS:
            conn.execute(
                "INSERT INTO memories (tenant, path, key, text, kind, tags, terms, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, 'note', ?, ?, ?, ?)",
                (
                    tenant,
                    lite.encode_path(namespace),
                    key,
                    text,
                    json.dumps({}),
                    " ".join(indexed_terms(text)),
                    clock.now,
                    clock.now,
                ),
            )
    finally:
        conn.close()


def _reference(clock: FakeClock) -> InMemoryStore:
    store = InMemoryStore(clock=clock)
    for tenant, namespace, key, text in ITEMS:
        store.put(tenant, namespace, key, text)
    return store


def _ranking(store: object, tenant: str, scope: tuple[str, ...], query: str) -> list[object]:
    hits = store.search(tenant, scope, query=query, limit=50)  # type: ignore[attr-defined]
    return [(h.item.namespace, h.item.key, h.item.text, h.score) for h in hits]


def test_a_version_3_sqlite_database_is_migrated_with_its_data(tmp_path: Path) -> None:
    """Version 3 -> 4: every item kept, its length stored, searches rank as in memory."""
    path, clock = tmp_path / "old.sqlite3", FakeClock()
    build_sqlite_v3(path, clock)
    reference = _reference(clock)
    with SQLiteStore(path, clock=clock) as store:
        for tenant, namespace, key, text in ITEMS:
            item = store.get(tenant, namespace, key)
            assert item is not None and item.text == text
        for tenant in ("acme", "globex"):
            for scope in SCOPES:
                for query in QUERIES:
                    expected = _ranking(reference, tenant, scope, query)
                    assert _ranking(store, tenant, scope, query) == expected
        assert [h.item.key for h in store.search("acme", query="café")] == ["b2"]
        store.put("acme", ("user", "bob"), "b1", "now about tea only")  # re-indexed on update
        assert [h.item.key for h in store.search("acme", ("user", "bob"), query="coffee")] == []
    conn = sqlite3.connect(path)
    try:
        assert conn.execute(lite.READ_VERSION).fetchone() == (len(lite.MIGRATIONS),)
        lengths = dict(conn.execute("SELECT key, doc_len FROM memories"))
        expected = {key: len(indexed_terms(text)) for _, _, key, text in ITEMS}
        assert lengths == {**expected, "b1": len(indexed_terms("now about tea only"))}
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert "memories_scope" in indexes
        assert conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    finally:
        conn.close()


def test_a_migrated_sqlite_database_opens_again_unchanged(tmp_path: Path) -> None:
    """Migration 4 runs once; a second open finds the same items and lengths."""
    path, clock = tmp_path / "old.sqlite3", FakeClock()
    build_sqlite_v3(path, clock)
    SQLiteStore(path, clock=clock).close()
    with SQLiteStore(path, clock=clock) as store:
        assert [h.item.key for h in store.search("acme", query="coffee")] == ["a2", "a1", "b1"]


# --- PostgreSQL 6 -> 7 ---------------------------------------------------------------------------


@pytest.fixture
def schema(postgres_url: str) -> Iterator[str]:
    name = f"migrate_{uuid.uuid4().hex}"
    yield name
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(name)))


@pytest.mark.postgres
def test_a_version_6_postgres_schema_is_migrated_with_its_data(
    postgres_url: str, schema: str
) -> None:
    """Version 6 -> 7: every item kept, tenant totals filled, searches rank as in memory."""
    clock = FakeClock()
    build_postgres_at(postgres_url, schema, 6, ITEMS, clock)
    reference = _reference(clock)
    with PostgresStore(postgres_url, schema=schema, clock=clock) as store:
        for tenant, namespace, key, text in ITEMS:
            item = store.get(tenant, namespace, key)
            assert item is not None and item.text == text
        for tenant in ("acme", "globex"):
            for scope in SCOPES:
                for query in QUERIES:
                    expected = _ranking(reference, tenant, scope, query)
                    assert _ranking(store, tenant, scope, query) == expected
    with psycopg.connect(postgres_url) as conn:
        s = pgsql.Identifier(schema)
        version = conn.execute(pgsql.SQL("SELECT max(version) FROM {}.schema_version").format(s))
        assert version.fetchone() == (len(pq.MIGRATIONS),)
        totals = conn.execute(
            pgsql.SQL(
                "SELECT tenant, sum(items), sum(length) FROM {}.tenant_totals GROUP BY tenant"
            ).format(s)
        ).fetchall()
    lengths: dict[str, tuple[int, int]] = {}
    for tenant, _, _, text in ITEMS:
        items, length = lengths.get(tenant, (0, 0))
        lengths[tenant] = (items + 1, length + len(indexed_terms(text)))
    assert {tenant: (items, length) for tenant, items, length in totals} == lengths
