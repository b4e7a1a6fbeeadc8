"""Pure helpers for side-store session memory: when to summarize, and how to build a request.

Nothing here does I/O or reads a clock. :mod:`synopsis.session.memory` feeds these functions
what it read from a store; tests build the inputs directly. The window, its rendering and the
budget live in :mod:`._window`, recalled notes in :mod:`._notes`; both are re-exported here.

A built context is, in order:

1. the system prompt, with the latest session summary appended as a delimited section, and
   (hybrid mode only) the recalled notes after it: memories of this user from other sessions
   and older messages of this session that fell out of the window (a leading internal system
   message of their own when there is no system prompt; never a second system message);
2. the most recent messages (the window), cut only where no tool call is separated from its
   result, and starting after the messages the summary covers (the newest tool-safe segment
   is always sent).

Within a token budget, recalled notes are dropped lowest-ranked first, then the window is
shortened from its old end. The system prompt and the summary are never dropped, and the
newest tool-safe segment of the history is always kept (a request without the user's latest
message is useless), even when that alone exceeds the budget. The summary is bounded instead:
a new version is cut to ``max_summary_chars`` before it is saved, and the injected text to
``max_summary_tokens`` and to half of the budget (see :mod:`._bounds`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Literal

from synopsis.errors import InvalidSummary
from synopsis.events import SessionSummaryTruncated
from synopsis.memory import Namespace, SearchHit, SessionSummary
from synopsis.messages import open_tool_calls, safe_cut_points, text_of
from synopsis.redact import Redactor
from synopsis.session._bounds import clip_chars, clip_tokens
from synopsis.session._notes import (
    Recalled,
    dedupe_recalled,
    fuse_ranked,
    hits_to_recalled,
    latest_user_text,
    rank_history,
    recall_query,
    select_notes,
)
from synopsis.session._redaction import redacted_text
from synopsis.session._window import (
    MAX_NOTE_CHARS,
    ContextPlan,
    assemble_context,
    choose_window_start,
    last_segment_start,
    message_tokens,
    plan_context,
    recall_message,
    render_recall_section,
    render_summary_section,
    split_system,
    system_with_summary,
    window_after_summary,
)
from synopsis.session.options import SessionOptions

__all__ = [
    "MAX_NOTE_CHARS",
    "ContextPlan",
    "Recalled",
    "assemble_context",
    "build_messages",
    "choose_window_start",
    "content_hash",
    "dedupe_recalled",
    "fuse_ranked",
    "hits_to_recalled",
    "injected_summary",
    "injected_token_limit",
    "is_due",
    "latest_user_text",
    "memory_tags",
    "message_tokens",
    "next_summary",
    "plan_context",
    "rank_history",
    "recall_message",
    "recall_query",
    "render_recall_section",
    "render_summary_section",
    "select_notes",
    "split_system",
    "summary_key",
    "summary_namespace",
    "summary_span",
    "summary_text",
    "system_with_summary",
    "truncation",
    "window_after_summary",
]


# ---------------------------------------------------------------------------------------------
# Scheduling and the dual write


def is_due(message_count: int, covers_to: int, every: int) -> bool:
    """True when the history has grown by at least ``every`` messages past ``covers_to``."""
    return every > 0 and message_count - covers_to >= every


def summary_span(messages: Sequence[Mapping[str, Any]], covers_to: int) -> tuple[int, int]:
    """The ``[start, end)`` slice a new summary should read: from the old end to a safe cut.

    ``end`` is the last tool-safe cut point, so a turn still waiting for a tool result is
    left for the next summary rather than split.
    """
    cuts = safe_cut_points(messages)
    end = (
        len(messages) if not open_tool_calls(messages) else last_segment_start(cuts, len(messages))
    )
    start = min(max(covers_to, 0), end)
    return start, end


def content_hash(text: str) -> str:
    """SHA-256 of the UTF-8 text, hex encoded."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def summary_namespace(user_id: str, session_id: str) -> Namespace:
    """Where the long-term copy of a session summary lives."""
    return ("user", user_id, "session", session_id)


def summary_key(version: int) -> str:
    """The memory key of summary ``version``: deterministic, so a replay is an upsert."""
    return f"summary-v{version}"


# ---------------------------------------------------------------------------------------------
# Session memory: the next summary, a whole request


