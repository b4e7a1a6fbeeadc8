"""The PostgreSQL backend: many stateless service replicas sharing one database.

:class:`PostgresStore` (psycopg 3 + a ``ConnectionPool``) and :class:`AsyncPostgresStore`
(``AsyncConnectionPool``) implement both the memory store and the summary store contracts
with the semantics of the in-memory reference backend.

Each operation is written once, as a *plan*: a generator that yields SQL statements (see
:mod:`synopsis.memory.postgres.plans`) and receives their rows. Plans do no I/O; the sync and
async classes only drive them over one pooled connection inside one transaction (taken when
the first statement comes, after any embedding), and translate psycopg errors into
:class:`~synopsis.errors.StoreError` at that seam.

An operation that PostgreSQL aborts as a deadlock victim or a serialization failure is run
again from the start, in a new transaction (a few times, with jittered backoff); that is
correct because the aborted transaction left nothing behind. Embeddings computed before the
abort are reused.

Opening checks the URL's shape, then makes one connection bounded by ``connect_timeout``
(passed to libpq), which migrates the schema, before the pool opens: an unreachable server or
a refused login is one :class:`DatabaseError` naming the host, never the password.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Awaitable, Callable, Hashable, Iterator, Sequence
from contextlib import AsyncExitStack, ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, ParamSpec, Self, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from tenacity import (
    AsyncRetrying,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from synopsis._flow import adrive, drive
from synopsis.errors import ConfigError, MigrationError, StoreError
from synopsis.memory import _operations as ops
from synopsis.memory._types import Embedder
from synopsis.memory.postgres import plans
from synopsis.memory.postgres.sql import Statement

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


#: Seconds to wait for the server when the caller and the URL do not say.
_CONNECT_TIMEOUT = 10.0
#: Aborts after which running the whole operation again, in a new transaction, is correct.
_RETRIED = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
_ATTEMPTS = 5


def _retry_policy() -> dict[str, Any]:
    """How often and how long to retry an aborted transaction (bounded, jittered)."""
    return {
        "retry": retry_if_exception_type(_RETRIED),
        "stop": stop_after_attempt(_ATTEMPTS),
        "wait": wait_random_exponential(multiplier=0.02, max=1.0),
        "reraise": True,
    }


def _remembered(perform: Callable[[Any], T]) -> Callable[[Any], T]:
    """``perform`` answering a step it has seen before from memory (embeddings, on retry)."""
    answers: dict[Hashable, T] = {}

    def remembered(step: Any) -> T:
        if step not in answers:
            answers[step] = perform(step)
        return answers[step]

    return remembered


def _aremembered(perform: Callable[[Any], Awaitable[T]]) -> Callable[[Any], Awaitable[T]]:
    """The async twin of :func:`_remembered`."""
    answers: dict[Hashable, T] = {}

    async def remembered(step: Any) -> T:
        if step not in answers:
            answers[step] = await perform(step)
        return answers[step]

    return remembered


# --- connecting ----------------------------------------------------------------------------


def _redacted(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def _url_secrets(url: str) -> tuple[str, ...]:
    """Whatever in ``url`` may be a password: the text after ``user:`` in the authority."""
    match = re.match(r"[^:/]+://([^@/]*)@", url)
    password = match.group(1).partition(":")[2] if match else ""
    return (password,) if password else ()


@dataclass(frozen=True, slots=True)
class _Target:
    """Where a URL points (for messages) and what in it must never be shown."""

    where: str
    secrets: tuple[str, ...]
    #: The URL's own ``connect_timeout`` (seconds), if it sets a usable one.
    connect_timeout: float | None = None

    @classmethod
    def of(cls, url: str) -> _Target:
        """Check the URL's shape (no connection); a malformed one is a DatabaseError."""
        secrets = _url_secrets(url)
        try:
            params = conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            reason = _redacted(str(exc).strip().splitlines()[0], secrets)
            raise DatabaseError(
                f"PostgreSQL URL is malformed: {reason}", operation="connect", sqlstate=None
            ) from None
        host = params.get("host") or params.get("hostaddr") or "localhost"
        port = f":{params['port']}" if params.get("port") else ""
        database = f"/{params['dbname']}" if params.get("dbname") else ""
        secrets = (*secrets, str(params.get("password") or ""))
        return cls(f"{host}{port}{database}", secrets, _seconds(params.get("connect_timeout")))

    def error(self, exc: psycopg.Error) -> DatabaseError:
        """A failure to connect as one line naming the host (the password redacted)."""
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        reason = _redacted(lines[0] if lines else type(exc).__name__, self.secrets)
        return DatabaseError(
            f"cannot connect to PostgreSQL at {self.where}: {reason}",
            operation="connect",
            sqlstate=exc.sqlstate,
        )


