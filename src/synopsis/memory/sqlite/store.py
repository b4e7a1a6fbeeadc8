"""The SQLite backend: the embedded default (stdlib ``sqlite3``, nothing to set up).

One connection per store, guarded by a lock; WAL journal, a busy timeout and foreign keys.
Several processes may write one file: a write waits for the others (``busy_timeout`` per
attempt), and a database still locked after that is retried, with jittered backoff, until
``lock_timeout`` seconds have passed; only then does the write fail, with nothing written.
The schema is versioned (``synopsis_schema``) and migrated on open; a database written by a
newer synopsis raises :class:`MigrationError`. Keyword recall uses FTS5 over pre-segmented
CJK/English terms, so one- and two-character Chinese queries work on SQLite 3.40, and ranks
with BM25 over the searched scope, as every backend does (see :mod:`.sql`).

Vector and hybrid search embed the query and score cosine similarity in Python over every
item in the tenant and prefix that has a vector. That is fine up to some tens of thousands of
items per search scope. There is no vector index: the stdlib ``sqlite3`` of the supported
Pythons cannot load extensions (``sqlite-vec``), and no wheel that could is a dependency.

:class:`AsyncSQLiteStore` runs the same code on a worker thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from synopsis._flow import drive
from synopsis._sql import sqlite as lite
from synopsis.errors import ConfigError, MigrationError, StoreError
from synopsis.memory import _operations as ops
from synopsis.memory import _types
from synopsis.memory._checks import (
    MAX_LIMIT,
    PutRequest,
    SearchRequest,
    hit_order,
    page_namespaces,
    stored_item,
    summary_save_action,
    to_datetime,
    to_expiry,
)
from synopsis.memory._guards import Claim, Guard
from synopsis.memory._identity import embedder_identity
from synopsis.memory._sql_rows import read_outbox_entry, read_summary
from synopsis.memory.ranking import indexed_terms, pack_vector
from synopsis.memory.sqlite import reembed as vsql
from synopsis.memory.sqlite import sql, writes

__all__ = ["AsyncSQLiteStore", "SQLiteStore"]

T = TypeVar("T")
_Row = tuple[Any, ...]
#: A keyword search reads every item of a scope this small instead of asking the FTS5 index.
SCAN_SCOPE = 4_000


def _is_locked(exc: BaseException) -> bool:
    """Whether ``exc`` says another connection holds the database (SQLITE_BUSY or LOCKED)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.OperationalError) and code is not None and code & 0xFF in (5, 6)


def _patiently(work: Callable[[], T], lock_timeout: float) -> T:
    """``work()``, retried while the database is locked, for up to ``lock_timeout`` seconds.

    Only call this with work that changes nothing before it can be locked out (taking the
    write lock, setting the journal mode), so running it again is always correct.
    """
    retrying = Retrying(
        retry=retry_if_exception(_is_locked),
        stop=stop_after_delay(lock_timeout),
        wait=wait_random_exponential(multiplier=0.02, max=1.0),
        reraise=True,
    )
    try:
        return retrying(work)
    except sqlite3.OperationalError as exc:
        if not _is_locked(exc):
            raise
        message = f"{exc} (still locked by other writers after {lock_timeout:g} s of retries)"
        raise sqlite3.OperationalError(message) from exc


def _begin(conn: sqlite3.Connection, lock_timeout: float) -> None:
    """Start a write transaction, waiting (bounded) for the other writers to finish."""
    _patiently(lambda: conn.execute("BEGIN IMMEDIATE"), lock_timeout)


def _connect(
    path: str | os.PathLike[str], busy_timeout: float, lock_timeout: float
) -> sqlite3.Connection:
    with lite.translated("open the database"):
        conn = sqlite3.connect(
            path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            for pragma in sql.PRAGMAS:  # turning WAL on can find the file locked
                _patiently(functools.partial(conn.execute, pragma), lock_timeout)
        except BaseException:
            conn.close()
            raise
    return conn


def _migrate(conn: sqlite3.Connection, lock_timeout: float) -> None:
    """Bring the schema to the newest version, in one transaction; idempotent."""
    try:
        with lite.transaction(conn, lambda: _begin(conn, lock_timeout)):
            conn.execute(sql.CREATE_VERSION_TABLE)
            current = conn.execute(sql.READ_VERSION).fetchone()[0] or 0
            if current > len(sql.MIGRATIONS):
                raise MigrationError(
                    f"database schema version {current} is newer than this code knows "
                    f"({len(sql.MIGRATIONS)}); upgrade synopsis"
                )
            for version in range(current + 1, len(sql.MIGRATIONS) + 1):
                for statement in sql.MIGRATIONS[version - 1]:
                    conn.execute(statement)
                conn.execute(sql.WRITE_VERSION, (version,))
    except sqlite3.Error as exc:
        raise MigrationError(f"could not migrate the database schema: {exc}") from exc


def _check_timeout(seconds: object, name: str) -> float:
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not 0 <= seconds < math.inf
    ):
        raise ConfigError(f"{name} must be a finite number of seconds >= 0")
    return float(seconds)


