"""Session histories: the turns a tenant's users appended, kept by the server.

The library's session memory never stores the conversation (the agent owns it); a service
has to, so that a summary job running on any replica can read it. A session id is unique
within a tenant, as in the summary store, and belongs to the user who first wrote to it:
another user of the tenant writing to it gets :class:`SessionConflict`, and reads through
another user's path find nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from synopsis.errors import InvalidInput, SessionConflict
from synopsis.server._sql import Dialect, Plan, Rows, Statement
from synopsis.server.db import AsyncDatabase

__all__ = ["Appended", "AsyncSessionHistories", "SessionInfo"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Appended:
    """How long the history was before and after an append."""

    before: int
    after: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    user_id: str
    message_count: int
    created_at: float


def _where(d: Dialect, table: str) -> str:
    return f"{d.table(table)} WHERE tenant = :tenant AND session_id = :session"


# --- plans (pure) ----------------------------------------------------------------------------


def append_plan(
    d: Dialect, ids: tuple[str, str, str], bodies: Sequence[str], now: float
) -> Plan[Appended]:
    """Append serialized messages to the session, creating it for its first user."""
    tenant, user, session = ids
    key = {"tenant": tenant, "session": session}
    rows: Rows = []
    for _ in range(3):  # a delete of the user may remove the row between the two statements
        yield Statement(
            f"INSERT INTO {d.table('sessions')} (tenant, session_id, user_id, message_count,"
            " created_at, updated_at) VALUES (:tenant, :session, :user, 0, :now, :now)"
            " ON CONFLICT (tenant, session_id) DO NOTHING",
            {**key, "user": user, "now": now},
        )
        rows = yield Statement(
            f"SELECT user_id, message_count FROM {_where(d, 'sessions')}{d.for_update}", key
        )
        if rows:
            break
    else:
        raise SessionConflict(f"session {session!r} was being deleted; retry the request")
    owner, count = rows[0]
    if owner != user:
        raise SessionConflict(f"session {session!r} belongs to another user of this tenant")
    # The session row is locked: rows at or past its count are leftovers (a delete that
    # raced an append before deletes locked the rows first), never turns; clear them so the
    # new turns take their positions.
    yield Statement(
        f"DELETE FROM {_where(d, 'messages')} AND position >= :count", {**key, "count": count}
    )
    yield Statement(
        f"INSERT INTO {d.table('messages')} (tenant, session_id, position, body)"
        " VALUES (:tenant, :session, :position, :body)",
        many=[{**key, "position": count + i, "body": body} for i, body in enumerate(bodies)],
    )
    yield Statement(
        f"UPDATE {d.table('sessions')} SET message_count = :count, updated_at = :now"
        " WHERE tenant = :tenant AND session_id = :session",
        {**key, "count": count + len(bodies), "now": now},
    )
    return Appended(before=int(count), after=int(count) + len(bodies))


def info_plan(d: Dialect, tenant: str, session: str) -> Plan[SessionInfo | None]:
    rows = yield Statement(
        f"SELECT user_id, message_count, created_at FROM {_where(d, 'sessions')}",
        {"tenant": tenant, "session": session},
    )
    if not rows:
        return None
    user, count, created = rows[0]
    return SessionInfo(user_id=user, message_count=int(count), created_at=float(created))


def history_plan(d: Dialect, tenant: str, session: str) -> Plan[list[dict[str, Any]]]:
    rows = yield Statement(
        f"SELECT body FROM {_where(d, 'messages')} ORDER BY position",
        {"tenant": tenant, "session": session},
    )
    return [json.loads(row[0]) for row in rows]


def delete_user_plan(d: Dialect, tenant: str, user: str) -> Plan[int]:
    """Delete the user's sessions, their messages and their queued jobs; count the sessions."""
    key = {"tenant": tenant, "user": user}
    # Lock the sessions first: an append running now finishes before its messages are
    # deleted, and one arriving later waits and then starts the session afresh.
    yield Statement(
        f"SELECT session_id FROM {d.table('sessions')} WHERE tenant = :tenant"
        f" AND user_id = :user{d.for_update}",
        key,
    )
    yield Statement(
        f"DELETE FROM {d.table('messages')} WHERE tenant = :tenant AND session_id IN"
        f" (SELECT session_id FROM {d.table('sessions')} WHERE tenant = :tenant"
        " AND user_id = :user)",
        key,
    )
    yield Statement(
        f"DELETE FROM {d.table('jobs')} WHERE tenant = :tenant AND user_id = :user", key
    )
    rows = yield Statement(
        f"DELETE FROM {d.table('sessions')} WHERE tenant = :tenant AND user_id = :user RETURNING 1",
        key,
    )
    return len(rows)


def user_has_sessions_plan(d: Dialect, tenant: str, user: str) -> Plan[bool]:
    rows = yield Statement(
        f"SELECT 1 FROM {d.table('sessions')} WHERE tenant = :tenant AND user_id = :user LIMIT 1",
        {"tenant": tenant, "user": user},
    )
    return bool(rows)


# --- driver ----------------------------------------------------------------------------------


def _serialize(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    try:
        return [json.dumps(dict(m), allow_nan=False) for m in messages]
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"messages must be plain JSON: {exc}") from exc


class AsyncSessionHistories:
    """Append to and read the histories in the server's tables."""

    def __init__(self, db: AsyncDatabase) -> None:
        self._db = db

    async def append(
        self, tenant: str, user: str, session: str, messages: Sequence[Mapping[str, Any]]
    ) -> Appended:
        plan = append_plan(
            self._db.dialect, (tenant, user, session), _serialize(messages), self._db.clock()
        )
        return await self._db.run(plan)

    async def info(self, tenant: str, session: str) -> SessionInfo | None:
        plan = info_plan(self._db.dialect, tenant, session)
        return await self._db.run(plan, write=False, lookup=True)

    async def owned(self, tenant: str, user: str, session: str) -> SessionInfo | None:
        """The session if ``user`` owns it, else None (absent, or another user's)."""
        info = await self.info(tenant, session)
        return info if info is not None and info.user_id == user else None

    async def history(self, tenant: str, session: str) -> list[dict[str, Any]]:
        return await self._db.run(history_plan(self._db.dialect, tenant, session), write=False)

    async def delete_user(self, tenant: str, user: str) -> int:
        return await self._db.run(delete_user_plan(self._db.dialect, tenant, user))

    async def user_has_sessions(self, tenant: str, user: str) -> bool:
        plan = user_has_sessions_plan(self._db.dialect, tenant, user)
        return await self._db.run(plan, write=False)
