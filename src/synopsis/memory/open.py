"""Open the right store for a database string: a SQLite path or a PostgreSQL URL.

* ``postgresql://...`` or ``postgres://...``: :class:`~synopsis.memory.postgres.PostgresStore`
  (needs the ``postgres`` extra);
* ``sqlite:///relative/or/absolute/path`` or a plain file path (default ``./synopsis.db``), or
  ``":memory:"``: :class:`~synopsis.memory.sqlite.SQLiteStore`;
* anything else that looks like a URL is refused with :class:`~synopsis.errors.InvalidInput`.

Backends are imported only when chosen, so SQLite users never need psycopg.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, overload

from synopsis.errors import ConfigError, InvalidInput

if TYPE_CHECKING:
    from synopsis.memory._types import AsyncSessionStore, Embedder, SessionStore

__all__ = ["DEFAULT_DB", "open_store", "parse_db", "require_postgres_extra"]

DEFAULT_DB = "./synopsis.db"
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def parse_db(db: str) -> tuple[Literal["sqlite", "postgres"], str]:
    """Classify ``db`` as ``("sqlite", path)`` or ``("postgres", url)``, or raise InvalidInput."""
    if not isinstance(db, str) or not db.strip():
        raise InvalidInput("database must be a SQLite file path or a postgresql:// URL")
    db = db.strip()
    if db.lower().startswith(_POSTGRES_SCHEMES):
        return "postgres", db
    if db.lower().startswith("sqlite://"):
        rest = db[len("sqlite://") :]
        if not rest.startswith("/") or len(rest) < 2:
            raise InvalidInput(f"database URL {db!r} has no file path (use sqlite:///file.db)")
        db = rest[1:]
    elif "://" in db:
        scheme = db.split("://", 1)[0]
        raise InvalidInput(
            f"unsupported database URL scheme {scheme!r}: use a SQLite file path "
            "or a postgresql:// URL"
        )
    if db != ":memory:":
        parent = Path(db).expanduser().parent
        if not parent.is_dir():
            raise InvalidInput(f"cannot create database {db!r}: folder {str(parent)!r} is missing")
    return "sqlite", db if db == ":memory:" else str(Path(db).expanduser())


@overload
def open_store(
    db: str = ...,
    *,
    async_: Literal[False] = ...,
    embedder: Embedder | None = ...,
    embedder_id: str | None = ...,
    schema: str | None = ...,
) -> SessionStore: ...


@overload
def open_store(
    db: str = ...,
    *,
    async_: Literal[True],
    embedder: Embedder | None = ...,
    embedder_id: str | None = ...,
    schema: str | None = ...,
) -> AsyncSessionStore: ...


def open_store(
    db: str = DEFAULT_DB,
    *,
    async_: bool = False,
    embedder: Embedder | None = None,
    embedder_id: str | None = None,
    schema: str | None = None,
) -> SessionStore | AsyncSessionStore:
    """A memory + summary store for ``db`` (see the module docstring); the caller closes it.

    ``embedder`` enables the ``vector`` and ``hybrid`` search modes; ``embedder_id``
    overrides the identity stored with its vectors (see the stores' ``embedder_id``).
    ``schema`` names the PostgreSQL schema holding the tables (default ``synopsis``); a SQLite
    file has none, so naming one there is a ConfigError rather than silently ignored.
    """
    kind, target = parse_db(db)
    if kind == "postgres":
        return _open_postgres(
            target, async_=async_, embedder=(embedder, embedder_id), schema=schema
        )
    if schema is not None:
        raise ConfigError("schema applies to PostgreSQL only; a SQLite database has no schemas")
    from synopsis.memory.sqlite import AsyncSQLiteStore, SQLiteStore

    store = AsyncSQLiteStore if async_ else SQLiteStore
    return store(target, embedder=embedder, embedder_id=embedder_id)


def require_postgres_extra() -> None:
    """Raise ConfigError naming the ``postgres`` extra when its drivers are not installed.

    Called before anything opens a ``postgresql://`` database, so a missing driver is one
    clear line rather than a ModuleNotFoundError from deep inside a backend.
    """
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            "PostgreSQL support needs the 'postgres' extra: pip install 'synopsis[postgres]' "
            f"({exc})"
        ) from exc


def _open_postgres(
    url: str, *, async_: bool, embedder: tuple[Embedder | None, str | None], schema: str | None
) -> SessionStore | AsyncSessionStore:
    require_postgres_extra()
    from synopsis.memory.postgres import AsyncPostgresStore, PostgresStore

    store = AsyncPostgresStore if async_ else PostgresStore
    model, model_id = embedder
    if schema is None:
        return store(url, embedder=model, embedder_id=model_id)
    return store(url, embedder=model, embedder_id=model_id, schema=schema)
