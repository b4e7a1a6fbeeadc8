"""Pure helpers for side-store session memory: when to summarize, and how to build a request.

Nothing here does I/O or reads a clock. :mod:`synopsis.session.memory` feeds these functions what it
read from a store; tests build the inputs directly.

A built context is, in order:

1. the system prompt, with the latest session summary appended as a delimited section;
2. (hybrid mode only) one internal system message of recalled notes: memories of this user
   from other sessions and older messages of this session that fell out of the window;
3. the most recent messages (the window), cut only where no tool call is separated from its
   result.

Within a token budget, recalled notes are dropped lowest-ranked first, then the window is
shortened from its old end. The system prompt and the summary are never dropped, and the
newest tool-safe segment of the history is always kept (a request without the user's latest
message is useless), even when that alone exceeds the budget.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, get_args

from synopsis.errors import ConfigError, InvalidSummary
from synopsis.memory._terms import document_terms, query_terms
from synopsis.memory._types import Namespace, SearchHit, SearchMode, SessionSummary
from synopsis.messages import (
    is_internal,
    open_tool_calls,
    safe_cut_points,
    split_leading_system,
    text_of,
)
from synopsis.tokens import Estimator, TokenCounter

__all__ = [
    "ContextPlan",
    "Recalled",
    "SessionSettings",
    "assemble_context",
    "build_messages",
    "choose_window_start",
    "content_hash",
    "dedupe_recalled",
    "fuse_ranked",
    "hits_to_recalled",
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
    "system_with_summary",
]

#: Per-message framing the providers add on top of the text (role, separators).
MESSAGE_OVERHEAD_TOKENS: Final = 4
#: A recalled note longer than this is clipped when rendered.
MAX_NOTE_CHARS: Final = 2000
_RRF_K: Final = 60
_BM25_K1: Final = 1.2
_BM25_B: Final = 0.75


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
        len(messages) if not open_tool_calls(messages) else _last_segment_start(cuts, len(messages))
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
# Token accounting and the window


def message_tokens(message: Mapping[str, Any], estimate: Estimator) -> int:
    """Estimated tokens of one message: its text, its tool calls, and a small framing cost."""
    tokens = estimate(text_of(message)) + MESSAGE_OVERHEAD_TOKENS
    calls = message.get("tool_calls")
    if calls:
        tokens += estimate(json.dumps(calls, ensure_ascii=False, default=str))
    return tokens


def choose_window_start(
    body: Sequence[Mapping[str, Any]],
    *,
    max_messages: int | None,
    max_tokens: int | None,
    estimate: Estimator,
) -> int:
    """The earliest safe cut whose tail fits both limits (``None`` = no limit).

    When no non-empty tail fits, the newest tool-safe segment is kept anyway.
    """
    cuts = safe_cut_points(body)
    suffix = _suffix_tokens(body, estimate)
    for cut in cuts:
        fits_count = max_messages is None or len(body) - cut <= max_messages
        fits_tokens = max_tokens is None or suffix[cut] <= max_tokens
        if fits_count and fits_tokens and cut < len(body):
            return cut
    return _last_segment_start(cuts, len(body))


def _suffix_tokens(body: Sequence[Mapping[str, Any]], estimate: Estimator) -> list[int]:
    suffix = [0] * (len(body) + 1)
    for index in range(len(body) - 1, -1, -1):
        suffix[index] = suffix[index + 1] + message_tokens(body[index], estimate)
    return suffix


def _last_segment_start(cuts: Sequence[int], length: int) -> int:
    earlier = [cut for cut in cuts if cut < length]
    return max(earlier) if earlier else length


# ---------------------------------------------------------------------------------------------
# Recall (hybrid layer 2)


@dataclass(frozen=True, slots=True, kw_only=True)
class Recalled:
    """One recalled note: a memory from the store or an older message of this session."""

    text: str
    source: Literal["memory", "history"]
    label: str
    score: float


def latest_user_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The text of the newest user message a person wrote, if any."""
    for message in reversed(messages):
        if message.get("role") == "user" and not is_internal(message):
            text = text_of(message).strip()
            if text:
                return text
    return None


def rank_history(
    older: Sequence[Mapping[str, Any]], query: str, *, limit: int, offset: int = 0
) -> list[Recalled]:
    """BM25-rank user and assistant messages of ``older`` against ``query``; best first."""
    docs = [
        (offset + i, m)
        for i, m in enumerate(older)
        if m.get("role") in {"user", "assistant"} and not is_internal(m) and text_of(m).strip()
    ]
    terms = query_terms(query)
    if not docs or not terms or limit <= 0:
        return []
    counts = [Counter(document_terms(text_of(m))) for _, m in docs]
    scores = _bm25(counts, terms)
    ranked = sorted(range(len(docs)), key=lambda i: (-scores[i], -docs[i][0]))
    return [
        Recalled(
            text=text_of(docs[i][1]),
            source="history",
            score=scores[i],
            label=f"earlier in this session, message {docs[i][0]}, {docs[i][1]['role']}",
        )
        for i in ranked[:limit]
        if scores[i] > 0
    ]


