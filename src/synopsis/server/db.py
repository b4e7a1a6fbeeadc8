"""Run the server's SQL plans (:mod:`synopsis.server._sql`) on SQLite or PostgreSQL.

:class:`Database` (sync: the ``keys`` commands) and :class:`AsyncDatabase` (the app) open the
database named by ``db`` (a SQLite path or a ``postgresql://`` URL), migrate the server's
tables, and run each plan in one transaction. Driver errors become
:class:`~synopsis.errors.StoreError` here and nowhere else.

SQLite: one connection behind a lock (WAL, busy timeout); the async twin runs the same code on
a worker thread. PostgreSQL: one autocommit connection (sync) or a connection pool (async).
"""

from __future__ import annotations

import asyncio
import functools
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from synopsis.errors import MigrationError, SessionConflict, StoreError
from synopsis.memory.open import parse_db, require_postgres_extra
from synopsis.server._sql import Dialect, Plan, Rows, Statement, migrate, schema_version

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

__all__ = ["AsyncDatabase", "Database"]

T = TypeVar("T")
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@functools.lru_cache(maxsize=512)
def _pyformat(sql: str) -> str:
    """``:name`` -> ``%(name)s`` for psycopg (our SQL holds no literal ``%``)."""
    return _PARAM.sub(r"%(\1)s", sql)


def _step(plan: Plan[T], rows: Rows | None) -> tuple[Statement | None, T | None]:
    """Advance ``plan``: the next statement, or (None, result) when it returned."""
    try:
        return (next(plan) if rows is None else plan.send(rows)), None
    except StopIteration as stop:
        return None, stop.value


# --- SQLite ----------------------------------------------------------------------------------


class _SQLite:
    """A writer connection (one transaction at a time) and a reader for point lookups.

    In WAL mode a reader never waits for the writer, so a lookup by a unique key (an API
    key's digest) can run on the event loop itself: tens of microseconds, instead of a hop to
    a worker thread and back.
    """

    def __init__(self, path: str, busy_timeout: float = 10.0) -> None:
        self.dialect = Dialect("sqlite")
        self._lock = threading.Lock()
        self._reader_lock = threading.Lock()
        self._conn = _sqlite_connect(path, busy_timeout)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._reader = _sqlite_connect(path, busy_timeout)
        self._reader.execute("PRAGMA query_only=1")

    def run(self, plan: Plan[T], write: bool) -> T:
        with self._lock:
            return _sqlite_transaction(self._conn, plan, "BEGIN IMMEDIATE" if write else "BEGIN")

    def lookup(self, plan: Plan[T]) -> T:
        with self._reader_lock:
            return _sqlite_transaction(self._reader, plan, "BEGIN")

    def close(self) -> None:
        with self._lock, self._reader_lock:
            self._conn.close()
            self._reader.close()


