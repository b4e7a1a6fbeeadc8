"""Stores under concurrent writers: no deadlock or lock error reaches the caller.

PostgreSQL: batches of the same keys in different orders, and puts racing deletes, against the
real server. SQLite: several processes writing one file, and a writer holding the lock longer
than ``busy_timeout``. Nothing here measures time; waits only give other writers their turn.
"""

from __future__ import annotations

import multiprocessing
import random
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from synopsis.errors import StoreError
from synopsis.memory._types import NewMemory
from synopsis.memory.postgres import PostgresStore
from synopsis.memory.sqlite import SQLiteStore

T = "tenant-a"
NS = ("user", "u1")


# --- PostgreSQL -------------------------------------------------------------------------------


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[PostgresStore]:
    """A store on a fresh schema with room for eight concurrent writers (dropped afterwards)."""
    schema = f"test_{uuid.uuid4().hex}"
    store = PostgresStore(postgres_url, schema=schema, max_size=8)
    yield store
    store.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _errors(work: Callable[[int], None], workers: int) -> list[str]:
    """Run ``work(0..workers-1)`` in threads that start together; the errors they raised."""
    barrier = threading.Barrier(workers)
    errors: list[str] = []

    def run(index: int) -> None:
        barrier.wait()
        try:
            work(index)
        except Exception as exc:  # every error counts; the test wants none
            errors.append(repr(exc))

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(run, range(workers)))
    return errors


@pytest.mark.postgres
def test_batches_of_the_same_keys_in_any_order_never_deadlock(pg_store: PostgresStore) -> None:
    """Eight writers put_many 400 shared keys, each batch shuffled: all succeed, one row a key."""
    keys = [f"k{i:03}" for i in range(400)]

    def write(worker: int) -> None:
        for round_ in range(3):
            order = random.Random(worker * 10 + round_).sample(keys, len(keys))
            pg_store.put_many(T, [NewMemory(NS, key, f"{key} by {worker}") for key in order])

    assert _errors(write, 8) == []
    hits = pg_store.search(T, limit=1000)
    assert sorted(hit.item.key for hit in hits) == keys
    assert all(hit.item.text.startswith(f"{hit.item.key} by ") for hit in hits)


@pytest.mark.postgres
def test_puts_racing_deletes_on_a_few_keys_never_fail(pg_store: PostgresStore) -> None:
    """Puts and deletes of three keys from eight threads all succeed and leave a sane state."""
    keys = ["a", "b", "c"]

    def churn(worker: int) -> None:
        rng = random.Random(worker)
        for step in range(250):
            key = rng.choice(keys)
            if rng.random() < 0.5:
                pg_store.put(T, NS, key, f"{key} {worker} {step}")
            else:
                pg_store.delete(T, NS, key)

    assert _errors(churn, 8) == []
    live = {key: pg_store.get(T, NS, key) for key in keys}
    found = {hit.item.key: hit.item for hit in pg_store.search(T, limit=10)}
    assert found == {key: item for key, item in live.items() if item is not None}


# --- SQLite -----------------------------------------------------------------------------------


def _import(path: str, worker: int, start: Barrier, results: Queue[tuple[int, str]]) -> None:
    """One importing process: opens the file with the others, then writes 4 batches of 300."""
    start.wait()
    try:
        with SQLiteStore(path, busy_timeout=0.01) as store:
            for batch in range(4):
                items = [
                    NewMemory(NS, f"w{worker}-b{batch}-{i}", f"memory {i} of worker {worker} " * 8)
                    for i in range(300)
                ]
                store.put_many(T, items)
    except Exception as exc:  # reported to the parent, which wants none
        results.put((worker, repr(exc)))
    else:
        results.put((worker, "ok"))


def test_several_processes_importing_into_one_file_all_succeed(tmp_path: Path) -> None:
    """Six processes open one new file together and write; none sees "database is locked"."""
    path, workers = str(tmp_path / "shared.db"), 6
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(workers), context.Queue()
    processes = [
        context.Process(target=_import, args=(path, worker, start, results))
        for worker in range(workers)
    ]
    for process in processes:
        process.start()
    outcomes = dict(results.get(timeout=300) for _ in processes)
    for process in processes:
        process.join()
    assert outcomes == dict.fromkeys(range(workers), "ok")
    with SQLiteStore(path) as store:
        assert len(store.search(T, limit=1000, offset=workers * 4 * 300 - 1000)) == 1000


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    """Another connection that has taken the write lock (release it with COMMIT)."""
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    return blocker


def test_a_writer_outlasting_busy_timeout_is_waited_for(tmp_path: Path) -> None:
    """A write finds the file locked past busy_timeout, retries, and lands once it is free."""
    path = tmp_path / "locked.db"
    with SQLiteStore(path, busy_timeout=0.05) as store:
        store.put(T, NS, "first", "x")
        with closing(_hold_write_lock(path)) as blocker:
            release = threading.Timer(0.3, blocker.execute, ("COMMIT",))
            release.start()
            item = store.put(T, NS, "k", "written after the wait")
            release.join()
        assert store.get(T, NS, "k") == item


def test_a_lock_held_past_lock_timeout_fails_saying_so_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """After lock_timeout of retries the write raises StoreError naming the lock; no row left."""
    path = tmp_path / "locked.db"
    with SQLiteStore(path, busy_timeout=0.01, lock_timeout=0.2) as store:
        with closing(_hold_write_lock(path)) as blocker:
            with pytest.raises(StoreError, match=r"locked.*retries"):
                store.put_many(T, [NewMemory(NS, "k", "never written")])
            blocker.execute("ROLLBACK")
        assert store.search(T) == []


def test_opening_a_file_another_writer_holds_waits_for_it(tmp_path: Path) -> None:
    """Opening (journal mode and migrations need the lock) also waits out a busy writer."""
    path = tmp_path / "locked.db"
    SQLiteStore(path).close()
    with closing(sqlite3.connect(path, isolation_level=None, check_same_thread=False)) as blocker:
        blocker.execute("BEGIN EXCLUSIVE")
        release = threading.Timer(0.3, blocker.execute, ("COMMIT",))
        release.start()
        with SQLiteStore(path, busy_timeout=0.05) as store:
            assert store.search(T) == []
        release.join()


# --- shared pure code under threads ------------------------------------------------------------


def test_terms_computed_in_many_threads_at_once_are_the_single_threaded_ones() -> None:
    """Stemming is safe to share: eight threads indexing new words get Snowball's own stems."""
    import snowballstemmer

    from synopsis.memory.ranking import document_terms

    words = [
        ["".join(random.Random(f"{worker}-{i}").choices("abcdefghijklmnop", k=9)) + "ing"
         for i in range(3000)]
        for worker in range(8)
    ]  # fmt: skip
    reference = snowballstemmer.stemmer("english")
    want = [[reference.stemWord(word) for word in group] for group in words]
    got: list[list[str]] = [[] for _ in words]

    def index(worker: int) -> None:
        got[worker] = [term for word in words[worker] for term in document_terms(word)]

    assert _errors(index, 8) == []
    assert got == want
