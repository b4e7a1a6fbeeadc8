"""The SQLite backend: the embedded default (stdlib ``sqlite3``, nothing to set up).

One connection per store, guarded by a lock; WAL journal, a busy timeout and foreign keys.
The schema is versioned (``synopsis_schema``) and migrated on open; a database written by a
newer synopsis raises :class:`MigrationError`. Keyword recall uses FTS5 over pre-segmented
CJK/English terms, so one- and two-character Chinese queries work on SQLite 3.40.

Vector and hybrid search embed the query and score cosine similarity in Python over every
item in the tenant and prefix that has a vector. That is fine up to some tens of thousands of
items per search scope; beyond that, use a backend with a vector index.

:class:`AsyncSQLiteStore` runs the same code on a worker thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from types import TracebackType
from typing import Any, Self

from synopsis.errors import InvalidInput, MigrationError, StoreError
from synopsis.memory import _sql_sqlite as sql
from synopsis.memory._checks import (
    MAX_LIMIT,
    PutRequest,
    SearchRequest,
    check_embeddings,
    check_outbox_address,
    check_page,
    check_session,
    check_summary,
    check_tenant,
    check_user_id,
    hit_order,
    page_namespaces,
    prepare_address,
    prepare_prefix,
    prepare_put,
    prepare_put_many,
    prepare_search,
    query_embedder,
    stored_item,
    summary_save_action,
    to_datetime,
)
from synopsis.memory._types import (
    Embedder,
    MemoryItem,
    Namespace,
    NamespaceLike,
    NewMemory,
    OutboxEntry,
    SearchHit,
    SearchMode,
    SessionSummary,
)
from synopsis.memory.ranking import (
    document_terms,
    pack_vector,
    rank_by_vector,
    reciprocal_rank_fusion,
)

__all__ = ["AsyncSQLiteStore", "SQLiteStore"]

_Row = tuple[Any, ...]


@contextmanager
def _translated(action: str) -> Iterator[None]:
    """Turn driver errors into StoreError (the only place sqlite3 exceptions are seen)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreError(f"sqlite could not {action}: {exc}") from exc
    except OverflowError as exc:
        raise InvalidInput(f"a number is too large to store: {exc}") from exc


