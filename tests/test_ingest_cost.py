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
