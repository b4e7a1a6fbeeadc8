"""Running statements and plans on sqlite3, and the translation of its errors.

The connections are opened by their owners (the store and the server's tables set different
pragmas and lock patience); this module runs what they are asked, in one transaction, and is
where every ``sqlite3.Error`` becomes a :class:`~synopsis.errors.StoreError`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from synopsis._flow import drive
from synopsis._sql.statement import Plan, Rows, Statement
from synopsis.errors import InvalidInput, StoreError

__all__ = ["execute", "run", "transaction", "translated"]

T = TypeVar("T")


@contextmanager
def translated(action: str) -> Iterator[None]:
    """Turn driver errors into StoreError, naming ``action`` (a number sqlite3 cannot bind,
    such as an integer beyond 64 bits, is the caller's: InvalidInput)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreError(f"sqlite could not {action}: {exc}") from exc
    except OverflowError as exc:
        raise InvalidInput(f"a number is too large to store: {exc}") from exc


def execute(conn: sqlite3.Connection, statement: Statement) -> Rows:
    """Run one statement; its rows (none for ``many``)."""
    if statement.many is not None:
        conn.executemany(statement.text, statement.many)
        return []
    return conn.execute(statement.text, statement.params).fetchall()


@contextmanager
def transaction(
    conn: sqlite3.Connection, begin: Callable[[], object] | None = None
) -> Iterator[sqlite3.Connection]:
    """One transaction around the block: ``begin()`` (default ``BEGIN``) opens it, an error
    rolls it back (when SQLite has not already), else it commits."""
    if begin is None:
        conn.execute("BEGIN")
    else:
        begin()
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def run(conn: sqlite3.Connection, plan: Plan[Statement, T], begin: str = "BEGIN IMMEDIATE") -> T:
    """Run ``plan`` in one transaction opened with ``begin``; its result."""
    with transaction(conn, lambda: conn.execute(begin)):
        return drive(plan, lambda statement: execute(conn, statement))