def _sqlite_connect(path: str, busy_timeout: float) -> sqlite3.Connection:
    with _translated("open the database"):
        conn = sqlite3.connect(
            path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        return conn


def _sqlite_transaction(conn: sqlite3.Connection, plan: Plan[T], begin: str) -> T:
    with _translated("run a query"):
        conn.execute(begin)
        try:
            result = _sqlite_drive(conn, plan)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result


def _sqlite_drive(conn: sqlite3.Connection, plan: Plan[T]) -> T:
    statement, result = _step(plan, None)
    while statement is not None:
        if statement.many is not None:
            conn.executemany(statement.sql, statement.many)
            rows: Rows = []
        else:
            rows = conn.execute(statement.sql, statement.params).fetchall()
        statement, result = _step(plan, rows)
    return result  # type: ignore[return-value]


@contextmanager
def _translated(action: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.IntegrityError as exc:  # the twin of PostgreSQL's 23505
        raise SessionConflict(
            f"a concurrent write to the same rows conflicted ({exc}); retry the request"
        ) from exc
    except sqlite3.Error as exc:
        raise StoreError(f"sqlite could not {action}: {exc}") from exc


# --- PostgreSQL ------------------------------------------------------------------------------


#: SQLSTATEs of a write that met another one (unique violation, serialization failure,
#: deadlock): the request may be retried, the database is fine.
_PG_CONFLICTS = frozenset({"23505", "40001", "40P01"})


def _pg_error(exc: Exception, what: str) -> StoreError | SessionConflict:
    """A psycopg error without its text (which may quote data), naming the SQLSTATE; a
    conflict between concurrent writes is a :class:`SessionConflict` (409), not a 503."""
    state = getattr(exc, "sqlstate", None)
    if state in _PG_CONFLICTS:
        return SessionConflict(
            f"a concurrent write to the same rows conflicted ({type(exc).__name__}, SQLSTATE "
            f"{state}); retry the request"
        )
    return StoreError(f"PostgreSQL {what} failed: {type(exc).__name__} (SQLSTATE {state})")


def _pg_drive(cursor: psycopg.Cursor[Any], plan: Plan[T]) -> T:
    statement, result = _step(plan, None)
    while statement is not None:
        if statement.many is not None:
            cursor.executemany(_pyformat(statement.sql), statement.many)
            rows: Rows = []
        else:
            cursor.execute(_pyformat(statement.sql), statement.params)
            rows = cursor.fetchall() if cursor.description else []
        statement, result = _step(plan, rows)
    return result  # type: ignore[return-value]


async def _pg_adrive(cursor: psycopg.AsyncCursor[Any], plan: Plan[T]) -> T:
    statement, result = _step(plan, None)
    while statement is not None:
        if statement.many is not None:
            await cursor.executemany(_pyformat(statement.sql), statement.many)
            rows: Rows = []
        else:
            await cursor.execute(_pyformat(statement.sql), statement.params)
            rows = await cursor.fetchall() if cursor.description else []
        statement, result = _step(plan, rows)
    return result  # type: ignore[return-value]


class _Postgres:
    """One autocommit connection; each plan in its own transaction."""

    def __init__(self, url: str, schema: str) -> None:
        import psycopg

        self.dialect = Dialect("postgres", schema)
        self._lock = threading.Lock()
        try:
            self._conn = psycopg.connect(url, autocommit=True)
        except psycopg.Error as exc:
            raise _pg_error(exc, "connect") from exc

    def run(self, plan: Plan[T], write: bool) -> T:
        import psycopg

        with self._lock:
            try:
                with self._conn.transaction(), self._conn.cursor() as cursor:
                    return _pg_drive(cursor, plan)
            except psycopg.Error as exc:
                raise _pg_error(exc, "query") from exc

    def close(self) -> None:
        self._conn.close()


# --- the two faces ---------------------------------------------------------------------------


class _Runner(Protocol):
    dialect: Dialect

    def run(self, plan: Plan[T], write: bool) -> T: ...

    def close(self) -> None: ...


def _open_sync(db: str, schema: str) -> _Runner:
    kind, target = parse_db(db)
    if kind == "sqlite":
        return _SQLite(target)
    require_postgres_extra()
    return _Postgres(target, schema)


def _migrated(runner: _Runner, clock: Callable[[], float]) -> None:
    try:
        runner.run(migrate(runner.dialect, clock()), True)
    except MigrationError:
        runner.close()
        raise
    except (StoreError, SessionConflict) as exc:
        runner.close()
        raise MigrationError(f"could not migrate the server's tables: {exc}") from exc


class Database:
    """The server's tables, synchronously (the ``keys`` commands)."""

    def __init__(
        self, db: str, *, schema: str = "synopsis", clock: Callable[[], float] = time.time
    ):
        self.clock = clock
        self._runner = _open_sync(db, schema)
        _migrated(self._runner, clock)

    @property
    def dialect(self) -> Dialect:
        return self._runner.dialect

    def run(self, plan: Plan[T], *, write: bool = True) -> T:
        """Run ``plan`` in one transaction and return its result."""
        return self._runner.run(plan, write)

    def close(self) -> None:
        self._runner.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncDatabase:
    """The server's tables for the app: SQLite on a worker thread, or a PostgreSQL pool.

    Build it with :meth:`open` (which migrates); close it with :meth:`aclose`.
    """

    def __init__(
        self,
        dialect: Dialect,
        *,
        sqlite: _SQLite | None = None,
        pool: AsyncConnectionPool[Any] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.dialect = dialect
        self.clock = clock
        self._sqlite = sqlite
        self._pool = pool

    @classmethod
    async def open(
        cls,
        db: str,
        *,
        schema: str = "synopsis",
        pool_size: int = 10,
        clock: Callable[[], float] = time.time,
    ) -> AsyncDatabase:
        """Connect to ``db``, migrate the server's tables, and return the database."""
        kind, target = parse_db(db)
        if kind == "sqlite":
            sqlite = await asyncio.to_thread(_SQLite, target)
            await asyncio.to_thread(_migrated, sqlite, clock)
            return cls(sqlite.dialect, sqlite=sqlite, clock=clock)
        require_postgres_extra()
        return cls(
            Dialect("postgres", schema),
            pool=await _open_pool(target, schema, pool_size, clock),
            clock=clock,
        )

    async def run(self, plan: Plan[T], *, write: bool = True, lookup: bool = False) -> T:
        """Run ``plan`` in one transaction and return its result.

        ``lookup`` marks a read of a few rows by a unique key: on SQLite it runs on the
        calling thread (see :class:`_SQLite`).
        """
        if self._sqlite is not None:
            if lookup:
                return self._sqlite.lookup(plan)
            return await asyncio.to_thread(self._sqlite.run, plan, write)
        assert self._pool is not None
        import psycopg

        try:
            async with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cursor:
                return await _pg_adrive(cursor, plan)
        except psycopg.Error as exc:
            raise _pg_error(exc, "query") from exc

    async def version(self) -> int:
        """The version the server's tables are at (for the readiness probe)."""
        return await self.run(schema_version(self.dialect), write=False)

    async def aclose(self) -> None:
        if self._sqlite is not None:
            await asyncio.to_thread(self._sqlite.close)
        if self._pool is not None:
            await self._pool.close()


async def _open_pool(
    url: str, schema: str, size: int, clock: Callable[[], float]
) -> AsyncConnectionPool[Any]:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url, min_size=1, max_size=size, open=False, kwargs={"autocommit": True}
    )
    try:
        await pool.open(wait=True, timeout=30.0)
        async with pool.connection() as conn, conn.transaction(), conn.cursor() as cursor:
            await _pg_adrive(cursor, migrate(Dialect("postgres", schema), clock()))
    except psycopg.Error as exc:
        await pool.close()
        raise MigrationError(
            f"could not migrate the server's tables: {_pg_error(exc, 'migration')}"
        ) from exc
    except BaseException:
        await pool.close()
        raise
    return pool
