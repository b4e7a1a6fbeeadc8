"""Benchmark what a kind filter costs a per-user search: ``exclude_kinds=TRANSCRIPT_KINDS``.

Session recall and ``build_context`` search a user's memories with the transcript kinds left
out (``synopsis.memory.TRANSCRIPT_KINDS``), so BM25 counts the scope without them. This
measures per-user keyword search with and without that filter on the synthetic data of
``bench_store_scale.py`` (same generator, same seed, same query kinds), in one run.

Run ``python bench/bench_kind_filter.py --size 1000000`` (``--backends sqlite,postgres``;
PostgreSQL needs ``--postgres-url`` or ``SYNOPSIS_TEST_POSTGRES_URL``). Each query runs once
plain and once filtered, each on a different user, so neither side finds pages the other just
read; the order alternates. The two sides return the same hits and scores here (the data has
no transcript kinds), which is checked. ``--index-with-kind`` (SQLite) measures again after
rebuilding the ``memories_scope`` index with ``kind`` in it: what a schema change would buy.
Prints a markdown table on stdout and progress on stderr.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store_scale import (
    MAIN_TENANT,
    USERS,
    Query,
    log,
    make_corpus,
    make_queries,
    percentile,
)

from synopsis.memory import TRANSCRIPT_KINDS

Timings = tuple[list[float], list[float]]


def _other_user(prefix: tuple[str, ...]) -> tuple[str, ...]:
    return ("user", f"u{(int(prefix[1][1:]) + USERS // 2) % USERS}")


def measure(store: Any, queries: Sequence[Query]) -> Timings:
    """Seconds per query, plain and with the transcript kinds left out."""

    def timed(query: Query, prefix: tuple[str, ...], **options: Any) -> float:
        start = time.perf_counter()
        store.search(MAIN_TENANT, prefix, query=query.text, limit=10, **options)
        return time.perf_counter() - start

    for query in queries[:50]:  # warm-up, and the filter changes nothing on this data
        plain = store.search(MAIN_TENANT, query.prefix, query=query.text, limit=10)
        kept = store.search(
            MAIN_TENANT, query.prefix, query=query.text, limit=10, exclude_kinds=TRANSCRIPT_KINDS
        )
        assert [(h.item.key, h.score) for h in plain] == [(h.item.key, h.score) for h in kept]
    plain_times, filtered_times = [], []
    for index, query in enumerate(queries):
        mine, other = query.prefix, _other_user(query.prefix)
        first, second = (mine, other) if (index // 4) % 2 else (other, mine)
        plain_times.append(timed(query, first))
        filtered_times.append(timed(query, second, exclude_kinds=TRANSCRIPT_KINDS))
    return plain_times, filtered_times


def row(label: str, timings: Timings) -> str:
    plain, filtered = ([percentile(t, 0.5) * 1000, percentile(t, 0.95) * 1000] for t in timings)
    ratio = filtered[1] / plain[1]
    cells = [f"{value:.1f}" for value in (*plain, *filtered)]
    return f"| {label} | " + " | ".join(cells) + f" | {ratio:.2f} |"


def _sqlite(folder: Path) -> tuple[Any, Callable[[], None]]:
    from synopsis.memory.sqlite import SQLiteStore

    path = folder / "kinds.sqlite3"

    def add_kind_to_index() -> None:
        with sqlite3.connect(path) as conn:
            conn.execute("DROP INDEX memories_scope")
            conn.execute(
                "CREATE INDEX memories_scope ON memories"
                " (tenant, path, expires_at, doc_len, updated_at, key, kind, terms)"
            )

    return SQLiteStore(path), add_kind_to_index


def _postgres(url: str) -> tuple[Any, Callable[[], None]]:
    import psycopg

    from synopsis.memory.postgres import PostgresStore

    schema = f"bench_kinds_{uuid.uuid4().hex[:8]}"
    store = PostgresStore(url, schema=schema, max_size=2)
    original_close = store.close

    def close() -> None:
        original_close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    def analyze() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"VACUUM ANALYZE {schema}.memories")

    store.close = close  # type: ignore[method-assign]
    return store, analyze


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--postgres-url", default=os.environ.get("SYNOPSIS_TEST_POSTGRES_URL"))
    parser.add_argument("--queries", type=int, default=400, help="per-user queries")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--index-with-kind", action="store_true", help="SQLite: measure again")
    args = parser.parse_args(argv)
    log(f"generating {args.size:,} memories")
    corpus = make_corpus(args.size, seed=args.seed, batch=1_000)
    every = make_queries(corpus, per_scope=args.queries, seed=args.seed)
    queries = [query for query in every if query.scope == "user"]
    print(f"Per-user keyword search, top 10, {len(queries)} queries, {args.size:,} memories (ms)\n")
    print("| backend | plain p50 | plain p95 | filtered p50 | filtered p95 | p95 ratio |")
    print("|---|---|---|---|---|---|")
    for backend in args.backends.split(","):
        if backend == "postgres" and not args.postgres_url:
            log("PostgreSQL skipped: no --postgres-url and no SYNOPSIS_TEST_POSTGRES_URL")
            continue
        with tempfile.TemporaryDirectory(prefix="synopsis-bench-") as folder:
            store, after = (
                _sqlite(Path(folder)) if backend == "sqlite" else _postgres(args.postgres_url)
            )
            try:
                for tenant, items in corpus.batches:
                    store.put_many(tenant, items)
                if backend == "postgres":
                    after()
                log(f"{backend}: written, searching")
                print(row(backend, measure(store, queries)), flush=True)
                if backend == "sqlite" and args.index_with_kind:
                    after()
                    print(row("sqlite, kind in memories_scope", measure(store, queries)))
            finally:
                store.close()


if __name__ == "__main__":
    main()