def next_summary(
    *,
    tenant: str,
    user_id: str,
    session_id: str,
    previous: SessionSummary | None,
    result: object,
    covers_to: int,
    now: float,
    max_chars: int | None = None,
    redactor: Redactor | None = None,
) -> SessionSummary:
    """The next summary version, or InvalidSummary when the summarizer returned garbage.

    With a ``redactor`` the text is redacted first; a text longer than ``max_chars`` is then
    cut (see :func:`truncation` for the report).
    """
    text = redacted_text(redactor, summary_text(result))
    if max_chars is not None:
        text = clip_chars(text, max_chars)
    model = getattr(result, "model", None)
    return SessionSummary(
        tenant=tenant,
        user_id=user_id,
        session_id=session_id,
        version=(previous.version if previous else 0) + 1,
        text=text,
        covers_from=0,
        covers_to=covers_to,
        model=model if isinstance(model, str) and model else "unknown",
        content_hash=content_hash(text),
        created_at=datetime.fromtimestamp(now, UTC),
    )


def summary_text(result: object) -> str:
    """The stripped text of a summarizer's result; InvalidSummary when there is none."""
    text = getattr(result, "text", None)
    if not isinstance(text, str) or not text.strip():
        raise InvalidSummary(f"summarizer returned no usable text: {type(result).__name__}")
    return text.strip()


def truncation(
    summary: SessionSummary,
    original: str,
    *,
    target: Literal["stored", "injected"],
    unit: Literal["chars", "tokens"],
    limit: int,
) -> SessionSummaryTruncated | None:
    """The report of ``original`` cut down to ``summary.text``; None when nothing was cut."""
    if summary.text == original:
        return None
    return SessionSummaryTruncated(
        tenant=summary.tenant,
        session_id=summary.session_id,
        version=summary.version,
        target=target,
        unit=unit,
        limit=limit,
        original_chars=len(original),
        kept_chars=len(summary.text),
    )


def injected_token_limit(options: SessionOptions) -> int | None:
    """Tokens the injected summary may take: ``max_summary_tokens``, half the budget."""
    limits = [
        options.max_summary_tokens,
        options.context_budget_tokens // 2 if options.context_budget_tokens else None,
    ]
    present = [limit for limit in limits if limit is not None]
    return min(present) if present else None


def injected_summary(
    options: SessionOptions, summary: SessionSummary | None
) -> tuple[SessionSummary | None, SessionSummaryTruncated | None]:
    """``summary`` with its text cut to what a request may carry, and the report of a cut.

    A summary saved before the stored cap existed is cut to ``max_summary_chars`` first, so a
    huge text is never estimated whole; then to the token limit.
    """
    if summary is None:
        return None, None
    text, limit = summary.text, options.max_summary_chars or 0
    unit: Literal["chars", "tokens"] = "chars"
    if options.max_summary_chars is not None:
        text = clip_chars(text, options.max_summary_chars)
    tokens = injected_token_limit(options)
    if tokens is not None:
        clipped = clip_tokens(text, tokens, options.estimator)
        if clipped != text:
            text, unit, limit = clipped, "tokens", tokens
    if text == summary.text:
        return summary, None
    injected = replace(summary, text=text)
    report = truncation(injected, summary.text, target="injected", unit=unit, limit=limit)
    return injected, report


def memory_tags(summary: SessionSummary) -> dict[str, str]:
    """Tags of the long-term copy of ``summary``."""
    return {
        "source": "session_summary",
        "session_id": summary.session_id,
        "user_id": summary.user_id,
        "version": str(summary.version),
        "covers_to": str(summary.covers_to),
        "content_hash": summary.content_hash,
        "model": summary.model,
    }


def build_messages(
    options: SessionOptions,
    *,
    system: Sequence[Mapping[str, Any]],
    body: Sequence[Mapping[str, Any]],
    summary: SessionSummary | None,
    hits: Sequence[SearchHit],
    query: str | None,
    user_id: str,
    session_id: str,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """Assemble a request from what was read from the store (pure).

    ``offset``: how many history messages come before ``body`` (its leading system messages),
    so the summary's ``covers_to`` (an index into the history) is placed in ``body``.
    """
    section = None
    if summary is not None:
        section = render_summary_section(
            summary.text, version=summary.version, covers_to=summary.covers_to
        )
    system_messages = system_with_summary(system, section)
    start = choose_window_start(
        body,
        max_messages=options.window_messages,
        max_tokens=options.window_tokens,
        estimate=options.estimator,
    )
    if summary is not None:
        start = window_after_summary(body, start, summary.covers_to - offset)
    notes: list[Recalled] = []
    if options.hybrid and query:
        against = [text_of(m) for m in body[start:]] + ([summary.text] if summary else [])
        memories = hits_to_recalled(hits, exclude_prefix=summary_namespace(user_id, session_id))
        history = rank_history(body[:start], query, limit=options.recall_limit)
        notes = select_notes(memories, history, against=against, limit=options.recall_limit)
    plan: ContextPlan = plan_context(
        system=system_messages,
        body=body,
        window_start=start,
        notes=notes,
        budget=options.context_budget_tokens,
        estimate=options.estimator,
    )
    return assemble_context(plan, body)
