"""SQLite 5 -> 6 puts ``kind`` into the covering scope index: a user's search that leaves
transcript kinds out (what session recall does) counts its scope from the index alone, and the
migration keeps every memory and ranks as the in-memory store does."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from synopsis.memory import TRANSCRIPT_KINDS
from synopsis.memory._checks import prepare_search
from synopsis.memory.inmemory import InMemoryStore
from synopsis.memory.sqlite import SQLiteStore
from synopsis.memory.sqlite import sql as lite
from synopsis.testing import FakeClock

ITEMS = [
    (("user", "alice"), "a1", "Alice likes coffee and painting", "fact"),
    (
        ("user", "alice", "agents", "s1"),
        "t1",
        '{"role": "user", "content": "coffee?"}',
        "agents_item",
    ),
    (("user", "alice"), "a2", "coffee coffee, then more coffee", "summary"),
    (("user", "bob"), "b1", "Bob paints; he likes tea, not coffee", "fact"),
]
V4_SCOPE_INDEX = (
    "CREATE INDEX memories_scope ON memories"
    " (tenant, path, expires_at, doc_len, updated_at, key, terms)"
)


def _as_version_5(path: Path) -> None:
    """Put the database back where version 5 left it: the scope index without ``kind``."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("DROP INDEX memories_scope")
        conn.execute(V4_SCOPE_INDEX)
        conn.execute("DELETE FROM synopsis_schema WHERE version > 5")
    finally:
        conn.close()


def _filtered_count_plan(path: Path) -> str:
    request = prepare_search(
        "acme", ("user", "alice"), query="coffee", kind=None, tags=None, limit=10, offset=0,
        mode="keyword", embedder=None, exclude_kinds=TRANSCRIPT_KINDS,
    )  # fmt: skip
    statement = lite.scope_stats(request, 0.0)
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("EXPLAIN QUERY PLAN " + statement.sql, statement.params).fetchall()
    finally:
        conn.close()
    return " ".join(str(row[-1]) for row in rows)


def test_version_5_gains_kind_in_the_scope_index_and_keeps_its_memories(tmp_path: Path) -> None:
    clock, path = FakeClock(), tmp_path / "memories.sqlite3"
    reference = InMemoryStore(clock=clock)
    with SQLiteStore(path, clock=clock) as store:
        for namespace, key, text, kind in ITEMS:
            store.put("acme", namespace, key, text, kind=kind)
            reference.put("acme", namespace, key, text, kind=kind)
    _as_version_5(path)
    assert "COVERING INDEX memories_scope" not in _filtered_count_plan(path)

    with SQLiteStore(path, clock=clock) as store:
        for exclude in ((), TRANSCRIPT_KINDS):
            args = {"query": "coffee", "exclude_kinds": exclude}
            found = store.search("acme", ("user", "alice"), **args)
            expected = reference.search("acme", ("user", "alice"), **args)
            assert [(h.item.key, h.score) for h in found] == [
                (h.item.key, h.score) for h in expected
            ]
        assert len(store.search("acme", limit=100)) == len(ITEMS)
    assert "COVERING INDEX memories_scope" in _filtered_count_plan(path)