def _bm25(counts: Sequence[Counter[str]], terms: Sequence[str]) -> list[float]:
    total = len(counts)
    average = sum(sum(c.values()) for c in counts) / total or 1.0
    scores = [0.0] * total
    for term in terms:
        frequency = sum(1 for c in counts if term in c)
        if not frequency:
            continue
        idf = math.log(1 + (total - frequency + 0.5) / (frequency + 0.5))
        for index, count in enumerate(counts):
            tf = count.get(term, 0)
            if tf:
                norm = _BM25_K1 * (1 - _BM25_B + _BM25_B * sum(count.values()) / average)
                scores[index] += idf * tf * (_BM25_K1 + 1) / (tf + norm)
    return scores


def hits_to_recalled(hits: Sequence[SearchHit], *, exclude_prefix: Namespace) -> list[Recalled]:
    """Store hits outside ``exclude_prefix``, keeping only the newest summary per session."""
    newest: dict[Namespace, int] = {}
    for hit in hits:
        if hit.item.kind == "summary":
            version = _version_of(hit)
            newest[hit.item.namespace] = max(newest.get(hit.item.namespace, version), version)
    result: list[Recalled] = []
    for hit in hits:
        item = hit.item
        if item.namespace[: len(exclude_prefix)] == exclude_prefix:
            continue
        if item.kind == "summary" and _version_of(hit) < newest[item.namespace]:
            continue
        label = f"{item.kind}, {'/'.join(item.namespace)}"
        result.append(
            Recalled(text=item.text, source="memory", label=label, score=hit.score or 0.0)
        )
    return result


def _version_of(hit: SearchHit) -> int:
    raw = hit.item.tags.get("version", "0")
    return int(raw) if raw.isdigit() else 0


def fuse_ranked(*rankings: Sequence[Recalled], limit: int) -> list[Recalled]:
    """Reciprocal rank fusion of several best-first lists; earlier lists win ties."""
    fused: list[tuple[float, int, int, Recalled]] = []
    for list_index, ranking in enumerate(rankings):
        for rank, note in enumerate(ranking):
            fused.append((1.0 / (_RRF_K + rank + 1), -list_index, -rank, note))
    fused.sort(key=lambda entry: entry[:3], reverse=True)
    return [entry[3] for entry in fused[: max(limit, 0)]]


def dedupe_recalled(notes: Sequence[Recalled], *, against: Sequence[str]) -> list[Recalled]:
    """Drop notes whose text repeats an earlier note or any of ``against`` (whitespace-blind)."""
    seen = {_squash(text) for text in against}
    kept: list[Recalled] = []
    for note in notes:
        squashed = _squash(note.text)
        if squashed and squashed not in seen:
            seen.add(squashed)
            kept.append(note)
    return kept


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


# ---------------------------------------------------------------------------------------------
# Rendering


def render_summary_section(text: str, *, version: int, covers_to: int) -> str:
    """The delimited block appended to the system prompt."""
    return (
        f'<session_summary version="{version}" covers_messages="0-{covers_to}">\n'
        "A synopsis of this conversation so far, kept by the memory system. Only the most "
        "recent messages follow below; rely on this synopsis for anything older.\n\n"
        f"{text.strip()}\n"
        "</session_summary>"
    )


def render_recall_section(notes: Sequence[Recalled]) -> str:
    """The internal block of recalled notes, numbered best first."""
    lines = [
        "<recalled_context>",
        "Notes recalled by the memory system from this user's other sessions and from older "
        "parts of this conversation. They may be incomplete or out of date: use them only "
        "where they help, and do not mention this block.",
    ]
    for number, note in enumerate(notes, start=1):
        text = note.text.strip()
        if len(text) > MAX_NOTE_CHARS:
            text = text[:MAX_NOTE_CHARS] + " [...]"
        lines.append(f"[{number}] ({note.label}) {text}")
    lines.append("</recalled_context>")
    return "\n".join(lines)


def _append_section(message: Mapping[str, Any], section: str) -> dict[str, Any]:
    result = dict(message)
    content = message.get("content")
    if isinstance(content, list):
        result["content"] = [*content, {"type": "text", "text": section}]
    elif isinstance(content, str) and content:
        result["content"] = f"{content}\n\n{section}"
    else:
        result["content"] = section
    return result