def _seconds(value: object) -> float | None:
    """A positive number of seconds from a connection parameter, else None."""
    try:
        seconds = float(str(value))
    except ValueError:
        return None
    return seconds if 0 < seconds < math.inf else None


@contextmanager
def _quiet_pool_logs(pool_name: str) -> Iterator[None]:
    """Drop the pool's own warnings about ``pool_name`` while it opens (we raise one error)."""
    logger = logging.getLogger("psycopg.pool")

    def keep(record: logging.LogRecord) -> bool:
        return repr(pool_name) not in record.getMessage()

    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def _execute(conn: psycopg.Connection[Any], statement: Statement) -> plans.Rows:
    cursor = conn.execute(statement.query, statement.params)
    return cursor.fetchall() if cursor.description else []


async def _aexecute(conn: psycopg.AsyncConnection[Any], statement: Statement) -> plans.Rows:
    cursor = await conn.execute(statement.query, statement.params)
    return await cursor.fetchall() if cursor.description else []


@dataclass(slots=True)
class _Deferred:
    """The deferred statements of one attempt (see :class:`Statement`) sent so far.

    The first one puts the connection in pipeline mode (until the attempt ends), so it is
    sent without waiting; the next statement that is not deferred syncs the pipeline and
    collects their rows ahead of its own.
    """

    cursors: list[Any]
    pipeline: Any = None


def _pipelined(
    conn: psycopg.Connection[Any], stack: ExitStack, sent: _Deferred, statement: Statement
) -> plans.Rows:
    if statement.deferred and sent.pipeline is None:
        sent.pipeline = stack.enter_context(conn.pipeline())
    cursor = conn.execute(statement.query, statement.params)
    if statement.deferred:
        sent.cursors.append(cursor)
        return []
    if sent.pipeline is not None:
        sent.pipeline.sync()
    rows = [row for earlier in sent.cursors for row in earlier.fetchall()]
    sent.cursors.clear()
    return rows + (cursor.fetchall() if cursor.description else [])


async def _apipelined(
    conn: psycopg.AsyncConnection[Any],
    stack: AsyncExitStack,
    sent: _Deferred,
    statement: Statement,
) -> plans.Rows:
    if statement.deferred and sent.pipeline is None:
        sent.pipeline = await stack.enter_async_context(conn.pipeline())
    cursor = await conn.execute(statement.query, statement.params)
    if statement.deferred:
        sent.cursors.append(cursor)
        return []
    if sent.pipeline is not None:
        await sent.pipeline.sync()
    rows = [row for earlier in sent.cursors for row in await earlier.fetchall()]
    sent.cursors.clear()
    return rows + (await cursor.fetchall() if cursor.description else [])


def _pool_kwargs(
    min_size: int, max_size: int, timeout: float, connect_timeout: float
) -> dict[str, Any]:
    if not 1 <= min_size <= max_size:
        raise ConfigError("pool sizes must satisfy 1 <= min_size <= max_size")
    if not timeout > 0:
        raise ConfigError("pool_timeout must be a positive number of seconds")
    if (
        isinstance(connect_timeout, bool)
        or not isinstance(connect_timeout, int | float)
        or not 0 < connect_timeout < math.inf
    ):
        raise ConfigError("connect_timeout must be a positive number of seconds")
    return {
        "min_size": min_size,
        "max_size": max_size,
        "timeout": timeout,
        # libpq counts whole seconds (and at least 2).
        "kwargs": {"autocommit": False, "connect_timeout": max(1, math.ceil(connect_timeout))},
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
        embedder_id: str | None = None,
        schema: str = "synopsis",
        pool_timeout: float = 30.0,
        connect_timeout: float | None = None,
    ) -> None:
        super().__init__(plans.PostgresPlans(schema, clock), embedder, embedder_id)
        self._url = url
        self._target = _Target.of(url)
        if connect_timeout is None:
            connect_timeout = self._target.connect_timeout or _CONNECT_TIMEOUT
        self._pool_kwargs = _pool_kwargs(min_size, max_size, pool_timeout, connect_timeout)
        self._connect_timeout = float(connect_timeout)
        self._setup()

    def _setup(self) -> None:
        """Make the pool (sync: open it now; async: on first use)."""
        raise NotImplementedError


