"""Tenant-wide keyword search on SQLite: ``SQLiteStore.search`` against a plain FTS5 ``bm25()``.

The anchor of issue 21, item 5 ("tenant-wide search on SQLite no slower than plain FTS5
``bm25()`` at p95"): ``bench_store_scale``'s corpus (same seed, a 20,000-word Zipf
vocabulary, ~20 % Chinese, 1,000 users) is written into a ``SQLiteStore`` and into a plain
FTS5 table of ``(tenant, path, text)`` in the same run; then the same tenant-wide queries
(a rare word, a common word, two words OR-ed) run on both, alternating, ten results each,
best BM25 first. Chinese phrases are left out: FTS5's default tokenizer does not split Chinese
text into characters, so the anchor would not find them.

Usage: ``bench_search_fts5.py [--size 50000] [--queries 150]``. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bench_store_scale import (
    MAIN_TENANT,
    OursSQLite,
    Query,
    make_corpus,
    make_queries,
    percentile,
)


class Fts5:
    """The anchor: one FTS5 table, BM25 by ``bm25()``, the tenant checked on each hit."""

    def __init__(self, folder: Path) -> None:
        self.conn = sqlite3.connect(folder / "fts5.sqlite3", isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(
            "CREATE VIRTUAL TABLE f USING fts5(tenant UNINDEXED, path UNINDEXED, text)"
        )

    def write(self, tenant: str, items: list) -> None:  # type: ignore[type-arg]
        rows = [(tenant, "/".join(i.namespace) + "/", i.text) for i in items]
        self.conn.execute("BEGIN")
        self.conn.executemany("INSERT INTO f (tenant, path, text) VALUES (?, ?, ?)", rows)
        self.conn.execute("COMMIT")

    def search(self, tenant: str, query: Query) -> int:
        match = " OR ".join(f'"{w}"' for w in query.likes)
        rows = self.conn.execute(
            "SELECT rowid FROM f WHERE f MATCH ? AND tenant = ? ORDER BY bm25(f) LIMIT 10",
            (match, tenant),
        ).fetchall()
        return len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=150)
    args = parser.parse_args()
    corpus = make_corpus(args.size, seed=7, batch=1_000)
    queries = [
        q for q in make_queries(corpus, per_scope=args.queries, seed=7)
        if q.scope == "tenant" and q.kind != "Chinese"
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        ours, anchor = OursSQLite(Path(tmp)), Fts5(Path(tmp))
        for tenant, items in corpus.batches:
            ours.write(tenant, items)
            anchor.write(tenant, items)
        times: dict[str, dict[str, list[float]]] = {"ours": {}, "fts5": {}}
        for query in queries[:6]:  # warm-up, untimed
            ours.search(MAIN_TENANT, query)
            anchor.search(MAIN_TENANT, query)
        for query in queries:
            for name, side in (("ours", ours), ("fts5", anchor)):
                started = time.perf_counter()
                side.search(MAIN_TENANT, query)
                spent = time.perf_counter() - started
                times[name].setdefault(query.kind, []).append(spent)
                times[name].setdefault("all", []).append(spent)
        ours.close()
    print(f"{args.size:,} memories, {len(queries)} tenant-wide queries, load average "
          f"{os.getloadavg()[0]:.1f}\n")  # fmt: skip
    print("| queries | SQLiteStore p50 | p95 | FTS5 bm25() p50 | p95 | p95 ours / FTS5 |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind in ("rare", "common", "two words", "all"):
        o, f = times["ours"][kind], times["fts5"][kind]
        print(f"| {kind} | {percentile(o, 0.5) * 1e3:.2f} ms | {percentile(o, 0.95) * 1e3:.2f} ms"
              f" | {percentile(f, 0.5) * 1e3:.2f} ms | {percentile(f, 0.95) * 1e3:.2f} ms"
              f" | {percentile(o, 0.95) / percentile(f, 0.95):.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
