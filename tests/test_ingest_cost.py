"""``put_many`` issues a number of SQL statements that does not grow with the batch (up to a
chunk of rows per multi-row statement): counted on the real SQLite connection, never timed
(the timing is ``bench/bench_ingest.py``). On a7a6f03 and until this test, every item cost
a statement of its own (its vectors deleted or written one by one)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from synopsis.memory import NewMemory
from synopsis.memory.sqlite import SQLiteStore
from synopsis.testing import BigramEmbedder


class CountingConnection(sqlite3.Connection):
    """A real SQLite connection that counts the statements run through it (an
    ``executemany`` counts once per row: SQLite runs the statement that often)."""

    statements = 0

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        CountingConnection.statements += 1
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        rows = list(parameters)
        CountingConnection.statements += len(rows)
        return super().executemany(sql, rows)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> type[CountingConnection]:
    connect = sqlite3.connect

    def counting_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        return connect(*args, **kwargs, factory=CountingConnection)

    monkeypatch.setattr(sqlite3, "connect", counting_connect)
    return CountingConnection


def batch(size: int, tag: str) -> list[NewMemory]:
    return [
        NewMemory(("user", f"u{i % 7}"), f"{tag}{i}", f"note {i} about the parser and 解析器")
        for i in range(size)
    ]


@pytest.mark.parametrize("embedder", [None, BigramEmbedder()], ids=["keyword", "vectors"])
def test_put_many_issues_the_same_statements_for_10_and_400_items(
    tmp_path: Path, counting: type[CountingConnection], embedder: BigramEmbedder | None
) -> None:
    store = SQLiteStore(tmp_path / "m.sqlite3", embedder=embedder)
    try:
        issued = []
        for size, tag in ((10, "a"), (400, "b"), (10, "a")):  # the last one overwrites
            counting.statements = 0
            store.put_many("t", batch(size, tag))
            issued.append(counting.statements)
        assert issued[0] == issued[1] == issued[2] <= 8, issued
        assert len(store.search("t", ("user",), query="parser", limit=500)) == 410
    finally:
        store.close()


def traced(store: SQLiteStore, work: Any) -> list[str]:
    """Every statement SQLite starts while ``work()`` runs, trigger programs included (the
    trace reports each trigger a row fires as one more start of the statement); not FTS5's
    own statements on its shadow tables (``-- ...``, ``'main'.``), which follow the index's
    pages and its first use on the connection."""
    conn = store._backend._conn
    assert conn is not None
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        work()
    finally:
        conn.set_trace_callback(None)
    return [text for text in seen if not text.startswith("-- ") and "'main'." not in text]


@pytest.mark.parametrize("embedder", [None, BigramEmbedder()], ids=["keyword", "vectors"])
def test_bulk_load_runs_the_same_statements_for_10_and_400_items(
    tmp_path: Path, embedder: BigramEmbedder | None
) -> None:
    """A bulk load starts as many statements for 400 items as for 10 (no per-row trigger
    fires; the FTS5 rows and tenant totals are rebuilt by a fixed number of statements),
    whether it rebuilds the scope index (a load into an empty table) or not; put_many's
    triggers fire per row."""
    store = SQLiteStore(tmp_path / "m.sqlite3", embedder=embedder)
    try:
        counts = []
        for size, tag in ((10, "a"), (400, "b"), (10, "c"), (400, "d")):
            seen = traced(store, lambda s=size, t=tag: store.bulk_load("t", batch(s, t)))
            counts.append(len(seen))
        # 10 into an empty table and 400 into 10 rebuild the index; the others keep it.
        assert counts[0] == counts[1] <= 16, counts
        assert counts[2] == counts[3] == counts[0] - 2, counts
        rows = traced(store, lambda: store.put_many("t", batch(400, "e")))
        assert len(rows) > 400  # the per-row triggers
        assert len(store.search("t", ("user",), query="parser", limit=500)) == 500
    finally:
        store.close()


def statements_of(plan: Any) -> int:
    """How many statements a PostgreSQL plan sends (run without a database: every statement
    answers with the rows a chunk's upsert returns, none, which the bulk load never reads)."""
    sent = 0
    try:
        plan.send(None)
        while True:
            sent += 1
            plan.send([])
    except StopIteration:
        return sent


def test_postgres_bulk_load_sends_one_statement_per_5000_rows() -> None:
    """The PostgreSQL bulk load is one upsert per 5,000 rows (its statement-level triggers
    then fold the counters once per statement): 1 for 10 and for 5,000 items, 2 for 5,001."""
    from synopsis.memory._checks import prepare_put_many
    from synopsis.memory.postgres.plans import PostgresPlans

    plans = PostgresPlans("s", clock=lambda: 1.0)
    sent = [
        statements_of(plans.bulk_load(prepare_put_many("t", batch(size, "a")), None, None))
        for size in (10, 5_000, 5_001)
    ]
    assert sent == [1, 1, 2]