# ---------------------------------------------------------------------------------------------
# Assembly


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextPlan:
    """What a built context contains: the system messages, recalled notes and the window."""

    system: tuple[dict[str, Any], ...]
    notes: tuple[Recalled, ...]
    window_start: int
    body_length: int
    tokens: int


def plan_context(
    *,
    system: Sequence[Mapping[str, Any]],
    body: Sequence[Mapping[str, Any]],
    window_start: int,
    notes: Sequence[Recalled] = (),
    budget: int | None = None,
    estimate: Estimator,
) -> ContextPlan:
    """Fit notes and window into ``budget``: drop notes from the end, then shorten the window."""
    system_tokens = sum(message_tokens(m, estimate) for m in system)
    suffix = _suffix_tokens(body, estimate)
    kept = list(notes)

    def total(start: int) -> int:
        return system_tokens + _notes_tokens(kept, estimate) + suffix[start]

    if budget is not None:
        while kept and total(window_start) > budget:
            kept.pop()
        cuts = [c for c in safe_cut_points(body) if window_start < c < len(body)]
        for cut in cuts:
            if total(window_start) <= budget:
                break
            window_start = cut
    return ContextPlan(
        system=tuple(dict(m) for m in system),
        notes=tuple(kept),
        window_start=window_start,
        body_length=len(body),
        tokens=total(window_start),
    )


def _notes_tokens(notes: Sequence[Recalled], estimate: Estimator) -> int:
    if not notes:
        return 0
    return estimate(render_recall_section(notes)) + MESSAGE_OVERHEAD_TOKENS


def recall_message(notes: Sequence[Recalled]) -> dict[str, Any]:
    """The internal system message that carries recalled notes."""
    return {
        "role": "system",
        "content": render_recall_section(notes),
        "meta": {"content_type": "memory", "internal": True},
    }


def system_with_summary(
    system: Sequence[Mapping[str, Any]], section: str | None
) -> list[dict[str, Any]]:
    """The system messages with ``section`` appended to the first (or a new one)."""
    messages = [dict(m) for m in system]
    if section is None:
        return messages
    if not messages:
        return [{"role": "system", "content": section}]
    messages[0] = _append_section(messages[0], section)
    return messages


def assemble_context(plan: ContextPlan, body: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The request messages for ``plan``: system, recalled notes, then the window."""
    messages = list(plan.system)
    if plan.notes:
        messages.append(recall_message(plan.notes))
    messages.extend(dict(m) for m in body[plan.window_start :])
    return messages


def split_system(
    messages: Sequence[Mapping[str, Any]], system_prompt: str | None
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The system messages (``system_prompt`` first, then the history's leading ones) and body."""
    leading, body = split_leading_system(messages)
    if system_prompt:
        leading = [{"role": "system", "content": system_prompt}, *leading]
    return leading, body


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
) -> SessionSettings:
    """Check the options once, naming the one at fault."""
    if summarize_every < 1:
        raise ConfigError("summarize_every must be at least 1")
    for name, value in (
        ("window_messages", window_messages),
        ("window_tokens", window_tokens),
        ("context_budget_tokens", context_budget_tokens),
    ):
        if value is not None and value < 1:
            raise ConfigError(f"{name} must be at least 1, or None for no limit")
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
    )


def next_summary(
    *,
    tenant: str,
    user_id: str,
    session_id: str,
    previous: SessionSummary | None,
    result: object,
    covers_to: int,
    now: float,
) -> SessionSummary:
    """The next summary version, or InvalidSummary when the summarizer returned garbage."""
    text = getattr(result, "text", None)
    if not isinstance(text, str) or not text.strip():
        raise InvalidSummary(f"summarizer returned no usable text: {type(result).__name__}")
    model = getattr(result, "model", None)
    return SessionSummary(
        tenant=tenant,
        user_id=user_id,
        session_id=session_id,
        version=(previous.version if previous else 0) + 1,
        text=text.strip(),
        covers_from=0,
        covers_to=covers_to,
        model=model if isinstance(model, str) and model else "unknown",
        content_hash=content_hash(text.strip()),
        created_at=datetime.fromtimestamp(now, UTC),
    )


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


def select_notes(
    memories: Sequence[Recalled],
    history: Sequence[Recalled],
    *,
    against: Sequence[str],
    limit: int,
) -> list[Recalled]:
    """Layer 2: fuse recalled memories and older messages, minus what the request repeats."""
    fused = fuse_ranked(
        dedupe_recalled(memories, against=against),
        dedupe_recalled(history, against=against),
        limit=limit * 2,
    )
    return dedupe_recalled(fused, against=against)[:limit]


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


def recall_query(messages: Sequence[Mapping[str, Any]], query: str | None) -> str | None:
    return query if query and query.strip() else latest_user_text(messages)