class PostgresStore(ops.SyncDriver, _PostgresStores):
    """A :class:`MemoryStore` and :class:`SummaryStore` on PostgreSQL (psycopg 3, pooled).

    Construction opens the pool and brings ``schema`` up to date (migrations run once, under
    an advisory lock, however many replicas start together). ``clock`` returns epoch seconds
    (default ``time.time``); ``embedder`` enables the ``vector`` and ``hybrid`` search modes
    (``embedder_id`` overrides the identity its vectors are stored with: see
    :attr:`embedder_id`);
    ``pool_timeout`` bounds the wait for a pooled connection; ``connect_timeout`` the wait for
    the server when opening (and for each new connection of the pool): by default the URL's
    own ``connect_timeout``, else 10 seconds.
    """

    def _setup(self) -> None:
        self._migrate()
        self._pool = ConnectionPool(self._url, open=False, **self._pool_kwargs)
        try:
            with _quiet_pool_logs(self._pool.name):
                self._pool.open(wait=True, timeout=self._connect_timeout)
        except psycopg.Error as exc:
            self._pool.close()
            raise self._target.error(exc) from exc
        except BaseException:
            self._pool.close()
            raise

    def _migrate(self) -> None:
        """Connect once (failing fast) and bring the schema up to date on that connection."""
        try:
            conn = psycopg.connect(self._url, **self._pool_kwargs["kwargs"])
        except psycopg.Error as exc:
            raise self._target.error(exc) from exc
        try:
            with conn:  # commits, then closes
                drive(plans.migrate(self._backend.schema), lambda step: _execute(conn, step))
        except psycopg.Error as exc:
            raise _translate(exc, "migration") from exc

    def _run(self, start: ops.Start[T], name: str) -> T:
        perform = _remembered(self._perform)
        try:
            result: T = Retrying(**_retry_policy())(self._attempt, start, perform)
        except psycopg.Error as exc:
            raise _translate(exc, name) from exc
        return result

    def _attempt(self, start: ops.Start[T], perform_other: Callable[[Any], Any]) -> T:
        """Run a fresh flow of the operation; its statements share one new transaction."""
        with ExitStack() as stack:
            conn: psycopg.Connection[Any] | None = None
            sent = _Deferred([])

            def perform(step: Any) -> Any:
                nonlocal conn
                if not isinstance(step, Statement):
                    return perform_other(step)
                if conn is None:  # taken at the first statement, after any embedding
                    conn = stack.enter_context(self._pool.connection())
                return _pipelined(conn, stack, sent, step)

            return drive(start(), perform)

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
        await self._migrate()
        pool: AsyncPool = AsyncConnectionPool(self._url, open=False, **self._pool_kwargs)
        try:
            with _quiet_pool_logs(pool.name):
                await pool.open(wait=True, timeout=self._connect_timeout)
        except psycopg.Error as exc:
            await pool.close()
            raise self._target.error(exc) from exc
        except BaseException:
            await pool.close()
            raise
        return pool

    async def _migrate(self) -> None:
        """Connect once (failing fast) and bring the schema up to date on that connection."""
        try:
            conn = await psycopg.AsyncConnection.connect(self._url, **self._pool_kwargs["kwargs"])
        except psycopg.Error as exc:
            raise self._target.error(exc) from exc
        try:
            async with conn:  # commits, then closes
                await adrive(plans.migrate(self._backend.schema), lambda s: _aexecute(conn, s))
        except psycopg.Error as exc:
            raise _translate(exc, "migration") from exc

    async def __aenter__(self) -> Self:
        return await self.open()

    async def _run(self, start: ops.Start[T], name: str) -> T:
        perform = _aremembered(self._perform)
        try:
            return await AsyncRetrying(**_retry_policy())(self._attempt, start, perform)
        except psycopg.Error as exc:
            raise _translate(exc, name) from exc

    async def _attempt(
        self, start: ops.Start[T], perform_other: Callable[[Any], Awaitable[Any]]
    ) -> T:
        """Run a fresh flow of the operation; its statements share one new transaction."""
        async with AsyncExitStack() as stack:
            conn: psycopg.AsyncConnection[Any] | None = None
            sent = _Deferred([])

            async def perform(step: Any) -> Any:
                nonlocal conn
                if not isinstance(step, Statement):
                    return await perform_other(step)
                if conn is None:  # taken at the first statement, after any embedding
                    pool = self._pool or (await self.open())._pool
                    assert pool is not None
                    conn = await stack.enter_async_context(pool.connection())
                return await _apipelined(conn, stack, sent, step)

            return await adrive(start(), perform)

    async def aclose(self) -> None:
        """Close the connection pool (if open); the store cannot be used afterwards."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