def _item(tenant: str, row: _Row) -> _types.MemoryItem:
    _, path, key, text, kind, tags, created, updated, expires, context = row[:10]
    return _types.MemoryItem(
        tenant=tenant,
        namespace=sql.decode_path(path),
        key=key,
        text=text,
        kind=kind,
        tags=json.loads(tags),
        created_at=to_datetime(created),
        updated_at=to_datetime(updated),
        expires_at=to_expiry(expires),
        context=context,
    )


@contextmanager
def _snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """Run the enclosed reads in one read transaction, so they see one state of the file."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def _keyword(
    conn: sqlite3.Connection, request: SearchRequest, now: float, *, limit: int, offset: int
) -> list[tuple[_Row, float]]:
    """A page of keyword hits (memory rows), best first, each with its BM25 score.

    BM25's statistics describe the search's scope (see :mod:`synopsis.memory.sqlite.sql`).
    The candidates are the scope's items when the scope holds at most ``SCAN_SCOPE`` items
    and no fewer than the query terms' postings in the whole table; else the FTS5 match.
    """
    stats = sql.scope_stats(request, now)
    size, length = conn.execute(stats.text, stats.params).fetchone()
    if not size:
        return []
    statement = sql.keyword_page(
        request,
        now,
        scope_size=size,
        scope_length=int(length),
        scan=scans_scope(conn, request.terms, size),
        limit=limit,
        offset=offset,
    )
    return [(row[:10], row[10]) for row in conn.execute(statement.text, statement.params)]


def scans_scope(conn: sqlite3.Connection, terms: Sequence[str], size: int) -> bool:
    """Whether to read a scope of ``size`` items whole rather than follow the terms' postings.

    Yes when the scope is small (``SCAN_SCOPE``) and the postings, counted over the whole
    table up to ``size``, are no fewer: a rare word's few postings are the cheaper path.
    """
    if size > SCAN_SCOPE:
        return False
    probe = sql.postings_probe(terms, size)
    return bool(conn.execute(probe.text, probe.params).fetchone()[0] >= size)


def _order(row: _Row, score: float | None) -> tuple[float, float, str, _types.Namespace]:
    return hit_order(score, row[7], row[2], sql.decode_path(row[1]))


class _Database:
    """The SQLite backend: one connection guarded by a lock (checked arguments only)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        clock: Callable[[], float] | None,
        busy_timeout: float,
        lock_timeout: float,
    ) -> None:
        self._clock = clock or time.time
        self._lock = threading.RLock()
        self._lock_timeout = _check_timeout(lock_timeout, "lock_timeout")
        conn = _connect(path, _check_timeout(busy_timeout, "busy_timeout"), lock_timeout)
        try:
            _migrate(conn, lock_timeout)
        except BaseException:
            conn.close()
            raise
        self._conn: sqlite3.Connection | None = conn

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            with lite.translated("close the database"):
                conn.close()

    # --- plumbing --------------------------------------------------------------------------

    @contextmanager
    def _reading(self, action: str) -> Iterator[sqlite3.Connection]:
        with self._lock, lite.translated(action):
            if self._conn is None:
                raise StoreError("the store is closed")
            yield self._conn

    @contextmanager
    def _writing(self, action: str) -> Iterator[sqlite3.Connection]:
        with (
            self._reading(action) as conn,
            lite.transaction(conn, lambda: _begin(conn, self._lock_timeout)),
        ):
            yield conn

    def _fetch(self, statement: sql.Statement, action: str) -> list[_Row]:
        with self._reading(action) as conn:
            return conn.execute(statement.text, statement.params).fetchall()

    # --- memories --------------------------------------------------------------------------

    @ops.stepless
    def put(
        self, request: PutRequest, vector: ops.Vector | None, embedder_id: str | None
    ) -> _types.MemoryItem:
        return self._put(request, vector, None, embedder_id)

    @ops.stepless
    def guarded_put(
        self, request: PutRequest, vector: ops.Vector | None, guard: Guard, embedder_id: str | None
    ) -> _types.MemoryItem:
        return self._put(request, vector, guard, embedder_id)

    def _put(
        self,
        request: PutRequest,
        vector: ops.Vector | None,
        guard: Guard | None,
        embedder_id: str | None,
    ) -> _types.MemoryItem:
        terms = indexed_terms(request.text, request.context)
        with self._writing("store a memory") as conn:
            _check_guard(conn, guard)
            now = self._clock()
            upsert = sql.upsert_memory(request, terms, now)
            memory_id, created = conn.execute(upsert.text, upsert.params).fetchall()[0]
            follow = (
                sql.delete_vector(memory_id)
                if vector is None
                else sql.upsert_vector(memory_id, pack_vector(vector), embedder_id)
            )
            lite.execute(conn, follow)
            # Built before the commit: should it fail, nothing is left behind.
            return stored_item(request, created=created, now=now)

    @ops.stepless
    def put_many(
        self, requests: list[PutRequest], vectors: list[ops.Vector] | None, embedder_id: str | None
    ) -> list[_types.MemoryItem]:
        terms = [indexed_terms(r.text, r.context) for r in requests]
        with self._writing("store memories") as conn:
            now = self._clock()
            written = writes.upsert_batch(conn, requests, terms, now)
            writes.write_vectors(conn, [i for i, _ in written], vectors, embedder_id)
            pairs = zip(requests, written, strict=True)
            return [stored_item(r, created=c, now=now) for r, (_, c) in pairs]

    @ops.stepless
    def bulk_load(
        self, requests: list[PutRequest], vectors: list[ops.Vector] | None, embedder_id: str | None
    ) -> int:
        terms = [indexed_terms(r.text, r.context) for r in requests]
        with self._writing("load memories") as conn:
            return writes.bulk_load(conn, requests, terms, vectors, embedder_id, self._clock())

    @ops.stepless
    def get(self, tenant: str, namespace: _types.Namespace, key: str) -> _types.MemoryItem | None:
        statement = sql.select_memory(tenant, namespace, key, self._clock())
        rows = self._fetch(statement, "read a memory")
        return _item(tenant, rows[0]) if rows else None

    @ops.stepless
    def delete(self, tenant: str, namespace: _types.Namespace, key: str) -> bool:
        with self._writing("delete a memory") as conn:
            statement = sql.delete_memory(tenant, namespace, key, self._clock())
            rows = conn.execute(statement.text, statement.params).fetchall()
        return bool(rows and rows[0][0])

    @ops.stepless
    def search(
        self, request: SearchRequest, query_vector: ops.Vector | None, embedder_id: str | None
    ) -> list[_types.SearchHit]:
        now = self._clock()
        if request.query is None:
            rows = self._fetch(sql.search_recent(request, now), "search memories")
            return [_types.SearchHit(item=_item(request.tenant, row), score=None) for row in rows]
        if request.mode == "keyword":
            with self._reading("search memories") as conn, _snapshot(conn):
                page = _keyword(conn, request, now, limit=request.limit, offset=request.offset)
            return [_types.SearchHit(item=_item(request.tenant, r), score=s) for r, s in page]
        assert query_vector is not None
        return self._search_vectors(request, now, query_vector, embedder_id)

    def _search_vectors(
        self, request: SearchRequest, now: float, query_vector: ops.Vector, embedder_id: str | None
    ) -> list[_types.SearchHit]:
        with self._reading("search memories") as conn, _snapshot(conn):
            statement = sql.search_vectors(request, now, embedder_id)
            vector_rows = conn.execute(statement.text, statement.params).fetchall()
            keyword_page: list[tuple[_Row, float]] = []
            if request.mode == "hybrid":
                keyword_page = _keyword(conn, request, now, limit=MAX_LIMIT, offset=0)
        rows = {row[0]: row for row in (*vector_rows, *(row for row, _ in keyword_page))}
        vector_rows.sort(key=lambda row: _order(row, None))
        candidates = [(row[0], bytes(row[10])) for row in vector_rows]
        keyword = None if request.mode == "vector" else [(r[0], score) for r, score in keyword_page]
        scores = ops.vector_scores(query_vector, candidates, keyword)
        ranked = sorted(scores, key=lambda ident: _order(rows[ident], scores[ident]))
        page = ranked[request.offset : request.offset + request.limit]
        return [
            _types.SearchHit(item=_item(request.tenant, rows[i]), score=scores[i]) for i in page
        ]

    @ops.stepless
    def list_namespaces(
        self, tenant: str, prefix: _types.Namespace, max_depth: int | None, limit: int, offset: int
    ) -> list[_types.Namespace]:
        rows = self._fetch(sql.list_paths(tenant, prefix, self._clock()), "list namespaces")
        namespaces = [sql.decode_path(row[0]) for row in rows]
        return page_namespaces(namespaces, max_depth=max_depth, limit=limit, offset=offset)

    @ops.stepless
    def delete_user(self, tenant: str, user_id: str) -> int:
        with self._writing("delete a user") as conn:
            statement = sql.delete_prefix(tenant, ("user", user_id))
            removed = conn.execute(statement.text, statement.params).rowcount
            return removed + _delete_summaries(conn, tenant, user_id)

    @ops.stepless
    def deletion_generation(self, tenant: str, user_id: str) -> int:
        rows = self._fetch(sql.select_generation(tenant, user_id), "read a user's generation")
        return int(rows[0][0])

    @ops.stepless
    def sweep_expired(self) -> int:
        with self._writing("sweep expired memories") as conn:
            statement = sql.sweep_expired(self._clock())
            return conn.execute(statement.text, statement.params).rowcount

    @ops.stepless
    def count_unembedded(self, tenant: str, embedder_id: str | None) -> int:
        statement = vsql.sqlite_count_unembedded(tenant, self._clock(), embedder_id)
        return int(self._fetch(statement, "count memories")[0][0])

    @ops.stepless
    def unembedded(self, tenant: str, limit: int, embedder_id: str) -> list[ops.Unembedded]:
        statement = vsql.sqlite_unembedded(tenant, self._clock(), limit, embedder_id)
        rows = self._fetch(statement, "read memories without vectors")
        return [(sql.decode_path(path), key, text) for path, key, text in rows]

    @ops.stepless
    def set_vectors(
        self,
        tenant: str,
        rows: list[tuple[_types.Namespace, str, str, ops.Vector]],
        embedder_id: str,
    ) -> int:
        packed = [(ns, key, text, pack_vector(vector)) for ns, key, text, vector in rows]
        batch = vsql.sqlite_set_vectors(tenant, packed, embedder_id)
        with self._writing("store vectors") as conn:
            return conn.executemany(batch.text, batch.many or ()).rowcount

    @ops.stepless
    def forget_vectors(self, tenant: str) -> int:
        statement = vsql.sqlite_forget_vectors(tenant)
        with self._writing("forget vectors") as conn:
            return conn.execute(statement.text, statement.params).rowcount

    @ops.stepless
    def adopt_vectors(self, tenant: str, embedder_id: str) -> int:
        statement = vsql.sqlite_adopt_vectors(tenant, embedder_id)
        with self._writing("adopt vectors") as conn:
            return conn.execute(statement.text, statement.params).rowcount

    # --- summaries -------------------------------------------------------------------------

    @ops.stepless
    def save_summary(
        self, summary: _types.SessionSummary, guard: Guard | None
    ) -> _types.SessionSummary:
        session = (summary.tenant, summary.user_id, summary.session_id)
        with self._writing("save a summary") as conn:
            _check_guard(conn, guard)
            statement = sql.select_summary(*session, summary.version)
            found = conn.execute(statement.text, statement.params).fetchone()
            existing = None if found is None else read_summary(found)
            statement = sql.select_latest_summary(*session)
            newest = conn.execute(statement.text, statement.params).fetchone()
            latest = None if newest is None else read_summary(newest)
            if summary_save_action(summary, existing=existing, latest=latest) == "noop":
                assert existing is not None
                return existing
            now = self._clock()
            created = summary.created_at.timestamp() if summary.created_at else now
            for statement in (
                sql.insert_summary(summary, created),
                sql.insert_outbox(summary, now),
            ):
                conn.execute(statement.text, statement.params)
        return replace(summary, created_at=to_datetime(created))

    @ops.stepless
    def latest_summary(
        self, tenant: str, user_id: str, session_id: str
    ) -> _types.SessionSummary | None:
        statement = sql.select_latest_summary(tenant, user_id, session_id)
        rows = self._fetch(statement, "read a summary")
        return read_summary(rows[0]) if rows else None

    @ops.stepless
    def summary_history(
        self, tenant: str, user_id: str, session_id: str
    ) -> list[_types.SessionSummary]:
        statement = sql.select_summary_history(tenant, user_id, session_id)
        return [read_summary(row) for row in self._fetch(statement, "read summaries")]

    @ops.stepless
    def pending_outbox(self, tenant: str | None, limit: int) -> list[_types.OutboxEntry]:
        rows = self._fetch(sql.select_pending_outbox(tenant, limit), "read the outbox")
        return [read_outbox_entry(row) for row in rows]

    @ops.stepless
    def complete_outbox(self, tenant: str, user_id: str, session_id: str, version: int) -> None:
        with self._writing("complete an outbox entry") as conn:
            statement = sql.complete_outbox(tenant, user_id, session_id, version, self._clock())
            conn.execute(statement.text, statement.params)

    @ops.stepless
    def fail_outbox(self, tenant: str, user_id: str, session_id: str, version: int) -> int:
        statement = sql.fail_outbox(tenant, user_id, session_id, version)
        with self._writing("record an outbox failure") as conn:
            rows = conn.execute(statement.text, statement.params).fetchall()
        return int(rows[0][0]) if rows else 0

    @ops.stepless
    def delete_user_summaries(self, tenant: str, user_id: str) -> int:
        with self._writing("delete summaries") as conn:
            return _delete_summaries(conn, tenant, user_id)

    @ops.stepless
    def claim_summary_job(self, claim: Claim) -> bool:
        with self._writing("claim a summary job") as conn:
            statement = sql.claim_job(claim, self._clock())
            return bool(conn.execute(statement.text, statement.params).fetchall())

    @ops.stepless
    def release_summary_job(self, tenant: str, user_id: str, session_id: str, owner: str) -> bool:
        statement = sql.release_job(tenant, user_id, session_id, owner)
        with self._writing("release a summary job") as conn:
            return conn.execute(statement.text, statement.params).rowcount > 0


