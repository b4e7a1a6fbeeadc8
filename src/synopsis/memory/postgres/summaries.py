"""Pure SQL builders for the PostgreSQL backend's summaries, outbox, deletion generations and
summary-job claims (no I/O).

As in :mod:`synopsis.memory.postgres.sql`: only the schema name is an identifier, every
value is a bound parameter.

Deletion wins across replicas through a transaction-scoped advisory lock per user: a write
made with a generation (``put`` / ``save_summary`` with ``generation=``) takes it shared and
reads the generation, ``delete_user`` takes it exclusive and moves the generation. Whichever
commits first, the other sees it: a delete waits for the write and then deletes what it wrote;
a write waits for the delete and then finds the new generation.
"""

from __future__ import annotations

from typing import Any, Final, LiteralString

from psycopg import sql

from synopsis.memory._guards import Claim
from synopsis.memory._types import SessionSummary
from synopsis.memory.postgres.schema import Statement, advisory_key, stmt

__all__ = [
    "bump_generation",
    "claim_job",
    "complete_outbox",
    "delete_user_claims",
    "delete_user_summaries",
    "fail_outbox",
    "insert_summary",
    "lock_session",
    "lock_user",
    "pending_outbox",
    "release_job",
    "select_generation",
    "summary_history",
    "summary_version",
]

_SUMMARY_COLUMNS: Final = (
    "x.tenant, x.user_id, x.session_id, x.version, x.text, x.covers_from, x.covers_to,"
    " x.model, x.content_hash, x.created_at"
)

#: The WHERE condition of one session, and of one outbox entry (or summary version).
_SESSION: Final = "tenant = %(tenant)s AND user_id = %(user_id)s AND session_id = %(session)s"
_ENTRY: Final = _SESSION + " AND version = %(version)s"
_USER: Final = "tenant = %(tenant)s AND user_id = %(user_id)s"


def _session(tenant: str, user_id: str, session_id: str, **more: Any) -> dict[str, Any]:
    return {"tenant": tenant, "user_id": user_id, "session": session_id, **more}


def _of_user(schema: str, template: LiteralString, tenant: str, user_id: str) -> Statement:
    """A statement on one user's rows (``template`` names ``%(tenant)s`` and ``%(user_id)s``)."""
    return stmt(schema, template, {"tenant": tenant, "user_id": user_id})


def _advisory(function: LiteralString, *labels: str) -> Statement:
    return Statement(
        sql.Composed([sql.SQL("SELECT " + function + "(%(key)s)")]),
        {"key": advisory_key(*labels)},
    )


def lock_session(tenant: str, user_id: str, session_id: str) -> Statement:
    """Serialize the savers of one session (released at commit)."""
    return _advisory("pg_advisory_xact_lock", "synopsis-summary", tenant, user_id, session_id)


def lock_user(tenant: str, user_id: str, *, exclusive: bool) -> Statement:
    """The user's deletion lock (released at commit): exclusive to delete, shared to write."""
    function: LiteralString = (
        "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    )
    return _advisory(function, "synopsis-user", tenant, user_id)


def select_generation(schema: str, tenant: str, user_id: str) -> Statement:
    """The user's deletion generation (no row: 0)."""
    return _of_user(
        schema,
        "SELECT coalesce(max(generation), 0) FROM {s}.user_generations WHERE " + _USER,
        tenant,
        user_id,
    )


def bump_generation(schema: str, tenant: str, user_id: str) -> Statement:
    return _of_user(
        schema,
        "INSERT INTO {s}.user_generations AS g (tenant, user_id, generation)"
        " VALUES (%(tenant)s, %(user_id)s, 1) ON CONFLICT (tenant, user_id)"
        " DO UPDATE SET generation = g.generation + 1",
        tenant,
        user_id,
    )


def summary_version(
    schema: str, tenant: str, user_id: str, session_id: str, version: int
) -> Statement:
    return stmt(
        schema,
        "SELECT " + _SUMMARY_COLUMNS + " FROM {s}.summaries x WHERE " + _ENTRY,
        _session(tenant, user_id, session_id, version=version),
    )


def summary_history(
    schema: str, tenant: str, user_id: str, session_id: str, *, latest: bool
) -> Statement:
    """Every version of a session, oldest first (or only the newest)."""
    order: LiteralString = " ORDER BY x.version DESC LIMIT 1" if latest else " ORDER BY x.version"
    return stmt(
        schema,
        "SELECT " + _SUMMARY_COLUMNS + " FROM {s}.summaries x WHERE " + _SESSION + order,
        _session(tenant, user_id, session_id),
    )


def insert_summary(
    schema: str, summary: SessionSummary, *, created_at: float, now: float
) -> list[Statement]:
    """The summary and its outbox entry (run in one transaction)."""
    params = {
        **_session(summary.tenant, summary.user_id, summary.session_id),
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
            "INSERT INTO {s}.outbox (tenant, user_id, session_id, version, enqueued_at)"
            " VALUES (%(tenant)s, %(user_id)s, %(session)s, %(version)s, %(now)s)"
            " ON CONFLICT DO NOTHING",
            {**params, "now": now},
        ),
    ]


