"""The PostgreSQL backend: many stateless service replicas sharing one database.

:class:`PostgresStore` (psycopg 3 + a ``ConnectionPool``) and :class:`AsyncPostgresStore`
(``AsyncConnectionPool``) implement both the memory store and the summary store contracts
with the semantics of the in-memory reference backend.

Each operation is written once, as a *plan*: a generator that yields SQL statements (built by
:mod:`synopsis.memory._sql_postgres`) and receives their rows. Plans do no I/O; the sync and
async classes only drive them over one pooled connection inside one transaction, and
translate psycopg errors into :class:`~synopsis.errors.StoreError` at that seam.

Keyword search ranks with BM25 computed, as on the in-memory backend, over the live items in
the searched scope (tenant, prefix, kind, tags): the database counts the scope and sums its
lengths, a GIN index finds the items sharing a query term, and the database scores them with
the arithmetic of :func:`~synopsis.memory._recall.bm25_scores`, in the same order, sending
back only the requested page.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Self, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from synopsis.errors import ConfigError, InvalidInput, MigrationError, StoreError
from synopsis.memory import _sql_postgres as q
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
    prepare_address,
    prepare_prefix,
    prepare_put,
    prepare_put_many,
    prepare_search,
    query_embedder,
    summary_save_action,
    to_datetime,
)
from synopsis.memory._offload import off_loop
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
    unpack_vector,
)

__all__ = ["AsyncPostgresStore", "PostgresStore"]

T = TypeVar("T")
Rows = list[tuple[Any, ...]]
#: A pure operation: yields statements, is sent each statement's rows, returns its result.
Plan = Generator[q.Statement, Rows, T]
_PUT_ATTEMPTS = 3


# --- rows ---------------------------------------------------------------------------------------


def _item_row(request: PutRequest, vector: Sequence[float] | None, now: float) -> q.ItemRow:
    """The row a put of ``request`` at ``now`` writes."""
    return q.ItemRow(
        tenant=request.tenant, namespace=request.namespace, key=request.key,
        text=request.text, kind=request.kind, tags=request.tags,
        terms=document_terms(request.text), embedding=vector, created_at=now,
        updated_at=now, expires_at=None if request.ttl is None else now + request.ttl,
    )  # fmt: skip


def _check_schema(schema: object) -> str:
    if not isinstance(schema, str) or not schema or len(schema) > 63:
        raise ConfigError("schema must be a PostgreSQL identifier of 1 to 63 characters")
    if any(ord(c) < 32 for c in schema):
        raise ConfigError("schema must be printable text")
    return schema


def _check_max_depth(max_depth: object) -> int | None:
    if max_depth is not None and (
        isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1
    ):
        raise InvalidInput("max_depth must be an integer >= 1 or None")
    return max_depth


# --- row decoding ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Found:
    item: MemoryItem
    updated: float


def _item(row: Sequence[Any]) -> _Found:
    tenant, namespace, key, text, kind, tags, created, updated, expires = row[:9]
    item = MemoryItem(
        tenant=tenant,
        namespace=tuple(namespace),
        key=key,
        text=text,
        kind=kind,
        tags=dict(tags),
        created_at=to_datetime(created),
        updated_at=to_datetime(updated),
        expires_at=None if expires is None else to_datetime(expires),
    )
    return _Found(item, updated)


def _summary(row: Sequence[Any]) -> SessionSummary:
    tenant, user, session, version, text, first, last, model, digest, created = row[:10]
    return SessionSummary(
        tenant=tenant,
        user_id=user,
        session_id=session,
        version=version,
        text=text,
        covers_from=first,
        covers_to=last,
        model=model,
        content_hash=digest,
        created_at=to_datetime(created),
    )


def _order(found: _Found, score: float | None) -> tuple[float, float, str, Namespace]:
    return hit_order(score, found.updated, found.item.key, found.item.namespace)


def _address(found: _Found) -> tuple[Namespace, str]:
    return (found.item.namespace, found.item.key)


# --- plans (pure) -----------------------------------------------------------------------------


def _migrate(schema: str) -> Plan[int]:
    yield q.migration_lock(schema)
    yield from _discard(q.migration_prelude(schema))
    have = int((yield q.current_version(schema))[0][0])
    if have > len(q.MIGRATIONS):
        raise MigrationError(
            f"schema {schema!r} is at version {have}, newer than this code knows"
            f" ({len(q.MIGRATIONS)}); upgrade synopsis"
        )
    for version in range(have + 1, len(q.MIGRATIONS) + 1):
        yield from _discard(q.migration(schema, version))
    return have


def _put(schema: str, row: q.ItemRow, now: float) -> Plan[MemoryItem]:
    for _ in range(_PUT_ATTEMPTS):
        found = yield q.find_item(schema, row.tenant, row.namespace, row.key)
        if found:
            item_id, expires, created = found[0]
            if expires is None or expires > now:
                row = replace(row, created_at=created)
            yield q.update_item(schema, item_id, row)
            break
        if (yield q.insert_item(schema, row)):
            break
    else:  # pragma: no cover - needs a writer deleting and re-creating the key in between
        raise StoreError("put kept racing with concurrent writers; try again")
    return _item(
        (row.tenant, row.namespace, row.key, row.text, row.kind, row.tags,
         row.created_at, row.updated_at, row.expires_at)
    ).item  # fmt: skip


def _put_many(
    schema: str, tenant: str, rows: Sequence[q.ItemRow], now: float
) -> Plan[list[MemoryItem]]:
    written = yield q.upsert_items(schema, tenant, rows, now)
    found = {(tuple(ns), key): created for ns, key, created in written}
    created = [found[(row.namespace, row.key)] for row in rows]
    return [
        _item((row.tenant, row.namespace, row.key, row.text, row.kind, row.tags,
               first, row.updated_at, row.expires_at)).item
        for row, first in zip(rows, created, strict=True)
    ]  # fmt: skip


def _scope_args(request: SearchRequest, now: float) -> dict[str, Any]:
    return {
        "tenant": request.tenant,
        "prefix": request.prefix,
        "kind": request.kind,
        "tags": request.tags,
        "now": now,
    }


def _keyword(
    schema: str, request: SearchRequest, now: float, *, limit: int = MAX_LIMIT, offset: int = 0
) -> Plan[list[tuple[_Found, float]]]:
    """A page of keyword hits, best first, scored in the database (see ``keyword_page``)."""
    args = _scope_args(request, now)
    size, length = (yield q.scope_stats(schema, **args))[0]
    if size == 0:
        return []
    yield q.without_jit()
    rows = yield q.keyword_page(
        schema, terms=request.terms, scope_size=size, average=(length / size) or 1.0,
        limit=limit, offset=offset, **args,
    )  # fmt: skip
    return [(_item(row), row[9]) for row in rows]


def _fused(
    schema: str, request: SearchRequest, now: float, query_vector: Sequence[float]
) -> Plan[list[tuple[_Found, float]]]:
    rows = yield q.vector_candidates(schema, **_scope_args(request, now))
    found = [(_item(row), row[9]) for row in rows]
    records = {_address(item): item for item, _ in found}
    with_vectors = [(_address(item), vector) for item, vector in found if vector is not None]
    by_vector = rank_by_vector(query_vector, with_vectors)[:MAX_LIMIT]
    if request.mode == "vector":
        return [(records[address], score) for address, score in by_vector]
    keyword = sorted((yield from _keyword(schema, request, now)), key=lambda p: _order(*p))
    fused = reciprocal_rank_fusion(
        [[_address(f) for f, _ in keyword[:MAX_LIMIT]], [a for a, _ in by_vector]]
    )
    return [(records[address], score) for address, score in fused.items()]


def _search(
    schema: str, request: SearchRequest, now: float, query_vector: Sequence[float] | None
) -> Plan[list[SearchHit]]:
    if request.query is None:
        rows = yield q.search_newest(
            schema, limit=request.limit, offset=request.offset, **_scope_args(request, now)
        )
        return [SearchHit(item=_item(row).item, score=None) for row in rows]
    if request.mode == "keyword":
        page = yield from _keyword(schema, request, now, limit=request.limit, offset=request.offset)
        return [SearchHit(item=found.item, score=score) for found, score in page]
    assert query_vector is not None
    scored = yield from _fused(schema, request, now, query_vector)
    scored.sort(key=lambda pair: _order(*pair))
    page = scored[request.offset : request.offset + request.limit]
    return [SearchHit(item=found.item, score=score) for found, score in page]


def _discard(statements: Sequence[q.Statement]) -> Plan[None]:
    """Run statements whose rows nobody needs."""
    for statement in statements:
        _ = yield statement


def _rows(statement: q.Statement) -> Plan[Rows]:
    return (yield statement)


def _count(statement: q.Statement) -> Plan[int]:
    return int((yield statement)[0][0])


def _delete_user(schema: str, tenant: str, user_id: str) -> Plan[int]:
    memories = yield from _count(q.delete_user_memories(schema, tenant, user_id))
    summaries = yield from _count(q.delete_user_summaries(schema, tenant, user_id))
    return memories + summaries


def _save_summary(schema: str, summary: SessionSummary, now: float) -> Plan[SessionSummary]:
    yield q.lock_key(summary.tenant, summary.session_id)
    same = yield q.summary_version(schema, summary.tenant, summary.session_id, summary.version)
    newest = yield q.summary_history(schema, summary.tenant, summary.session_id, latest=True)
    existing = _summary(same[0]) if same else None
    latest = _summary(newest[0]) if newest else None
    if summary_save_action(summary, existing=existing, latest=latest) == "noop":
        assert existing is not None
        return existing
    created = summary.created_at.timestamp() if summary.created_at else now
    insert_summary, insert_outbox = q.insert_summary(schema, summary, created_at=created, now=now)
    if not (yield insert_summary):  # pragma: no cover - the session lock prevents this
        raise StoreError(f"summary {summary.session_id!r} version {summary.version} conflicted")
    yield insert_outbox
    return replace(summary, created_at=summary.created_at or to_datetime(now))


# --- the seam --------------------------------------------------------------------------------


class DatabaseError(StoreError):
    """PostgreSQL refused or failed an operation; ``operation`` and ``sqlstate`` say which."""

    def __init__(self, message: str, *, operation: str, sqlstate: str | None) -> None:
        super().__init__(message)
        self.operation = operation
        self.sqlstate = sqlstate


def _translate(exc: psycopg.Error, what: str) -> StoreError:
    """A psycopg error as a StoreError naming the operation and SQLSTATE (no raw text)."""
    state = exc.sqlstate
    message = f"PostgreSQL {what} failed: {type(exc).__name__} (SQLSTATE {state})"
    if what == "migration":
        return MigrationError(message)
    return DatabaseError(message, operation=what, sqlstate=state)


def _drive(conn: psycopg.Connection[Any], plan: Plan[T]) -> T:
    try:
        statement = next(plan)
        while True:
            cursor = conn.execute(statement.query, statement.params)
            statement = plan.send(cursor.fetchall() if cursor.description else [])
    except StopIteration as stop:
        result: T = stop.value
        return result


async def _adrive(conn: psycopg.AsyncConnection[Any], plan: Plan[T]) -> T:
    try:
        statement = next(plan)
        while True:
            cursor = await conn.execute(statement.query, statement.params)
            rows = await cursor.fetchall() if cursor.description else []
            statement = plan.send(rows)
    except StopIteration as stop:
        result: T = stop.value
        return result


class _Plans:
    """Argument checking and plan building shared by the sync and async stores (no I/O)."""

    def __init__(
        self, *, schema: str, clock: Callable[[], float] | None, embedder: Embedder | None
    ) -> None:
        self.schema = _check_schema(schema)
        self.clock = clock or time.time
        self.embedder = embedder

    def embed(self, texts: list[str], *, queries: bool = False) -> list[tuple[float, ...]]:
        assert self.embedder is not None
        embed = query_embedder(self.embedder) if queries else self.embedder
        vectors = check_embeddings(embed(texts), len(texts))
        return [unpack_vector(pack_vector(vector)) for vector in vectors]

    def put(
        self,
        tenant: str,
        namespace: NamespaceLike,
        key: str,
        text: str,
        *,
        kind: str,
        tags: Mapping[str, str] | None,
        ttl: float | None,
    ) -> Plan[MemoryItem]:
        request = prepare_put(tenant, namespace, key, text, kind=kind, tags=tags, ttl=ttl)
        vector = self.embed([request.text])[0] if self.embedder else None
        now = self.clock()
        return _put(self.schema, _item_row(request, vector, now), now)

    def put_many(self, tenant: str, items: Iterable[NewMemory]) -> Plan[list[MemoryItem]] | None:
        requests = prepare_put_many(tenant, items)
        if not requests:
            return None
        vectors: Sequence[Sequence[float] | None] = [None] * len(requests)
        if self.embedder:
            vectors = self.embed([request.text for request in requests])
        now = self.clock()
        rows = [_item_row(r, v, now) for r, v in zip(requests, vectors, strict=True)]
        return _put_many(self.schema, requests[0].tenant, rows, now)

    def get(self, tenant: str, namespace: NamespaceLike, key: str) -> Plan[Rows]:
        address = prepare_address(tenant, namespace, key)
        return _rows(q.get_item(self.schema, *address, self.clock()))

    def delete(self, tenant: str, namespace: NamespaceLike, key: str) -> Plan[Rows]:
        address = prepare_address(tenant, namespace, key)
        return _rows(q.delete_item(self.schema, *address, self.clock()))

    def search(self, tenant: str, namespace_prefix: NamespaceLike, *, query: str | None,
               kind: str | None, tags: Mapping[str, str] | None, limit: int, offset: int,
               mode: SearchMode) -> Plan[list[SearchHit]] | None:  # fmt: skip
        request = prepare_search(
            tenant, namespace_prefix, query=query, kind=kind, tags=tags,
            limit=limit, offset=offset, mode=mode, embedder=self.embedder,
        )  # fmt: skip
        if request.query is not None and not request.terms:
            return None
        vector = None
        if request.query is not None and request.mode != "keyword":
            vector = self.embed([request.query], queries=True)[0]
        return _search(self.schema, request, self.clock(), vector)

    def list_namespaces(self, tenant: str, *, prefix: NamespaceLike, max_depth: int | None,
                        limit: int, offset: int) -> Plan[Rows]:  # fmt: skip
        checked_limit, checked_offset = check_page(limit, offset)
        checked_tenant, checked_prefix = prepare_prefix(tenant, prefix)
        return _rows(q.list_namespaces(
            self.schema, tenant=checked_tenant, prefix=checked_prefix,
            max_depth=_check_max_depth(max_depth), now=self.clock(),
            limit=checked_limit, offset=checked_offset,
        ))  # fmt: skip

    def delete_user(self, tenant: str, user_id: str) -> Plan[int]:
        return _delete_user(self.schema, check_tenant(tenant), check_user_id(user_id))

    def sweep_expired(self) -> Plan[int]:
        return _count(q.sweep_expired(self.schema, self.clock()))

    def save_summary(self, summary: SessionSummary) -> Plan[SessionSummary]:
        check_summary(summary)
        return _save_summary(self.schema, summary, self.clock())

    def history(self, tenant: str, session_id: str, *, latest: bool) -> Plan[Rows]:
        checked_tenant, session = check_session(tenant, session_id)
        return _rows(q.summary_history(self.schema, checked_tenant, session, latest=latest))

    def pending_outbox(self, tenant: str | None, *, limit: int) -> Plan[Rows]:
        owner = None if tenant is None else check_tenant(tenant)
        checked_limit, _ = check_page(limit, 0)
        return _rows(q.pending_outbox(self.schema, owner, checked_limit))

    def complete_outbox(self, tenant: str, session_id: str, version: int) -> Plan[Rows]:
        address = check_outbox_address(tenant, session_id, version)
        return _rows(q.complete_outbox(self.schema, *address))

    def fail_outbox(self, tenant: str, session_id: str, version: int) -> Plan[int]:
        address = check_outbox_address(tenant, session_id, version)
        return _attempts(q.fail_outbox(self.schema, *address))

    def delete_user_summaries(self, tenant: str, user_id: str) -> Plan[int]:
        statement = q.delete_user_summaries(
            self.schema, check_tenant(tenant), check_user_id(user_id)
        )
        return _count(statement)


def _outbox(rows: Rows) -> list[OutboxEntry]:
    return [OutboxEntry(summary=_summary(row), attempts=row[10]) for row in rows]


def _attempts(statement: q.Statement) -> Plan[int]:
    """The attempt count an outbox update returned; 0 when it matched no entry."""
    rows = yield statement
    return int(rows[0][0]) if rows else 0


def _pool_kwargs(min_size: int, max_size: int, timeout: float) -> dict[str, Any]:
    if not 1 <= min_size <= max_size:
        raise ConfigError("pool sizes must satisfy 1 <= min_size <= max_size")
    if not timeout > 0:
        raise ConfigError("pool_timeout must be a positive number of seconds")
    return {
        "min_size": min_size,
        "max_size": max_size,
        "timeout": timeout,
        "kwargs": {"autocommit": False},
    }


class PostgresStore:
    """A :class:`MemoryStore` and :class:`SummaryStore` on PostgreSQL (psycopg 3, pooled).

    Construction opens the pool and brings ``schema`` up to date (migrations run once, under
    an advisory lock, however many replicas start together). ``clock`` returns epoch seconds
    (default ``time.time``); ``embedder`` enables the ``vector`` and ``hybrid`` search modes;
    ``pool_timeout`` bounds the wait for a pooled connection (and for the pool to open).
    """

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        clock: Callable[[], float] | None = None,
        embedder: Embedder | None = None,
        schema: str = "synopsis",
        pool_timeout: float = 30.0,
    ) -> None:
        self._plans = _Plans(schema=schema, clock=clock, embedder=embedder)
        kwargs = _pool_kwargs(min_size, max_size, pool_timeout)
        self._pool = ConnectionPool(url, open=False, **kwargs)
        try:
            self._open(pool_timeout)
        except BaseException:
            self._pool.close()
            raise

    def _open(self, timeout: float) -> None:
        try:
            self._pool.open(wait=True, timeout=timeout)
        except psycopg.Error as exc:
            raise _translate(exc, "connect") from exc
        self._run(_migrate(self._plans.schema), "migration")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self, plan: Plan[T], what: str) -> T:
        try:
            with self._pool.connection() as conn:
                return _drive(conn, plan)
        except psycopg.Error as exc:
            raise _translate(exc, what) from exc

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
        plan = self._plans.put(tenant, namespace, key, text, kind=kind, tags=tags, ttl=ttl)
        return self._run(plan, "put")

    def put_many(self, tenant: str, items: Iterable[NewMemory]) -> list[MemoryItem]:
        """Put a batch in one transaction (see :meth:`MemoryStore.put_many`)."""
        plan = self._plans.put_many(tenant, items)
        return [] if plan is None else self._run(plan, "put_many")

    def get(self, tenant: str, namespace: NamespaceLike, key: str) -> MemoryItem | None:
        """The live item at this address, or None."""
        rows = self._run(self._plans.get(tenant, namespace, key), "get")
        return _item(rows[0]).item if rows else None

    def delete(self, tenant: str, namespace: NamespaceLike, key: str) -> bool:
        """Remove an item; True when a live item was removed."""
        rows = self._run(self._plans.delete(tenant, namespace, key), "delete")
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
        plan = self._plans.search(
            tenant, namespace_prefix, query=query, kind=kind, tags=tags,
            limit=limit, offset=offset, mode=mode,
        )  # fmt: skip
        return [] if plan is None else self._run(plan, "search")

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
        plan = self._plans.list_namespaces(
            tenant, prefix=prefix, max_depth=max_depth, limit=limit, offset=offset
        )
        return [tuple(row[0]) for row in self._run(plan, "list_namespaces")]

    def delete_user(self, tenant: str, user_id: str) -> int:
        """Delete the user's memories (namespace ``("user", user_id, ...)``) and summaries."""
        return self._run(self._plans.delete_user(tenant, user_id), "delete_user")

    def sweep_expired(self) -> int:
        """Delete every expired item (all tenants); return how many."""
        return self._run(self._plans.sweep_expired(), "sweep_expired")

    def close(self) -> None:
        """Close the connection pool."""
        self._pool.close()

    def save_summary(self, summary: SessionSummary) -> SessionSummary:
        """Store a new summary version and its outbox entry in one transaction."""
        return self._run(self._plans.save_summary(summary), "save_summary")

    def latest_summary(self, tenant: str, session_id: str) -> SessionSummary | None:
        """The newest version of a session's summary, or None."""
        rows = self._run(self._plans.history(tenant, session_id, latest=True), "latest_summary")
        return _summary(rows[0]) if rows else None

    def summary_history(self, tenant: str, session_id: str) -> list[SessionSummary]:
        """Every version of a session's summary, oldest first."""
        rows = self._run(self._plans.history(tenant, session_id, latest=False), "summary_history")
        return [_summary(row) for row in rows]

    def pending_outbox(self, tenant: str | None = None, *, limit: int = 100) -> list[OutboxEntry]:
        """Entries not completed yet, fewest attempts then oldest first (optionally one tenant)."""
        return _outbox(self._run(self._plans.pending_outbox(tenant, limit=limit), "outbox"))

    def complete_outbox(self, tenant: str, session_id: str, version: int) -> None:
        """Mark an outbox entry done; completing it again (or a missing one) is a no-op."""
        self._run(self._plans.complete_outbox(tenant, session_id, version), "outbox")

    def fail_outbox(self, tenant: str, session_id: str, version: int) -> int:
        """Count a failed write of a pending entry; return its attempts (0: no such entry)."""
        return self._run(self._plans.fail_outbox(tenant, session_id, version), "outbox")

    def delete_user_summaries(self, tenant: str, user_id: str) -> int:
        """Delete every summary (and outbox entry) of the user; return how many summaries."""
        return self._run(self._plans.delete_user_summaries(tenant, user_id), "delete_user")


