"""Pure helpers for side-store session memory: when to summarize, and how to build a request.

Nothing here does I/O or reads a clock. :mod:`synopsis.session.memory` feeds these functions
what it read from a store; tests build the inputs directly. The window, its rendering and the
budget live in :mod:`._window`, recalled notes in :mod:`._notes`; both are re-exported here.

A built context is, in order:

1. the system prompt, with the latest session summary appended as a delimited section;
2. (hybrid mode only) one internal system message of recalled notes: memories of this user
   from other sessions and older messages of this session that fell out of the window;
3. the most recent messages (the window), cut only where no tool call is separated from its
   result.

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
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from synopsis.errors import ConfigError, InvalidSummary
from synopsis.events import SessionSummaryTruncated
from synopsis.memory._types import Namespace, SearchHit, SearchMode, SessionSummary
from synopsis.messages import open_tool_calls, safe_cut_points, text_of
from synopsis.redact import Redactor, redactor_from
from synopsis.session._bounds import MIN_SUMMARY_CHARS, clip_chars, clip_tokens
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
)
from synopsis.tokens import Estimator, TokenCounter

__all__ = [
    "DEFAULT_MAX_SUMMARY_CHARS",
    "DEFAULT_SUMMARIZE_TIMEOUT",
    "MAX_NOTE_CHARS",
    "MIN_SUMMARY_TOKENS",
    "ContextPlan",
    "Recalled",
    "SessionSettings",
    "assemble_context",
    "build_messages",
    "check_timeout",
    "choose_window_start",
    "content_hash",
    "dedupe_recalled",
    "fuse_ranked",
    "hits_to_recalled",
    "injected_summary",
    "injected_token_limit",
    "is_due",
    "latest_user_text",
    "make_settings",
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
# Session memory: settings, the next summary, a whole request


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSettings:
    """Validated options shared by SessionMemory and AsyncSessionMemory."""

    summarize_every: int
    window_messages: int | None
    window_tokens: int | None
    budget: int | None
    hybrid: bool
    recall_limit: int
    recall_mode: SearchMode
    estimate: Estimator
    #: Seconds a job waits for the summarizer (None: no limit).
    summarize_timeout: float | None = None
    #: Characters of a stored summary (and of one read back, before it is injected).
    max_summary_chars: int | None = None
    #: Tokens of the summary injected into a request.
    max_summary_tokens: int | None = None
    #: Redacts what a job sends and stores (None: off); see :mod:`synopsis.session._redaction`.
    redactor: Redactor | None = None


#: The defaults of the bounds, shared by both twins.
DEFAULT_SUMMARIZE_TIMEOUT = 120.0
DEFAULT_MAX_SUMMARY_CHARS = 20_000

#: The smallest ``max_summary_tokens`` accepted: room for the marker and some text.
MIN_SUMMARY_TOKENS = 50


def make_settings(
    *,
    summarize_every: int,
    window_messages: int | None,
    window_tokens: int | None,
    context_budget_tokens: int | None,
    hybrid: bool,
    recall_limit: int,
    recall_mode: SearchMode = "keyword",
    estimate: Estimator | None,
    summarize_timeout: float | None = DEFAULT_SUMMARIZE_TIMEOUT,
    max_summary_chars: int | None = DEFAULT_MAX_SUMMARY_CHARS,
    max_summary_tokens: int | None = None,
    redact: Redactor | bool | None = None,
) -> SessionSettings:
    """Check the options once, naming the one at fault."""
    if summarize_every < 1:
        raise ConfigError("summarize_every must be at least 1")
    for name, value, least in (
        ("window_messages", window_messages, 1),
        ("window_tokens", window_tokens, 1),
        ("context_budget_tokens", context_budget_tokens, 1),
        ("max_summary_chars", max_summary_chars, MIN_SUMMARY_CHARS),
        ("max_summary_tokens", max_summary_tokens, MIN_SUMMARY_TOKENS),
    ):
        if value is not None and value < least:
            raise ConfigError(f"{name} must be at least {least}, or None for no limit")
    check_timeout("summarize_timeout", summarize_timeout)
    if recall_limit < 0:
        raise ConfigError("recall_limit must be 0 or more")
    if recall_mode not in get_args(SearchMode):
        raise ConfigError(f"recall_mode must be one of {', '.join(get_args(SearchMode))}")
    return SessionSettings(
        summarize_every=summarize_every,
        window_messages=window_messages,
        window_tokens=window_tokens,
        budget=context_budget_tokens,
        hybrid=hybrid,
        recall_limit=recall_limit,
        recall_mode=recall_mode,
        estimate=estimate or TokenCounter().estimate_text,
        summarize_timeout=summarize_timeout,
        max_summary_chars=max_summary_chars,
        max_summary_tokens=max_summary_tokens,
        redactor=redactor_from(redact),
    )


def check_timeout(name: str, seconds: float | None) -> None:
    """A time limit is a positive number of seconds, or None for none."""
    if seconds is not None and not seconds > 0:
        raise ConfigError(f"{name} must be a positive number of seconds, or None for no limit")


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


def injected_token_limit(settings: SessionSettings) -> int | None:
    """Tokens the injected summary may take: ``max_summary_tokens``, half the budget."""
    limits = [settings.max_summary_tokens, settings.budget // 2 if settings.budget else None]
    present = [limit for limit in limits if limit is not None]
    return min(present) if present else None


def injected_summary(
    settings: SessionSettings, summary: SessionSummary | None
) -> tuple[SessionSummary | None, SessionSummaryTruncated | None]:
    """``summary`` with its text cut to what a request may carry, and the report of a cut.

    A summary saved before the stored cap existed is cut to ``max_summary_chars`` first, so a
    huge text is never estimated whole; then to the token limit.
    """
    if summary is None:
        return None, None
    text, limit = summary.text, settings.max_summary_chars or 0
    unit: Literal["chars", "tokens"] = "chars"
    if settings.max_summary_chars is not None:
        text = clip_chars(text, settings.max_summary_chars)
    tokens = injected_token_limit(settings)
    if tokens is not None:
        clipped = clip_tokens(text, tokens, settings.estimate)
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
    settings: SessionSettings,
    *,
    system: Sequence[Mapping[str, Any]],
    body: Sequence[Mapping[str, Any]],
    summary: SessionSummary | None,
    hits: Sequence[SearchHit],
    query: str | None,
    user_id: str,
    session_id: str,
) -> list[dict[str, Any]]:
    """Assemble a request from what was read from the store (pure)."""
    section = None
    if summary is not None:
        section = render_summary_section(
            summary.text, version=summary.version, covers_to=summary.covers_to
        )
    system_messages = system_with_summary(system, section)
    start = choose_window_start(
        body,
        max_messages=settings.window_messages,
        max_tokens=settings.window_tokens,
        estimate=settings.estimate,
    )
    notes: list[Recalled] = []
    if settings.hybrid and query:
        against = [text_of(m) for m in body[start:]] + ([summary.text] if summary else [])
        memories = hits_to_recalled(hits, exclude_prefix=summary_namespace(user_id, session_id))
        history = rank_history(body[:start], query, limit=settings.recall_limit)
        notes = select_notes(memories, history, against=against, limit=settings.recall_limit)
    plan: ContextPlan = plan_context(
        system=system_messages,
        body=body,
        window_start=start,
        notes=notes,
        budget=settings.budget,
        estimate=settings.estimate,
    )
    return assemble_context(plan, body)