def pending_outbox(schema: str, tenant: str | None, limit: int) -> Statement:
    """Outbox entries, fewest attempts first, then oldest, of one tenant or of all, each with
    its user's deletion generation.

    No index gives this order (completed entries are deleted, so the table holds only pending
    ones); PostgreSQL sorts them, which is cheap at outbox sizes.
    """
    return stmt(
        schema,
        "SELECT " + _SUMMARY_COLUMNS + ", o.attempts, coalesce(g.generation, 0)"
        " FROM {s}.outbox o JOIN {s}.summaries x USING (tenant, user_id, session_id, version)"
        " LEFT JOIN {s}.user_generations g USING (tenant, user_id)"
        " WHERE %(tenant)s::text IS NULL OR o.tenant = %(tenant)s::text"
        ' ORDER BY o.attempts, o.enqueued_at, o.tenant COLLATE "C",'
        ' o.user_id COLLATE "C", o.session_id COLLATE "C", o.version'
        " LIMIT %(limit)s",
        {"tenant": tenant, "limit": limit},
    )


def complete_outbox(
    schema: str, tenant: str, user_id: str, session_id: str, version: int
) -> Statement:
    params = _session(tenant, user_id, session_id, version=version)
    return stmt(schema, "DELETE FROM {s}.outbox WHERE " + _ENTRY, params)


def fail_outbox(schema: str, tenant: str, user_id: str, session_id: str, version: int) -> Statement:
    """Count one more failed attempt of a pending entry; returns the new count (no row: none)."""
    return stmt(
        schema,
        "UPDATE {s}.outbox SET attempts = attempts + 1 WHERE " + _ENTRY + " RETURNING attempts",
        _session(tenant, user_id, session_id, version=version),
    )


def delete_user_summaries(schema: str, tenant: str, user_id: str) -> Statement:
    """Delete a user's summaries (their outbox entries go with them); returns the count."""
    return _of_user(
        schema,
        "WITH gone AS (DELETE FROM {s}.summaries WHERE " + _USER + " RETURNING 1)"
        " SELECT count(*) FROM gone",
        tenant,
        user_id,
    )


def delete_user_claims(schema: str, tenant: str, user_id: str) -> Statement:
    return _of_user(schema, "DELETE FROM {s}.summary_jobs WHERE " + _USER, tenant, user_id)


def claim_job(schema: str, claim: Claim, now: float) -> Statement:
    """Take the session's claim unless another owner's lease is live (one atomic statement:
    the conflicting row is locked while the condition is checked); a row back says taken."""
    return stmt(
        schema,
        "INSERT INTO {s}.summary_jobs AS j (tenant, user_id, session_id, owner, covers_to,"
        " expires_at) VALUES (%(tenant)s, %(user_id)s, %(session)s, %(owner)s, %(covers_to)s,"
        " %(expires_at)s) ON CONFLICT (tenant, user_id, session_id) DO UPDATE SET"
        " owner = excluded.owner, covers_to = excluded.covers_to,"
        " expires_at = excluded.expires_at"
        " WHERE j.expires_at <= %(now)s OR j.owner = excluded.owner RETURNING 1",
        _session(
            claim.tenant,
            claim.user_id,
            claim.session_id,
            owner=claim.owner,
            covers_to=claim.covers_to,
            expires_at=now + claim.lease_seconds,
            now=now,
        ),
    )


def release_job(schema: str, tenant: str, user_id: str, session_id: str, owner: str) -> Statement:
    return stmt(
        schema,
        "DELETE FROM {s}.summary_jobs WHERE " + _SESSION + " AND owner = %(owner)s RETURNING 1",
        _session(tenant, user_id, session_id, owner=owner),
    )
