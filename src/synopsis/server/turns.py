"""A turn of a session, recorded: checked, redacted under the server's policy, appended to
the session's history, and its summary job queued when one is due. Shared by the REST API
(``POST .../messages``) and the OpenAI-compatible proxy (a named session's turns).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from synopsis._flow import cpu
from synopsis.errors import InvalidMessage
from synopsis.server.deps import Services
from synopsis.server.schemas import AppendResponse
from synopsis.session.context import is_due
from synopsis.validation import validate_messages

__all__ = ["PRIVATE_KEYS", "public_messages", "record_turn"]

#: Our extension keys: read on input, never sent to a provider (strict ones reject them).
#: Message keys of synopsis' own (markers, usage): never sent upstream.
PRIVATE_KEYS = frozenset({"meta", "usage"})


def public_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages with only message-schema fields (our markers and usage removed)."""
    return [{k: v for k, v in m.items() if k not in PRIVATE_KEYS} for m in messages]


def _checked(messages: list[dict[str, Any]], history: list[dict[str, Any]] | None) -> None:
    if history is None:
        validate_messages(messages)
        return
    pending: set[str] = set()
    validate_messages(history, pending=pending)
    validate_messages(messages, start=len(history), pending=pending)


async def record_turn(
    s: Services,
    tenant: str,
    ids: tuple[str, str],
    messages: list[dict[str, Any]],
    *,
    redacted: bool = False,
) -> AppendResponse:
    """Append to the session and queue its summary job when it is due. With the redaction
    policy on, the turns are stored redacted (``redacted``: they are already)."""
    user, session = ids
    try:
        _checked(messages, None)
    except InvalidMessage as exc:
        if exc.field != "tool_call_id":
            raise
        # A tool result may answer a call appended earlier: check against the whole history.
        _checked(messages, await s.histories.history(tenant, session))
    if s.redact is not None and not redacted:  # no copy of a value the policy takes out
        messages = (await cpu(functools.partial(s.redact.redact_messages, messages)))[0]
    appended = await s.histories.append(tenant, user, session, messages)
    latest = await s.store.latest_summary(tenant, user, session)
    covers = latest.covers_to if latest else 0
    due = is_due(appended.after, covers, s.options.summarize_every)
    if due and await s.queue.enqueue(tenant, user, session):
        s.workers.wake()
    return AppendResponse(
        user_id=user,
        session_id=session,
        messages=appended.after,
        appended=appended.after - appended.before,
        summary_scheduled=due,
        pending_messages=max(appended.after - covers, 0),
    )
