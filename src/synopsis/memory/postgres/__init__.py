"""The PostgreSQL backend: many service replicas sharing one database (``synopsis[postgres]``).

:mod:`.store` holds :class:`PostgresStore` and :class:`AsyncPostgresStore`, which drive the
plans of :mod:`.plans` over psycopg; :mod:`.schema` the tables and migrations; :mod:`.sql`,
:mod:`.summaries` and :mod:`.vectors` the statements; :mod:`.tiers` the impact tiers of
keyword search. The stores (and psycopg) load on first use, so the pure modules import
without the extra.
"""

import typing

if typing.TYPE_CHECKING:
    from synopsis.memory.postgres.store import AsyncPostgresStore, DatabaseError, PostgresStore

__all__ = ["AsyncPostgresStore", "DatabaseError", "PostgresStore"]

_STORE = frozenset(__all__)


def __getattr__(name: str) -> typing.Any:
    if name in _STORE:
        from synopsis.memory.postgres import store

        return getattr(store, name)
    raise AttributeError(f"module 'synopsis.memory.postgres' has no attribute {name!r}")
