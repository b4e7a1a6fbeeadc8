"""Pure SQL builders for the PostgreSQL backend's summaries and outbox (no I/O).

As in :mod:`synopsis.memory._sql_postgres`: only the schema name is an identifier, every
value is a bound parameter.
"""

from __future__ import annotations

from typing import Any, Final, LiteralString

from psycopg import sql

from synopsis.memory._sql_postgres_schema import Statement, advisory_key, stmt
from synopsis.memory._types import SessionSummary

__all__ = [
    "complete_outbox",
    "delete_user_summaries",
    "fail_outbox",
    "insert_summary",
    "lock_key",
    "pending_outbox",
    "summary_history",
    "summary_version",
]

_SUMMARY_COLUMNS: Final = (
    "x.tenant, x.user_id, x.session_id, x.version, x.text, x.covers_from, x.covers_to,"
    " x.model, x.content_hash, x.created_at"
)


#: The WHERE condition of one outbox entry (or summary version), and its parameters.
_ENTRY: Final = "tenant = %(tenant)s AND session_id = %(session)s AND version = %(version)s"


def _entry(tenant: str, session_id: str, version: int) -> dict[str, Any]:
    return {"tenant": tenant, "session": session_id, "version": version}


def lock_key(tenant: str, session_id: str) -> Statement:
    """Serialize the savers of one session (released at commit)."""
    return Statement(
        sql.Composed([sql.SQL("SELECT pg_advisory_xact_lock(%(key)s)")]),
        {"key": advisory_key("synopsis-summary", tenant, session_id)},
    )


def summary_version(schema: str, tenant: str, session_id: str, version: int) -> Statement:
    return stmt(
        schema,
        "SELECT " + _SUMMARY_COLUMNS + " FROM {s}.summaries x WHERE x.tenant = %(tenant)s"
        " AND x.session_id = %(session)s AND x.version = %(version)s",
        _entry(tenant, session_id, version),
    )


def summary_history(schema: str, tenant: str, session_id: str, *, latest: bool) -> Statement:
    """Every version of a session, oldest first (or only the newest)."""
    order: LiteralString = " ORDER BY x.version DESC LIMIT 1" if latest else " ORDER BY x.version"
    return stmt(
        schema,
        "SELECT " + _SUMMARY_COLUMNS + " FROM {s}.summaries x WHERE x.tenant = %(tenant)s"
        " AND x.session_id = %(session)s" + order,
        {"tenant": tenant, "session": session_id},
    )


def insert_summary(
    schema: str, summary: SessionSummary, *, created_at: float, now: float
) -> list[Statement]:
    """The summary and its outbox entry (run in one transaction)."""
    params = {
        "tenant": summary.tenant,
        "user_id": summary.user_id,
        "session": summary.session_id,
        "version": summary.version,
        "text": summary.text,
        "covers_from": summary.covers_from,
        "covers_to": summary.covers_to,
        "model": summary.model,
        "hash": summary.content_hash,
        "created_at": created_at,
    }
    return [
        stmt(
            schema,
            "INSERT INTO {s}.summaries (tenant, user_id, session_id, version, text, covers_from,"
            " covers_to, model, content_hash, created_at) VALUES (%(tenant)s, %(user_id)s,"
            " %(session)s, %(version)s, %(text)s, %(covers_from)s, %(covers_to)s, %(model)s,"
            " %(hash)s, %(created_at)s) ON CONFLICT DO NOTHING RETURNING 1",
            params,
        ),
        stmt(
            schema,
            "INSERT INTO {s}.outbox (tenant, session_id, version, enqueued_at)"
            " VALUES (%(tenant)s, %(session)s, %(version)s, %(now)s) ON CONFLICT DO NOTHING",
            {**params, "now": now},
        ),
    ]


def pending_outbox(schema: str, tenant: str | None, limit: int) -> Statement:
    """Outbox entries, fewest attempts first, then oldest, of one tenant or of all.

    No index gives this order (completed entries are deleted, so the table holds only pending
    ones); PostgreSQL sorts them, which is cheap at outbox sizes.
    """
    return stmt(
        schema,
        "SELECT " + _SUMMARY_COLUMNS + ", o.attempts FROM {s}.outbox o JOIN {s}.summaries x"
        " USING (tenant, session_id, version)"
        " WHERE %(tenant)s::text IS NULL OR o.tenant = %(tenant)s::text"
        " ORDER BY o.attempts, o.enqueued_at,"
        ' o.tenant COLLATE "C", o.session_id COLLATE "C", o.version'
        " LIMIT %(limit)s",
        {"tenant": tenant, "limit": limit},
    )


def complete_outbox(schema: str, tenant: str, session_id: str, version: int) -> Statement:
    params = _entry(tenant, session_id, version)
    return stmt(schema, "DELETE FROM {s}.outbox WHERE " + _ENTRY, params)


def fail_outbox(schema: str, tenant: str, session_id: str, version: int) -> Statement:
    """Count one more failed attempt of a pending entry; returns the new count (no row: none)."""
    return stmt(
        schema,
        "UPDATE {s}.outbox SET attempts = attempts + 1 WHERE " + _ENTRY + " RETURNING attempts",
        _entry(tenant, session_id, version),
    )


def delete_user_summaries(schema: str, tenant: str, user_id: str) -> Statement:
    """Delete a user's summaries (their outbox entries go with them); returns the count."""
    return stmt(
        schema,
        "WITH gone AS (DELETE FROM {s}.summaries WHERE tenant = %(tenant)s"
        " AND user_id = %(user_id)s RETURNING 1) SELECT count(*) FROM gone",
        {"tenant": tenant, "user_id": user_id},
    )
