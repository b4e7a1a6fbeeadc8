"""The SQL plumbing the stores and the server's tables share (internal, not API).

:mod:`.statement` holds what a database is asked: a :class:`Statement` and a :data:`Plan`, a
generator that yields statements, is sent their rows and returns its result, doing no I/O.
:mod:`.sqlite` and :mod:`.postgres` run them (sync and async) and turn each driver's errors
into :class:`~synopsis.errors.StoreError` — the one place either driver's exceptions are
seen. :mod:`.postgres` imports psycopg, so it is imported only where PostgreSQL is used.
"""

from synopsis._sql.statement import Plan, Rows, Statement

__all__ = ["Plan", "Rows", "Statement"]