def _check_guard(conn: sqlite3.Connection, guard: Guard | None) -> None:
    """Inside a write transaction: raise UserDeleted unless ``guard`` (if any) holds."""
    if guard is None:
        return
    statement = sql.select_generation(guard.tenant, guard.user_id)
    refused = guard.refused(conn.execute(statement.text, statement.params).fetchone()[0])
    if refused is not None:
        raise refused


def _delete_summaries(conn: sqlite3.Connection, tenant: str, user_id: str) -> int:
    """Inside a write transaction: move the user's generation, then delete the user's
    summaries (their outbox entries cascade) and claims; return how many summaries."""
    for done in (sql.bump_generation(tenant, user_id), sql.delete_user_claims(tenant, user_id)):
        conn.execute(done.text, done.params)
    statement = sql.delete_user_summaries(tenant, user_id)
    return conn.execute(statement.text, statement.params).rowcount


class _SQLiteStores(ops.StoreOperations):
    """What both SQLite stores share: the constructor."""

    _backend: _Database

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        clock: Callable[[], float] | None = None,
        embedder: _types.Embedder | None = None,
        embedder_id: str | None = None,
        busy_timeout: float = 5.0,
        lock_timeout: float = 60.0,
    ) -> None:
        identity = embedder_identity(embedder, embedder_id)  # checked before the file is opened
        super().__init__(_Database(path, clock, busy_timeout, lock_timeout), embedder, identity)


