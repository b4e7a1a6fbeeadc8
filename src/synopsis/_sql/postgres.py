"""Running statements and plans on psycopg 3, and the translation of its errors.

A statement whose SQL is text is written with ``:name`` parameters (the form sqlite3 takes
too, so the server's tables write each statement once) and handed to psycopg as
``%(name)s``; a ``Composed`` one is psycopg's own and runs as it is. Every ``psycopg.Error``
that leaves a store or the server's tables goes through :func:`error` (no driver text, which
may quote data: the class and the SQLSTATE).
"""

from __future__ import annotations

import functools
import re
from typing import Any, TypeVar

import psycopg

from synopsis._flow import adrive, drive
from synopsis._sql.statement import Plan, Rows, Statement
from synopsis.errors import DatabaseError, MigrationError, StoreError

__all__ = ["aexecute", "arun", "error", "execute", "run"]

T = TypeVar("T")
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
Connection = psycopg.Connection[Any] | psycopg.Cursor[Any]
AsyncConnection = psycopg.AsyncConnection[Any] | psycopg.AsyncCursor[Any]


def error(exc: psycopg.Error, what: str) -> StoreError:
    """A psycopg error as a StoreError naming the operation ``what`` and the SQLSTATE: a
    MigrationError for ``"migration"``, else a DatabaseError."""
    state = exc.sqlstate
    message = f"PostgreSQL {what} failed: {type(exc).__name__} (SQLSTATE {state})"
    if what == "migration":
        return MigrationError(message)
    return DatabaseError(message, operation=what, sqlstate=state)


@functools.lru_cache(maxsize=512)
def _pyformat(sql: str) -> str:
    """``:name`` -> ``%(name)s`` (the text statements hold no literal ``%``)."""
    return _PARAM.sub(r"%(\1)s", sql)


def _query(statement: Statement) -> Any:
    return _pyformat(statement.sql) if isinstance(statement.sql, str) else statement.sql


def execute(conn: Connection, statement: Statement) -> Rows:
    """Run one statement on a connection or cursor; its rows (none for ``many``)."""
    if statement.many is not None:
        cursor = conn.cursor() if isinstance(conn, psycopg.Connection) else conn
        cursor.executemany(_query(statement), statement.many)
        return []
    cursor = conn.execute(_query(statement), statement.params)
    return cursor.fetchall() if cursor.description else []


async def aexecute(conn: AsyncConnection, statement: Statement) -> Rows:
    """The async twin of :func:`execute`."""
    if statement.many is not None:
        cursor = conn.cursor() if isinstance(conn, psycopg.AsyncConnection) else conn
        await cursor.executemany(_query(statement), statement.many)
        return []
    cursor = await conn.execute(_query(statement), statement.params)
    return await cursor.fetchall() if cursor.description else []


def run(conn: psycopg.Connection[Any], plan: Plan[Statement, T]) -> T:
    """Run ``plan`` in one transaction on ``conn``; its result."""
    with conn.transaction(), conn.cursor() as cursor:
        return drive(plan, lambda statement: execute(cursor, statement))


async def arun(conn: psycopg.AsyncConnection[Any], plan: Plan[Statement, T]) -> T:
    """The async twin of :func:`run`."""
    async with conn.transaction(), conn.cursor() as cursor:
        return await adrive(plan, lambda statement: aexecute(cursor, statement))
