"""The server's own tables (API keys, session histories, the job queue): SQL as pure plans.

A *plan* is a generator that yields :class:`~synopsis._sql.Statement` values and is sent
each statement's rows; it returns its result. It does no I/O: :mod:`synopsis.server.db` runs
it in one transaction on SQLite or PostgreSQL, sync or async, with the plumbing the stores
use too (:mod:`synopsis._sql`).

Statements are written once, with ``:name`` parameters, in the SQL both databases share;
:class:`Dialect` supplies what differs (table names, column types, row locks). Times are
epoch seconds passed in as parameters, never ``now()`` in SQL, so one clock rules them all
and tests can fake it.

The tables live next to the store's: in the same SQLite file, or in the same PostgreSQL
schema, with their own version table (``server_schema_version``), migrated on open.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Final, Literal, TypeVar

from synopsis import _sql
from synopsis._sql import Rows, Statement
from synopsis.errors import MigrationError

__all__ = ["MIGRATIONS", "Dialect", "Plan", "Rows", "Statement", "migrate", "schema_version"]

T = TypeVar("T")
#: Yields statements, is sent their rows (empty for statements without a result), returns T.
Plan = _sql.Plan[Statement, T]


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs between SQLite and PostgreSQL in the server's SQL."""

    name: Literal["sqlite", "postgres"]
    #: The PostgreSQL schema (ignored on SQLite, where everything lives in the one file).
    schema: str = "synopsis"

    def table(self, name: str) -> str:
        if self.name == "sqlite":
            return f"server_{name}"
        return f'"{self.schema}".server_{name}'

    @property
    def real(self) -> str:
        return "REAL" if self.name == "sqlite" else "DOUBLE PRECISION"

    @property
    def serial(self) -> str:
        if self.name == "sqlite":
            return "INTEGER PRIMARY KEY AUTOINCREMENT"
        return "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"

    @property
    def for_update(self) -> str:
        """Locks the selected rows on PostgreSQL; SQLite serializes writers anyway."""
        return "" if self.name == "sqlite" else " FOR UPDATE"

    @property
    def skip_locked(self) -> str:
        """Skips rows another transaction holds: concurrent claimers never wait on each other."""
        return "" if self.name == "sqlite" else " FOR UPDATE SKIP LOCKED"


def _migration_1(d: Dialect) -> list[str]:
    keys, sessions, messages, jobs = (d.table(n) for n in ("keys", "sessions", "messages", "jobs"))
    return [
        f"CREATE TABLE {keys} (key_id TEXT PRIMARY KEY, tenant TEXT NOT NULL,"
        f" digest TEXT NOT NULL UNIQUE, label TEXT NOT NULL, created_at {d.real} NOT NULL,"
        f" revoked_at {d.real})",
        f"CREATE INDEX server_keys_by_tenant ON {keys} (tenant)",
        f"CREATE TABLE {sessions} (tenant TEXT NOT NULL, session_id TEXT NOT NULL,"
        f" user_id TEXT NOT NULL, message_count INTEGER NOT NULL, created_at {d.real} NOT NULL,"
        f" updated_at {d.real} NOT NULL, PRIMARY KEY (tenant, session_id))",
        f"CREATE INDEX server_sessions_by_user ON {sessions} (tenant, user_id)",
        f"CREATE TABLE {messages} (tenant TEXT NOT NULL, session_id TEXT NOT NULL,"
        f" position INTEGER NOT NULL, body TEXT NOT NULL,"
        f" PRIMARY KEY (tenant, session_id, position))",
        f"CREATE TABLE {jobs} (id {d.serial}, tenant TEXT NOT NULL, user_id TEXT NOT NULL,"
        f" session_id TEXT NOT NULL, created_at {d.real} NOT NULL, run_after {d.real} NOT NULL,"
        f" attempts INTEGER NOT NULL DEFAULT 0, lease_owner TEXT, lease_until {d.real},"
        f" finished_at {d.real}, last_error TEXT)",
        # At most one open job per session: enqueueing twice is a no-op.
        f"CREATE UNIQUE INDEX server_jobs_open ON {jobs} (tenant, session_id)"
        " WHERE finished_at IS NULL",
        f"CREATE INDEX server_jobs_ready ON {jobs} (run_after) WHERE finished_at IS NULL",
    ]


#: Each migration is a function of the dialect giving its statements, applied in order.
MIGRATIONS: Final = (_migration_1,)


def _prelude(d: Dialect) -> list[Statement]:
    version_table = (
        f"CREATE TABLE IF NOT EXISTS {d.table('schema_version')}"
        f" (version INTEGER PRIMARY KEY, applied_at {d.real} NOT NULL)"
    )
    if d.name == "sqlite":
        return [Statement(version_table)]
    # One migrator at a time, however many replicas start together (released at commit).
    lock = zlib.crc32(f"synopsis.server:{d.schema}".encode())
    return [
        Statement("SELECT pg_advisory_xact_lock(:lock)", {"lock": lock}),
        Statement(f'CREATE SCHEMA IF NOT EXISTS "{d.schema}"'),
        Statement(version_table),
    ]


def schema_version(d: Dialect) -> Plan[int]:
    """The version the tables are at (0: never migrated)."""
    if d.name == "postgres":
        exists = yield Statement(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = :schema"
            " AND table_name = 'server_schema_version'",
            {"schema": d.schema},
        )
        if not exists:
            return 0
    else:
        exists = yield Statement(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'server_schema_version'"
        )
        if not exists:
            return 0
    rows = yield Statement(f"SELECT coalesce(max(version), 0) FROM {d.table('schema_version')}")
    return int(rows[0][0])


def migrate(d: Dialect, now: float) -> Plan[int]:
    """Bring the server's tables to the newest version; return the version found."""
    for statement in _prelude(d):  # noqa: UP028 - a list cannot be sent the rows
        yield statement
    rows = yield Statement(f"SELECT coalesce(max(version), 0) FROM {d.table('schema_version')}")
    have = int(rows[0][0])
    if have > len(MIGRATIONS):
        raise MigrationError(
            f"the server's tables are at version {have}, newer than this code knows "
            f"({len(MIGRATIONS)}); upgrade synopsis"
        )
    for version in range(have + 1, len(MIGRATIONS) + 1):
        for sql in MIGRATIONS[version - 1](d):
            yield Statement(sql)
        yield Statement(
            f"INSERT INTO {d.table('schema_version')} (version, applied_at) VALUES (:v, :now)",
            {"v": version, "now": now},
        )
    return have