class SQLiteStore(ops.SyncDriver, _SQLiteStores):
    """A :class:`MemoryStore` and :class:`SummaryStore` in one SQLite database.

    ``path`` is a file path or ``":memory:"``; ``clock`` returns epoch seconds (default
    ``time.time``); ``embedder`` enables the ``vector`` and ``hybrid`` search modes, and
    ``embedder_id`` overrides the identity its vectors are stored with (see
    :attr:`embedder_id`); ``busy_timeout`` is how many seconds SQLite waits for another
    writer before it reports the database locked, and ``lock_timeout`` how many seconds in
    all a call keeps retrying a locked database (jittered backoff) before it raises
    StoreError, having written nothing.
    """

    def close(self) -> None:
        """Close the connection; later calls raise StoreError. Closing twice is fine."""
        self._backend.close()


class AsyncSQLiteStore(ops.AsyncDriver, _SQLiteStores):
    """The async twin of :class:`SQLiteStore`: the same code, run on a worker thread.

    The constructor opens (and migrates) the database synchronously, like ``sqlite3.connect``.
    """

    async def _run(self, start: ops.Start[T], name: str) -> T:
        # The whole operation, embedding included, runs where sqlite3 may block: a worker thread.
        # The backend has no steps of its own, so every step is an Embed.
        embed = functools.partial(ops.embed, self._embedder)
        return await asyncio.to_thread(lambda: drive(start(), embed))

    async def aclose(self) -> None:
        """See :meth:`SQLiteStore.close`."""
        await asyncio.to_thread(self._backend.close)
