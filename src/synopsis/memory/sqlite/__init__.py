"""The SQLite backend, the embedded default: one file, no server.

:mod:`.store` holds :class:`SQLiteStore` and :class:`AsyncSQLiteStore`; :mod:`.schema` the
tables and migrations; :mod:`.sql` the statement builders; :mod:`.vectors` the embedding
statements.
"""

from synopsis.memory.sqlite.store import AsyncSQLiteStore, SQLiteStore

__all__ = ["AsyncSQLiteStore", "SQLiteStore"]