def _connect(path: str | os.PathLike[str], busy_timeout: float) -> sqlite3.Connection:
    with _translated("open the database"):
        conn = sqlite3.connect(
            path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            for pragma in sql.PRAGMAS:
                conn.execute(pragma)
        except BaseException:
            conn.close()
            raise
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring the schema to the newest version, in one transaction; idempotent."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
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
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise MigrationError(f"could not migrate the database schema: {exc}") from exc


def _item(tenant: str, row: _Row) -> MemoryItem:
    _, path, key, text, kind, tags, created, updated, expires = row[:9]
    return MemoryItem(
        tenant=tenant,
        namespace=sql.decode_path(path),
        key=key,
        text=text,
        kind=kind,
        tags=json.loads(tags),
        created_at=to_datetime(created),
        updated_at=to_datetime(updated),
        expires_at=None if expires is None else to_datetime(expires),
    )


def _upsert_batch(
    conn: sqlite3.Connection,
    requests: Sequence[PutRequest],
    terms: Sequence[Sequence[str]],
    now: float,
) -> list[tuple[int, float]]:
    """Upsert the rows (one ``executemany``); ``(id, created_at)`` of each, in order."""
    upsert = sql.upsert_memories(requests, terms, now)
    conn.executemany(upsert.sql, upsert.rows)
    select = sql.select_written(requests[0].tenant, [(row[1], row[2]) for row in upsert.rows])
    written: list[tuple[int, float]] = [(0, now)] * len(requests)
    for index, memory_id, created in conn.execute(select.sql, select.params):
        written[index] = (memory_id, created)
    return written


def _summary(row: _Row | None) -> SessionSummary | None:
    if row is None:
        return None
    tenant, user, session, version, text, start, end, model, digest, created = row[:10]
    return SessionSummary(
        tenant=tenant,
        user_id=user,
        session_id=session,
        version=version,
        text=text,
        covers_from=start,
        covers_to=end,
        model=model,
        content_hash=digest,
        created_at=to_datetime(created),
    )


def _order(row: _Row, score: float | None) -> tuple[float, float, str, Namespace]:
    return hit_order(score, row[7], row[2], sql.decode_path(row[1]))


class SQLiteStore:
    """A :class:`MemoryStore` and :class:`SummaryStore` in one SQLite database.

    ``path`` is a file path or ``":memory:"``; ``clock`` returns epoch seconds (default
    ``time.time``); ``embedder`` enables the ``vector`` and ``hybrid`` search modes;
    ``busy_timeout`` is how many seconds to wait for another writer.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        clock: Callable[[], float] | None = None,
        embedder: Embedder | None = None,
        busy_timeout: float = 5.0,
    ) -> None:
        self._clock = clock or time.time
        self._embedder = embedder
        self._lock = threading.RLock()
        conn = _connect(path, busy_timeout)
        try:
            _migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._conn: sqlite3.Connection | None = conn

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- plumbing --------------------------------------------------------------------------

    @contextmanager
    def _reading(self, action: str) -> Iterator[sqlite3.Connection]:
        with self._lock, _translated(action):
            if self._conn is None:
                raise StoreError("the store is closed")
            yield self._conn

    @contextmanager
    def _writing(self, action: str) -> Iterator[sqlite3.Connection]:
        with self._reading(action) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _fetch(self, statement: sql.Statement, action: str) -> list[_Row]:
        with self._reading(action) as conn:
            return conn.execute(statement.sql, statement.params).fetchall()

    def _embed(self, texts: list[str], *, queries: bool = False) -> list[tuple[float, ...]]:
        assert self._embedder is not None
        embed = query_embedder(self._embedder) if queries else self._embedder
        return check_embeddings(embed(texts), len(texts))

    # --- memories --------------------------------------------------------------------------

    def put(
        self,
        tenant: str,
        namespace: NamespaceLike,
        key: str,
        text: str,
        *,
        kind: str = "note",
        tags: Mapping[str, str] | None = None,
        ttl: float | None = None,
    ) -> MemoryItem:
        """Insert or replace an item; a replace keeps ``created_at``."""
        request = prepare_put(tenant, namespace, key, text, kind=kind, tags=tags, ttl=ttl)
        vector = self._embed([request.text])[0] if self._embedder else None
        terms = document_terms(request.text)
        with self._writing("store a memory") as conn:
            now = self._clock()
            expires = None if request.ttl is None else now + request.ttl
            upsert = sql.upsert_memory(
                tenant=request.tenant, namespace=request.namespace, key=request.key,
                text=request.text, kind=request.kind, tags=request.tags, terms=terms,
                now=now, expires_at=expires,
            )  # fmt: skip
            memory_id, created = conn.execute(upsert.sql, upsert.params).fetchall()[0]
            follow = (
                sql.delete_vector(memory_id)
                if vector is None
                else sql.upsert_vector(memory_id, pack_vector(vector))
            )
            conn.execute(follow.sql, follow.params)
        return stored_item(request, created=created, now=now)

    def put_many(self, tenant: str, items: Iterable[NewMemory]) -> list[MemoryItem]:
        """Put a batch in one transaction (see :meth:`MemoryStore.put_many`)."""
        requests = prepare_put_many(tenant, items)
        if not requests:
            return []
        vectors = self._embed([r.text for r in requests]) if self._embedder else None
        terms = [document_terms(r.text) for r in requests]
        with self._writing("store memories") as conn:
            now = self._clock()
            written = _upsert_batch(conn, requests, terms, now)
            ids = [memory_id for memory_id, _ in written]
            follow = (
                sql.delete_vectors(ids)
                if vectors is None
                else sql.upsert_vectors(list(zip(ids, map(pack_vector, vectors), strict=True)))
            )
            conn.executemany(follow.sql, follow.rows)
        return [
            stored_item(r, created=c, now=now) for r, (_, c) in zip(requests, written, strict=True)
        ]

    def get(self, tenant: str, namespace: NamespaceLike, key: str) -> MemoryItem | None:
        """The live item at this address, or None."""
        checked_tenant, checked_namespace, checked_key = prepare_address(tenant, namespace, key)
        statement = sql.select_memory(checked_tenant, checked_namespace, checked_key, self._clock())
        rows = self._fetch(statement, "read a memory")
        return _item(checked_tenant, rows[0]) if rows else None

    def delete(self, tenant: str, namespace: NamespaceLike, key: str) -> bool:
        """Remove an item; True when a live item was removed."""
        address = prepare_address(tenant, namespace, key)
        with self._writing("delete a memory") as conn:
            statement = sql.delete_memory(*address, self._clock())
            rows = conn.execute(statement.sql, statement.params).fetchall()
        return bool(rows and rows[0][0])

    def search(
        self,
        tenant: str,
        namespace_prefix: NamespaceLike = (),
        *,
        query: str | None = None,
        kind: str | None = None,
        tags: Mapping[str, str] | None = None,
        limit: int = 10,
        offset: int = 0,
        mode: SearchMode = "keyword",
    ) -> list[SearchHit]:
        """Items under the prefix, ranked by the query (or newest first without one)."""
        request = prepare_search(
            tenant, namespace_prefix, query=query, kind=kind, tags=tags,
            limit=limit, offset=offset, mode=mode, embedder=self._embedder,
        )  # fmt: skip
        if request.query is not None and not request.terms:
            return []
        now = self._clock()
        if request.query is None:
            rows = self._fetch(sql.search_recent(request, now), "search memories")
            return [SearchHit(item=_item(request.tenant, row), score=None) for row in rows]
        if request.mode == "keyword":
            statement = sql.search_keyword(request, now, limit=request.limit, offset=request.offset)
            rows = self._fetch(statement, "search memories")
            return [SearchHit(item=_item(request.tenant, row), score=row[9]) for row in rows]
        return self._search_vectors(request, now)

    def _search_vectors(self, request: SearchRequest, now: float) -> list[SearchHit]:
        assert request.query is not None
        query_vector = self._embed([request.query], queries=True)[0]
        with self._reading("search memories") as conn:
            statement = sql.search_vectors(request, now)
            vector_rows = conn.execute(statement.sql, statement.params).fetchall()
            keyword_rows: list[_Row] = []
            if request.mode == "hybrid":
                statement = sql.search_keyword(request, now, limit=MAX_LIMIT, offset=0)
                keyword_rows = conn.execute(statement.sql, statement.params).fetchall()
        rows = {row[0]: row for row in (*vector_rows, *keyword_rows)}
        vector_rows.sort(key=lambda row: _order(row, None))
        by_vector = rank_by_vector(query_vector, [(row[0], bytes(row[9])) for row in vector_rows])[
            :MAX_LIMIT
        ]
        if request.mode == "vector":
            scores = dict(by_vector)
        else:
            scores = reciprocal_rank_fusion(
                [[row[0] for row in keyword_rows], [ident for ident, _ in by_vector]]
            )
        ranked = sorted(scores, key=lambda ident: _order(rows[ident], scores[ident]))
        page = ranked[request.offset : request.offset + request.limit]
        return [SearchHit(item=_item(request.tenant, rows[i]), score=scores[i]) for i in page]

    def list_namespaces(
        self,
        tenant: str,
        *,
        prefix: NamespaceLike = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        """Distinct namespaces holding live items, cut to ``max_depth``, sorted, paged."""
        checked_limit, checked_offset = check_page(limit, offset)
        checked_tenant, checked_prefix = prepare_prefix(tenant, prefix)
        statement = sql.list_paths(checked_tenant, checked_prefix, self._clock())
        rows = self._fetch(statement, "list namespaces")
        return page_namespaces(
            [sql.decode_path(row[0]) for row in rows],
            max_depth=max_depth,
            limit=checked_limit,
            offset=checked_offset,
        )

    def delete_user(self, tenant: str, user_id: str) -> int:
        """Delete the user's memories (namespace ``("user", user_id, ...)``) and summaries."""
        checked_tenant, checked_user = check_tenant(tenant), check_user_id(user_id)
        with self._writing("delete a user") as conn:
            removed = 0
            for statement in (
                sql.delete_prefix(checked_tenant, ("user", checked_user)),
                sql.delete_user_summaries(checked_tenant, checked_user),
            ):
                removed += conn.execute(statement.sql, statement.params).rowcount
        return removed

    def sweep_expired(self) -> int:
        """Delete every expired item (all tenants); return how many."""
        with self._writing("sweep expired memories") as conn:
            statement = sql.sweep_expired(self._clock())
            return conn.execute(statement.sql, statement.params).rowcount

    def close(self) -> None:
        """Close the connection; later calls raise StoreError. Closing twice is fine."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            with _translated("close the database"):
                conn.close()

    # --- summaries -------------------------------------------------------------------------

    def save_summary(self, summary: SessionSummary) -> SessionSummary:
        """Store a new summary version and enqueue its outbox entry, in one transaction."""
        check_summary(summary)
        address = (summary.tenant, summary.session_id)
        with self._writing("save a summary") as conn:
            statement = sql.select_summary(*address, summary.version)
            existing = _summary(conn.execute(statement.sql, statement.params).fetchone())
            statement = sql.select_latest_summary(*address)
            latest = _summary(conn.execute(statement.sql, statement.params).fetchone())
            if summary_save_action(summary, existing=existing, latest=latest) == "noop":
                assert existing is not None
                return existing
            now = self._clock()
            created = summary.created_at.timestamp() if summary.created_at else now
            for statement in (
                sql.insert_summary(summary, created),
                sql.insert_outbox(summary, now),
            ):
                conn.execute(statement.sql, statement.params)
        return replace(summary, created_at=to_datetime(created))

    def latest_summary(self, tenant: str, session_id: str) -> SessionSummary | None:
        """The newest version of a session's summary, or None."""
        statement = sql.select_latest_summary(*check_session(tenant, session_id))
        rows = self._fetch(statement, "read a summary")
        return _summary(rows[0]) if rows else None

    def summary_history(self, tenant: str, session_id: str) -> list[SessionSummary]:
        """Every version of a session's summary, oldest first."""
        statement = sql.select_summary_history(*check_session(tenant, session_id))
        rows = self._fetch(statement, "read summaries")
        return [s for s in map(_summary, rows) if s is not None]

    def pending_outbox(self, tenant: str | None = None, *, limit: int = 100) -> list[OutboxEntry]:
        """Entries not completed yet, fewest attempts then oldest first (optionally one tenant)."""
        owner = None if tenant is None else check_tenant(tenant)
        checked_limit, _ = check_page(limit, 0)
        rows = self._fetch(sql.select_pending_outbox(owner, checked_limit), "read the outbox")
        return [_outbox(row) for row in rows]

    def complete_outbox(self, tenant: str, session_id: str, version: int) -> None:
        """Mark an outbox entry done; completing it again (or a missing one) is a no-op."""
        address = check_outbox_address(tenant, session_id, version)
        with self._writing("complete an outbox entry") as conn:
            statement = sql.complete_outbox(*address, self._clock())
            conn.execute(statement.sql, statement.params)

    def fail_outbox(self, tenant: str, session_id: str, version: int) -> int:
        """Count a failed write of a pending entry; return its attempts (0: no such entry)."""
        statement = sql.fail_outbox(*check_outbox_address(tenant, session_id, version))
        with self._writing("record an outbox failure") as conn:
            rows = conn.execute(statement.sql, statement.params).fetchall()
        return int(rows[0][0]) if rows else 0

    def delete_user_summaries(self, tenant: str, user_id: str) -> int:
        """Delete every summary (and outbox entry) of the user; return how many summaries."""
        statement = sql.delete_user_summaries(check_tenant(tenant), check_user_id(user_id))
        with self._writing("delete summaries") as conn:
            return conn.execute(statement.sql, statement.params).rowcount


def _outbox(row: _Row) -> OutboxEntry:
    summary = _summary(row)
    assert summary is not None
    return OutboxEntry(summary=summary, attempts=row[10])


class AsyncSQLiteStore:
    """The async twin of :class:`SQLiteStore`: the same code, run on a worker thread.

    The constructor opens (and migrates) the database synchronously, like ``sqlite3.connect``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        clock: Callable[[], float] | None = None,
        embedder: Embedder | None = None,
        busy_timeout: float = 5.0,
    ) -> None:
        self._store = SQLiteStore(path, clock=clock, embedder=embedder, busy_timeout=busy_timeout)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def put(
        self,
        tenant: str,
        namespace: NamespaceLike,
        key: str,
        text: str,
        *,
        kind: str = "note",
        tags: Mapping[str, str] | None = None,
        ttl: float | None = None,
    ) -> MemoryItem:
        """See :meth:`SQLiteStore.put`."""
        return await asyncio.to_thread(
            self._store.put, tenant, namespace, key, text, kind=kind, tags=tags, ttl=ttl
        )

    async def put_many(self, tenant: str, items: Iterable[NewMemory]) -> list[MemoryItem]:
        """See :meth:`SQLiteStore.put_many`."""
        return await asyncio.to_thread(self._store.put_many, tenant, items)

    async def get(self, tenant: str, namespace: NamespaceLike, key: str) -> MemoryItem | None:
        """See :meth:`SQLiteStore.get`."""
        return await asyncio.to_thread(self._store.get, tenant, namespace, key)

    async def delete(self, tenant: str, namespace: NamespaceLike, key: str) -> bool:
        """See :meth:`SQLiteStore.delete`."""
        return await asyncio.to_thread(self._store.delete, tenant, namespace, key)

    async def search(
        self,
        tenant: str,
        namespace_prefix: NamespaceLike = (),
        *,
        query: str | None = None,
        kind: str | None = None,
        tags: Mapping[str, str] | None = None,
        limit: int = 10,
        offset: int = 0,
        mode: SearchMode = "keyword",
    ) -> list[SearchHit]:
        """See :meth:`SQLiteStore.search`."""
        return await asyncio.to_thread(
            self._store.search, tenant, namespace_prefix, query=query, kind=kind,
            tags=tags, limit=limit, offset=offset, mode=mode,
        )  # fmt: skip

    async def list_namespaces(
        self,
        tenant: str,
        *,
        prefix: NamespaceLike = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        """See :meth:`SQLiteStore.list_namespaces`."""
        return await asyncio.to_thread(
            self._store.list_namespaces, tenant, prefix=prefix, max_depth=max_depth,
            limit=limit, offset=offset,
        )  # fmt: skip

    async def delete_user(self, tenant: str, user_id: str) -> int:
        """See :meth:`SQLiteStore.delete_user`."""
        return await asyncio.to_thread(self._store.delete_user, tenant, user_id)

    async def sweep_expired(self) -> int:
        """See :meth:`SQLiteStore.sweep_expired`."""
        return await asyncio.to_thread(self._store.sweep_expired)

    async def aclose(self) -> None:
        """See :meth:`SQLiteStore.close`."""
        await asyncio.to_thread(self._store.close)

    async def save_summary(self, summary: SessionSummary) -> SessionSummary:
        """See :meth:`SQLiteStore.save_summary`."""
        return await asyncio.to_thread(self._store.save_summary, summary)

    async def latest_summary(self, tenant: str, session_id: str) -> SessionSummary | None:
        """See :meth:`SQLiteStore.latest_summary`."""
        return await asyncio.to_thread(self._store.latest_summary, tenant, session_id)

    async def summary_history(self, tenant: str, session_id: str) -> list[SessionSummary]:
        """See :meth:`SQLiteStore.summary_history`."""
        return await asyncio.to_thread(self._store.summary_history, tenant, session_id)

    async def pending_outbox(
        self, tenant: str | None = None, *, limit: int = 100
    ) -> list[OutboxEntry]:
        """See :meth:`SQLiteStore.pending_outbox`."""
        return await asyncio.to_thread(self._store.pending_outbox, tenant, limit=limit)

    async def complete_outbox(self, tenant: str, session_id: str, version: int) -> None:
        """See :meth:`SQLiteStore.complete_outbox`."""
        await asyncio.to_thread(self._store.complete_outbox, tenant, session_id, version)

    async def fail_outbox(self, tenant: str, session_id: str, version: int) -> int:
        """See :meth:`SQLiteStore.fail_outbox`."""
        return await asyncio.to_thread(self._store.fail_outbox, tenant, session_id, version)

    async def delete_user_summaries(self, tenant: str, user_id: str) -> int:
        """See :meth:`SQLiteStore.delete_user_summaries`."""
        return await asyncio.to_thread(self._store.delete_user_summaries, tenant, user_id)
