"""The PostgreSQL backend: many stateless service replicas sharing one database.

:class:`PostgresStore` (psycopg 3 + a ``ConnectionPool``) and :class:`AsyncPostgresStore`
(``AsyncConnectionPool``) implement both the memory store and the summary store contracts
with the semantics of the in-memory reference backend.

Each operation is written once, as a *plan*: a generator that yields SQL statements (see
:mod:`synopsis.memory._pg_plans`) and receives their rows. Plans do no I/O; the sync and
async classes only drive them over one pooled connection inside one transaction (taken when
the first statement comes, after any embedding), and translate psycopg errors into
:class:`~synopsis.errors.StoreError` at that seam.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AsyncExitStack, ExitStack
from typing import Any, ParamSpec, Self, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from synopsis._flow import Flow, adrive, drive
from synopsis.errors import ConfigError, MigrationError, StoreError
from synopsis.memory import _operations as ops
from synopsis.memory import _pg_plans as plans
from synopsis.memory._sql_postgres import Statement
from synopsis.memory._types import Embedder

__all__ = ["AsyncPostgresStore", "DatabaseError", "PostgresStore"]

T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S", bound="AsyncPostgresStore")
AsyncPool = AsyncConnectionPool[psycopg.AsyncConnection[Any]]

#: The operation a failure names, where it is not the method's own name.
_OPERATION_NAMES = {
    "pending_outbox": "outbox",
    "complete_outbox": "outbox",
    "fail_outbox": "outbox",
    "delete_user_summaries": "delete_user",
}


class DatabaseError(StoreError):
    """PostgreSQL refused or failed an operation; ``operation`` and ``sqlstate`` say which."""

    def __init__(self, message: str, *, operation: str, sqlstate: str | None) -> None:
        super().__init__(message)
        self.operation = operation
        self.sqlstate = sqlstate


def _translate(exc: psycopg.Error, what: str) -> StoreError:
    """A psycopg error as a StoreError naming the operation and SQLSTATE (no raw text)."""
    what = _OPERATION_NAMES.get(what, what)
    state = exc.sqlstate
    message = f"PostgreSQL {what} failed: {type(exc).__name__} (SQLSTATE {state})"
    if what == "migration":
        return MigrationError(message)
    return DatabaseError(message, operation=what, sqlstate=state)


def _execute(conn: psycopg.Connection[Any], statement: Statement) -> plans.Rows:
    cursor = conn.execute(statement.query, statement.params)
    return cursor.fetchall() if cursor.description else []


async def _aexecute(conn: psycopg.AsyncConnection[Any], statement: Statement) -> plans.Rows:
    cursor = await conn.execute(statement.query, statement.params)
    return await cursor.fetchall() if cursor.description else []


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


class _PostgresStores(ops.StoreOperations):
    """What both PostgreSQL stores share: the constructor, its checks and the plans."""

    _backend: plans.PostgresPlans

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
        super().__init__(plans.PostgresPlans(schema, clock), embedder)
        self._url = url
        self._pool_kwargs = _pool_kwargs(min_size, max_size, pool_timeout)
        self._setup()

    def _setup(self) -> None:
        """Make the pool (sync: open it now; async: on first use)."""
        raise NotImplementedError


class PostgresStore(ops.SyncDriver, _PostgresStores):
    """A :class:`MemoryStore` and :class:`SummaryStore` on PostgreSQL (psycopg 3, pooled).

    Construction opens the pool and brings ``schema`` up to date (migrations run once, under
    an advisory lock, however many replicas start together). ``clock`` returns epoch seconds
    (default ``time.time``); ``embedder`` enables the ``vector`` and ``hybrid`` search modes;
    ``pool_timeout`` bounds the wait for a pooled connection (and for the pool to open).
    """

    def _setup(self) -> None:
        self._pool = ConnectionPool(self._url, open=False, **self._pool_kwargs)
        try:
            self._open()
        except BaseException:
            self._pool.close()
            raise

    def _open(self) -> None:
        try:
            self._pool.open(wait=True, timeout=self._pool_kwargs["timeout"])
        except psycopg.Error as exc:
            raise _translate(exc, "connect") from exc
        self._run(plans.migrate(self._backend.schema), "migration")

    def _run(self, flow: Flow[Any, T], name: str) -> T:
        try:
            with ExitStack() as stack:
                conn: psycopg.Connection[Any] | None = None

                def perform(step: Any) -> Any:
                    nonlocal conn
                    if not isinstance(step, Statement):
                        return self._perform(step)
                    if conn is None:  # taken at the first statement, after any embedding
                        conn = stack.enter_context(self._pool.connection())
                    return _execute(conn, step)

                return drive(flow, perform)
        except psycopg.Error as exc:
            raise _translate(exc, name) from exc

    def close(self) -> None:
        """Close the connection pool."""
        self._pool.close()


class AsyncPostgresStore(ops.AsyncDriver, _PostgresStores):
    """The async twin of :class:`PostgresStore` on an ``AsyncConnectionPool``.

    Nothing happens in the constructor: the first call opens the pool and migrates. To fail
    early, use ``await store.open()``, ``await AsyncPostgresStore.connect(url, ...)`` or
    ``async with store:``. Calls that embed text run the embedder on a worker thread, off the
    event loop.
    """

    def _setup(self) -> None:
        self._pool: AsyncPool | None = None
        self._opening = asyncio.Lock()
        self._closed = False

    @classmethod
    async def connect(cls: Callable[P, S], *args: P.args, **kwargs: P.kwargs) -> S:
        """Build (with the constructor's arguments), open and migrate a store."""
        return await cls(*args, **kwargs).open()

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

    async def _open_pool(self) -> AsyncPool:
        pool: AsyncPool = AsyncConnectionPool(self._url, open=False, **self._pool_kwargs)
        what = "connect"
        try:
            await pool.open(wait=True, timeout=self._pool_kwargs["timeout"])
            what = "migration"
            async with pool.connection() as conn:
                await adrive(plans.migrate(self._backend.schema), lambda s: _aexecute(conn, s))
        except psycopg.Error as exc:
            await pool.close()
            raise _translate(exc, what) from exc
        except BaseException:
            await pool.close()
            raise
        return pool

    async def __aenter__(self) -> Self:
        return await self.open()

    async def _run(self, flow: Flow[Any, T], name: str) -> T:
        try:
            async with AsyncExitStack() as stack:
                conn: psycopg.AsyncConnection[Any] | None = None

                async def perform(step: Any) -> Any:
                    nonlocal conn
                    if not isinstance(step, Statement):
                        return await self._perform(step)
                    if conn is None:  # taken at the first statement, after any embedding
                        pool = self._pool or (await self.open())._pool
                        assert pool is not None
                        conn = await stack.enter_async_context(pool.connection())
                    return await _aexecute(conn, step)

                return await adrive(flow, perform)
        except psycopg.Error as exc:
            raise _translate(exc, name) from exc

    async def aclose(self) -> None:
        """Close the connection pool (if open); the store cannot be used afterwards."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
