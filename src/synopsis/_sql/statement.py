"""What a database is asked: one statement, and a plan of them.

A :class:`Statement` is SQL text with its parameters: ``?`` or ``:name`` placeholders for
sqlite3 (and ``:name`` for the server's tables on PostgreSQL, see :mod:`.postgres`), or a
psycopg ``Composed`` query whose identifiers are quoted by psycopg. A :data:`Plan` is a
generator that yields statements, is sent each one's rows, and returns its result: it does no
I/O, so one plan runs on either driver, sync or async, and tests can run it on a fake.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from psycopg import sql

__all__ = ["Plan", "Rows", "Statement"]

S = TypeVar("S")
T = TypeVar("T")
#: What a statement returns: its rows, empty for a statement without a result.
Rows = list[tuple[Any, ...]]
#: Yields statements of type S, is sent their rows, returns T.
Plan = Generator[S, Rows, T]


@dataclass(frozen=True, slots=True)
class Statement:
    """One SQL statement and its bound parameters.

    ``many``: run once per parameter set (``executemany``), returning no rows. A ``deferred``
    statement (PostgreSQL stores) is sent at once and its rows are not waited for: the driver
    returns no rows for it, and hands them back (in order) ahead of the rows of the next
    statement that is not deferred, so the server works on it while the plan prepares what
    comes next (a batch upsert's next chunk). A plan ends with a statement that is not.
    """

    sql: str | sql.Composed
    params: Mapping[str, Any] | Sequence[Any] = ()
    many: Sequence[Mapping[str, Any] | Sequence[Any]] | None = None
    deferred: bool = False

    @property
    def text(self) -> str:
        """The SQL as text (sqlite3 takes nothing else)."""
        if not isinstance(self.sql, str):
            raise TypeError("a psycopg Composed statement cannot run on sqlite3")
        return self.sql
