"""Benchmark batched ingest: ``put_many`` of synthetic memories into an empty store.

Run ``python bench/bench_ingest.py`` (100,000 memories in batches of 1,000 on SQLite and on
PostgreSQL, from ``--postgres-url`` or ``SYNOPSIS_TEST_POSTGRES_URL``). The memories are
``bench_store_scale``'s (same seed, same batches). Prints a markdown table on stdout.

``--trees before=/path/to/old/src,after=src`` compares source trees of synopsis in the same
run: each measurement is a fresh subprocess with that tree first on ``PYTHONPATH``, and the
trees take turns (``--rounds`` of each), so a noisy machine slows every tree alike; the
table reports each tree's median and its ratio to the first tree. Wall time is the rate that
matters; the process's CPU time (Python plus SQLite, which runs in-process; PostgreSQL's
server time is not in it) shows where a change paid.

Each backend has its anchor in the same run, a plain full-text table fed the same batches
(one transaction per batch): ``sqlite-fts5`` (an FTS5 table of tenant, path, key, text) and
``postgres-tsvector`` (a table with a stored ``to_tsvector('simple', text)`` column and a GIN
index on it); the table's last column divides each rate by its backend's anchor.
``--vocabulary`` sets how many distinct English words the Zipf draws come from (default
20,000: on a small vocabulary even plain FTS5 is several times faster).

A backend name ending in ``-bulk`` (``sqlite-bulk``, ``postgres-bulk``, and the anchors
``sqlite-fts5-bulk``, ``postgres-tsvector-bulk``) writes the same items as one load per
tenant instead of batches: ``bulk_load`` on the stores, one transaction per tenant on the
anchors, each store compared with its anchor written the same way.

``--profile`` (one tree, one backend) prints a cProfile of one run instead.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def measure(
    backend: str, size: int, batch: int, seed: int, url: str | None, vocabulary: int = 20_000
) -> dict[str, float]:
    """Ingest ``size`` memories into a new store; wall and CPU seconds of the writes only."""
    sys.path.insert(0, str(HERE))
    from bench_store_scale import make_corpus

    corpus = make_corpus(size, seed=seed, batch=batch, vocabulary=vocabulary)
    bulk = backend.endswith("-bulk")
    batches = _by_tenant(corpus.batches) if bulk else corpus.batches
    with tempfile.TemporaryDirectory() as folder:
        store = _open(backend.removesuffix("-bulk"), folder, url)
        write = store.bulk_load if bulk else store.put_many  # type: ignore[attr-defined]
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            for tenant, items in batches:
                write(tenant, items)
            return {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}
        finally:
            store.close()  # type: ignore[attr-defined]


def _by_tenant(batches: Sequence[tuple[str, list[Any]]]) -> list[tuple[str, list[Any]]]:
    """The batches merged into one load per tenant (in order of first appearance)."""
    merged: dict[str, list[Any]] = {}
    for tenant, items in batches:
        merged.setdefault(tenant, []).extend(items)
    return list(merged.items())


def _open(backend: str, folder: str, url: str | None) -> object:
    if backend == "sqlite-fts5":
        return _PlainFts5(os.path.join(folder, "plain.sqlite3"))
    if backend == "postgres-tsvector":
        if url is None:
            raise SystemExit("postgres needs --postgres-url or SYNOPSIS_TEST_POSTGRES_URL")
        return _PlainTsvector(url, f"bench_plain_{os.getpid()}")
    if backend == "sqlite":
        from synopsis.memory.sqlite import SQLiteStore

        return SQLiteStore(os.path.join(folder, "ingest.sqlite3"))
    import psycopg

    from synopsis.memory.postgres import PostgresStore

    if url is None:
        raise SystemExit("postgres needs --postgres-url or SYNOPSIS_TEST_POSTGRES_URL")
    schema = f"bench_ingest_{os.getpid()}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return _Dropping(PostgresStore(url, schema=schema, max_size=2), url, schema)


class _PlainFts5:
    """The anchor on SQLite: a plain FTS5 table, one transaction per batch."""

    def __init__(self, path: str) -> None:
        import sqlite3

        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.execute(
            "CREATE VIRTUAL TABLE plain USING fts5"
            " (tenant UNINDEXED, path UNINDEXED, key UNINDEXED, text)"
        )

    def put_many(self, tenant: str, items: Sequence[Any]) -> None:
        rows = [(tenant, "/".join(i.namespace), i.key, i.text) for i in items]
        self.conn.execute("BEGIN")
        self.conn.executemany("INSERT INTO plain VALUES (?, ?, ?, ?)", rows)
        self.conn.execute("COMMIT")

    bulk_load = put_many

    def close(self) -> None:
        self.conn.close()


class _PlainTsvector:
    """The anchor on PostgreSQL: a stored tsvector column with a GIN index."""

    def __init__(self, url: str, schema: str) -> None:
        import psycopg

        self.url, self.schema = url, schema
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        self.conn.execute(f"CREATE SCHEMA {schema}")
        self.conn.execute(
            f"CREATE TABLE {schema}.plain (id bigserial PRIMARY KEY, tenant text NOT NULL,"
            " path text NOT NULL, key text NOT NULL, text text NOT NULL, tsv tsvector"
            " GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED)"
        )
        self.conn.execute(f"CREATE INDEX ON {schema}.plain USING GIN (tsv)")

    def put_many(self, tenant: str, items: Sequence[Any]) -> None:
        rows = [(tenant, "/".join(i.namespace), i.key, i.text) for i in items]
        with self.conn.transaction(), self.conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {self.schema}.plain (tenant, path, key, text)"
                " VALUES (%s, %s, %s, %s)",
                rows,
            )

    bulk_load = put_many

    def close(self) -> None:
        self.conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
        self.conn.close()


class _Dropping:
    """A PostgreSQL store whose schema is dropped when it is closed."""

    def __init__(self, store: object, url: str, schema: str) -> None:
        self.store, self.url, self.schema = store, url, schema

    def put_many(self, tenant: str, items: object) -> object:
        return self.store.put_many(tenant, items)  # type: ignore[attr-defined]

    def bulk_load(self, tenant: str, items: object) -> object:
        return self.store.bulk_load(tenant, items)  # type: ignore[attr-defined]

    def close(self) -> None:
        import psycopg

        self.store.close()  # type: ignore[attr-defined]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")


def run_child(tree: str, args: argparse.Namespace, backend: str) -> dict[str, float]:
    """One measurement in a fresh interpreter with ``tree`` first on the path."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    command = [
        sys.executable, __file__, "--child", backend, "--size", str(args.size),
        "--batch", str(args.batch), "--seed", str(args.seed),
        "--vocabulary", str(args.vocabulary),
    ]  # fmt: skip
    if args.postgres_url:
        command += ["--postgres-url", args.postgres_url]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


