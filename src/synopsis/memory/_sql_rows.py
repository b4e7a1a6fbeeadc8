"""Decoding what both SQL backends read back: summaries and outbox entries.

Both select a summary's columns in one order (``tenant, user_id, session_id, version, text,
covers_from, covers_to, model, content_hash, created_at``), an outbox entry's followed by
``attempts`` and the user's deletion ``generation``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from synopsis.memory._checks import to_datetime
from synopsis.memory._types import OutboxEntry, SessionSummary

__all__ = ["read_outbox_entry", "read_summary"]


def read_summary(row: Sequence[Any]) -> SessionSummary:
    """The summary in the first ten columns of ``row``."""
    tenant, user, session, version, text, first, last, model, digest, created = row[:10]
    return SessionSummary(
        tenant=tenant,
        user_id=user,
        session_id=session,
        version=version,
        text=text,
        covers_from=first,
        covers_to=last,
        model=model,
        content_hash=digest,
        created_at=to_datetime(created),
    )


def read_outbox_entry(row: Sequence[Any]) -> OutboxEntry:
    """The outbox entry of a summary row followed by its attempt count and generation."""
    return OutboxEntry(summary=read_summary(row), attempts=row[10], generation=row[11])