class AsyncPostgresStore:
    """The async twin of :class:`PostgresStore` on an ``AsyncConnectionPool``.

    Nothing happens in the constructor: the first call opens the pool and migrates. To fail
    early, use ``await store.open()``, ``await AsyncPostgresStore.connect(url, ...)`` or
    ``async with store:``. Calls that embed text run the embedder on a worker thread, off the
    event loop.
    """

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        clock: Callable[[], float] | None = None,
        embedder: Embedder | None = None,
        schema: str = "synopsis",
        pool_timeout: float = 30.0,
    ) -> None:
        self._plans = _Plans(schema=schema, clock=clock, embedder=embedder)
        self._url = url
        self._pool_kwargs = _pool_kwargs(min_size, max_size, pool_timeout)
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
        self._opening = asyncio.Lock()
        self._closed = False

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        clock: Callable[[], float] | None = None,
        embedder: Embedder | None = None,
        schema: str = "synopsis",
        pool_timeout: float = 30.0,
    ) -> Self:
        """Build, open and migrate a store."""
        store = cls(
            url, min_size=min_size, max_size=max_size, clock=clock, embedder=embedder,
            schema=schema, pool_timeout=pool_timeout,
        )  # fmt: skip
        return await store.open()

    async def open(self) -> Self:
        """Open the pool and bring the schema up to date (a no-op when already open).

        Any method opens the store on first use, so ``open`` is only needed to fail early.
        """
        async with self._opening:
            if self._closed:
                raise StoreError("AsyncPostgresStore is closed")
            if self._pool is None:
                self._pool = await self._open_pool()
        return self

    async def _open_pool(self) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
            self._url, open=False, **self._pool_kwargs
        )
        what = "connect"
        try:
            await pool.open(wait=True, timeout=self._pool_kwargs["timeout"])
            what = "migration"
            async with pool.connection() as conn:
                await _adrive(conn, _migrate(self._plans.schema))
        except psycopg.Error as exc:
            await pool.close()
            raise _translate(exc, what) from exc
        except BaseException:
            await pool.close()
            raise
        return pool

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def _embeds(self) -> bool:
        return self._plans.embedder is not None

    async def _run(self, plan: Plan[T], what: str) -> T:
        pool = self._pool or (await self.open())._pool
        assert pool is not None
        try:
            async with pool.connection() as conn:
                return await _adrive(conn, plan)
        except psycopg.Error as exc:
            raise _translate(exc, what) from exc

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
        """See :meth:`PostgresStore.put`."""
        plan = await off_loop(
            self._embeds, self._plans.put, tenant, namespace, key, text, kind=kind, tags=tags,
            ttl=ttl,
        )  # fmt: skip
        return await self._run(plan, "put")

    async def put_many(self, tenant: str, items: Iterable[NewMemory]) -> list[MemoryItem]:
        """See :meth:`PostgresStore.put_many`."""
        plan = await off_loop(self._embeds, self._plans.put_many, tenant, items)
        return [] if plan is None else await self._run(plan, "put_many")

    async def get(self, tenant: str, namespace: NamespaceLike, key: str) -> MemoryItem | None:
        """See :meth:`PostgresStore.get`."""
        rows = await self._run(self._plans.get(tenant, namespace, key), "get")
        return _item(rows[0]).item if rows else None

    async def delete(self, tenant: str, namespace: NamespaceLike, key: str) -> bool:
        """See :meth:`PostgresStore.delete`."""
        rows = await self._run(self._plans.delete(tenant, namespace, key), "delete")
        return bool(rows and rows[0][0])

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
        """See :meth:`PostgresStore.search`."""
        plan = await off_loop(
            self._embeds and mode != "keyword", self._plans.search, tenant, namespace_prefix,
            query=query, kind=kind, tags=tags, limit=limit, offset=offset, mode=mode,
        )  # fmt: skip
        return [] if plan is None else await self._run(plan, "search")

    async def list_namespaces(
        self,
        tenant: str,
        *,
        prefix: NamespaceLike = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        """See :meth:`PostgresStore.list_namespaces`."""
        plan = self._plans.list_namespaces(
            tenant, prefix=prefix, max_depth=max_depth, limit=limit, offset=offset
        )
        return [tuple(row[0]) for row in await self._run(plan, "list_namespaces")]

    async def delete_user(self, tenant: str, user_id: str) -> int:
        """See :meth:`PostgresStore.delete_user`."""
        return await self._run(self._plans.delete_user(tenant, user_id), "delete_user")

    async def sweep_expired(self) -> int:
        """See :meth:`PostgresStore.sweep_expired`."""
        return await self._run(self._plans.sweep_expired(), "sweep_expired")

    async def aclose(self) -> None:
        """Close the connection pool (if open); the store cannot be used afterwards."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def save_summary(self, summary: SessionSummary) -> SessionSummary:
        """See :meth:`PostgresStore.save_summary`."""
        return await self._run(self._plans.save_summary(summary), "save_summary")

    async def latest_summary(self, tenant: str, session_id: str) -> SessionSummary | None:
        """See :meth:`PostgresStore.latest_summary`."""
        plan = self._plans.history(tenant, session_id, latest=True)
        rows = await self._run(plan, "latest_summary")
        return _summary(rows[0]) if rows else None

    async def summary_history(self, tenant: str, session_id: str) -> list[SessionSummary]:
        """See :meth:`PostgresStore.summary_history`."""
        plan = self._plans.history(tenant, session_id, latest=False)
        return [_summary(row) for row in await self._run(plan, "summary_history")]

    async def pending_outbox(
        self, tenant: str | None = None, *, limit: int = 100
    ) -> list[OutboxEntry]:
        """See :meth:`PostgresStore.pending_outbox`."""
        plan = self._plans.pending_outbox(tenant, limit=limit)
        return _outbox(await self._run(plan, "outbox"))

    async def complete_outbox(self, tenant: str, session_id: str, version: int) -> None:
        """See :meth:`PostgresStore.complete_outbox`."""
        await self._run(self._plans.complete_outbox(tenant, session_id, version), "outbox")

    async def fail_outbox(self, tenant: str, session_id: str, version: int) -> int:
        """See :meth:`PostgresStore.fail_outbox`."""
        return await self._run(self._plans.fail_outbox(tenant, session_id, version), "outbox")

    async def delete_user_summaries(self, tenant: str, user_id: str) -> int:
        """See :meth:`PostgresStore.delete_user_summaries`."""
        plan = self._plans.delete_user_summaries(tenant, user_id)
        return await self._run(plan, "delete_user")