_ANCHORS = {
    "sqlite": "sqlite-fts5",
    "postgres": "postgres-tsvector",
    "sqlite-bulk": "sqlite-fts5-bulk",
    "postgres-bulk": "postgres-tsvector-bulk",
}


def table(results: dict[tuple[str, str], list[dict[str, float]]], args: argparse.Namespace) -> str:
    names = list(dict.fromkeys(name for _, name in results))
    lines = [
        "| backend | tree | memories/s (median) | wall µs/item | CPU µs/item | × first tree"
        " | × plain full-text table |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    walls = {key: statistics.median(r["wall"] for r in runs) for key, runs in results.items()}
    for backend in dict.fromkeys(backend for backend, _ in results):
        first = None
        for name in names:
            runs = results[(backend, name)]
            wall = walls[(backend, name)]
            cpu = statistics.median(r["cpu"] for r in runs)
            first = wall if first is None else first
            anchor = walls.get((_ANCHORS.get(backend, ""), name))
            versus = f"{anchor / wall:.2f}" if anchor else "(anchor)"
            lines.append(
                f"| {backend} | {name} | {args.size / wall:,.0f} | {wall / args.size * 1e6:.1f}"
                f" | {cpu / args.size * 1e6:.1f} | {first / wall:.2f} | {versus} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--vocabulary", type=int, default=20_000)
    parser.add_argument("--backends", default="sqlite-fts5,sqlite,postgres-tsvector,postgres")
    parser.add_argument("--postgres-url", default=os.environ.get("SYNOPSIS_TEST_POSTGRES_URL"))
    parser.add_argument("--trees", default="this=" + str(HERE.parent / "src"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        result = measure(
            args.child, args.size, args.batch, args.seed, args.postgres_url, args.vocabulary
        )
        print(json.dumps(result))
        return
    backends = [
        b for b in args.backends.split(",") if not b.startswith("postgres") or args.postgres_url
    ]
    trees = [pair.split("=", 1) for pair in args.trees.split(",")]
    if args.profile:
        _profile(trees[0][1], backends[0], args)
        return
    load = os.getloadavg()[0]
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for round_ in range(args.rounds):
        for backend in backends:
            for name, tree in trees:
                result = run_child(tree, args, backend)
                results.setdefault((backend, name), []).append(result)
                rate = args.size / result["wall"]
                print(f"round {round_ + 1} {backend} {name}: {rate:,.0f}/s", file=sys.stderr)
    print(f"{args.size:,} memories, put_many batches of {args.batch:,}, {args.rounds} rounds;"
          f" load average {load:.2f} before, {os.getloadavg()[0]:.2f} after\n")  # fmt: skip
    print(table(results, args))


def _profile(tree: str, backend: str, args: argparse.Namespace) -> None:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    code = (
        "import cProfile, pstats, sys; sys.argv = sys.argv[:1];"
        f"sys.path.insert(0, {str(HERE)!r}); import bench_ingest as b;"
        "p = cProfile.Profile(); p.enable();"
        f"b.measure({backend!r}, {args.size}, {args.batch}, {args.seed}, {args.postgres_url!r});"
        "p.disable(); pstats.Stats(p).sort_stats('tottime').print_stats(25)"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


if __name__ == "__main__":
    main()
