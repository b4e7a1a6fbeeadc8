"""Stores under contention and bad URLs: time to an error, and errors under concurrent writers.

Measures, with each store's default settings:

* how long ``PostgresStore(url)`` takes to fail on an unreachable server, a malformed URL and
  an unknown database, and how many lines the ``psycopg.pool`` logger printed meanwhile;
* eight threads writing ``put_many`` batches of the same keys in shuffled orders
  (PostgreSQL): wall time and how many calls failed;
* several processes importing batches into one new SQLite file: wall time and failures.

Usage: ``python bench/bench_store_contention.py [--postgres-url URL] [--quick]``. Without a
URL the PostgreSQL cases are skipped. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import random
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from synopsis.memory._types import NewMemory
from synopsis.memory.sqlite import SQLiteStore

T = "bench"


class _Counter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def _time_to_error(url: str) -> tuple[float, int, str]:
    """Seconds until ``PostgresStore(url)`` raised, pool log lines, and the error's first words."""
    from synopsis.memory.postgres import PostgresStore

    counter = _Counter()
    logger = logging.getLogger("psycopg.pool")
    logger.addHandler(counter)
    started = time.perf_counter()
    try:
        PostgresStore(url).close()
        outcome = "no error"
    except Exception as exc:  # whatever it is, it is the measured outcome
        outcome = f"{type(exc).__name__}: {str(exc)[:60]}"
    finally:
        logger.removeHandler(counter)
    return time.perf_counter() - started, counter.count, outcome


def _pg_shuffled_batches(url: str, keys: int, rounds: int) -> tuple[float, int]:
    from synopsis.memory.postgres import PostgresStore

    schema = f"bench_{uuid.uuid4().hex}"
    names = [f"k{i}" for i in range(keys)]
    errors = 0
    with PostgresStore(url, schema=schema, max_size=8) as store:

        def write(worker: int) -> None:
            nonlocal errors
            for round_ in range(rounds):
                order = random.Random(worker * 100 + round_).sample(names, len(names))
                try:
                    store.put_many(T, [NewMemory(("b",), key, f"{key} {worker}") for key in order])
                except Exception:  # counted: the case measures failures
                    errors += 1

        started = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(write, range(8)))
        elapsed = time.perf_counter() - started
    _drop(url, schema)
    return elapsed, errors


def _drop(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _importer(path: str, worker: int, batches: int, size: int) -> str:
    try:
        with SQLiteStore(path) as store:
            for batch in range(batches):
                items = [
                    NewMemory(("b",), f"{worker}-{batch}-{i}", "text " * 30) for i in range(size)
                ]
                store.put_many(T, items)
    except Exception as exc:  # reported as the outcome
        return repr(exc)
    return "ok"


def _sqlite_importers(processes: int, batches: int, size: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "shared.db")
        started = time.perf_counter()
        with multiprocessing.get_context("spawn").Pool(processes) as pool:
            outcomes = pool.starmap(
                _importer, [(path, worker, batches, size) for worker in range(processes)]
            )
        elapsed = time.perf_counter() - started
    return elapsed, sum(outcome != "ok" for outcome in outcomes)


def _row(case: str, seconds: float, failures: str, note: str = "") -> str:
    return f"| {case} | {seconds:.2f} | {failures} | {note} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres-url", default=None)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    args = parser.parse_args()
    rows = ["| case | seconds | failures / pool log lines | outcome |", "|---|---|---|---|"]
    cases: list[Callable[[], str]] = []
    if args.postgres_url:
        base = args.postgres_url.rsplit("/", 1)[0]
        for label, url in [
            ("unreachable server", "postgresql://postgres:secret@127.0.0.1:1/none"),
            ("malformed URL", "postgresql://postgres:secret@[::1/none"),
            ("unknown database", f"{base}/no_such_database_{uuid.uuid4().hex[:8]}"),
        ]:
            cases.append(lambda label=label, url=url: _row(label, *_error_row(url)))
        keys, rounds = (100, 1) if args.quick else (400, 3)
        cases.append(
            lambda: _row(
                f"postgres: 8 threads x {rounds} shuffled put_many of {keys} keys",
                *_fmt(_pg_shuffled_batches(args.postgres_url, keys, rounds)),
            )
        )
    processes, batches, size = (3, 2, 100) if args.quick else (6, 10, 500)
    cases.append(
        lambda: _row(
            f"sqlite: {processes} processes x {batches} batches of {size}",
            *_fmt(_sqlite_importers(processes, batches, size)),
        )
    )
    rows.extend(case() for case in cases)
    print("\n".join(rows))


def _error_row(url: str) -> tuple[float, str, str]:
    seconds, lines, outcome = _time_to_error(url)
    return seconds, f"{lines} log lines", outcome.replace("|", "/")


def _fmt(result: tuple[float, int]) -> tuple[float, str]:
    return result[0], f"{result[1]} failed"


if __name__ == "__main__":
    main()
