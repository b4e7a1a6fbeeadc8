"""The window and the request around it: token accounting, window choice, rendering, budget.

Pure: messages in, messages out, with an estimator passed in. :mod:`.context` re-exports all
of it; this module exists so that the assembly of a request reads on its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from synopsis.messages import (
    is_real_user_message,
    safe_cut_points,
    split_leading_system,
    text_of,
)
from synopsis.session._notes import Recalled, notes_message
from synopsis.tokens import DEFAULT_MESSAGE_OVERHEAD, Estimator

__all__ = [
    "MAX_NOTE_CHARS",
    "ContextPlan",
    "assemble_context",
    "choose_window_start",
    "last_segment_start",
    "message_tokens",
    "plan_context",
    "recall_message",
    "render_recall_section",
    "render_summary_section",
    "split_system",
    "system_with_summary",
    "window_after_summary",
]

#: A recalled note longer than this is clipped when rendered.
MAX_NOTE_CHARS: Final = 2000


# ---------------------------------------------------------------------------------------------
# Token accounting and the window


def message_tokens(message: Mapping[str, Any], estimate: Estimator) -> int:
    """Estimated tokens of one message: its text, its tool calls, and the chat framing."""
    tokens = estimate(text_of(message)) + DEFAULT_MESSAGE_OVERHEAD
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
    return last_segment_start(cuts, len(body))


def _suffix_tokens(body: Sequence[Mapping[str, Any]], estimate: Estimator) -> list[int]:
    suffix = [0] * (len(body) + 1)
    for index in range(len(body) - 1, -1, -1):
        suffix[index] = suffix[index + 1] + message_tokens(body[index], estimate)
    return suffix


def last_segment_start(cuts: Sequence[int], length: int) -> int:
    """Where the newest tool-safe segment of a ``length``-message body starts."""
    earlier = [cut for cut in cuts if cut < length]
    return max(earlier) if earlier else length


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


def recall_message(notes: Sequence[Recalled]) -> dict[str, Any]:
    """The internal system message that carries recalled notes (marked in its text)."""
    return notes_message(render_recall_section(notes))


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


def split_system(
    messages: Sequence[Mapping[str, Any]], system_prompt: str | None
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The system messages (``system_prompt`` first, then the history's leading ones) and body."""
    leading, body = split_leading_system(messages)
    if system_prompt:
        leading = [{"role": "system", "content": system_prompt}, *leading]
    return leading, body


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
    return estimate(render_recall_section(notes)) + DEFAULT_MESSAGE_OVERHEAD


def assemble_context(plan: ContextPlan, body: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The request messages for ``plan``: system (recalled notes appended to the first), then
    the window.

    The notes never go in as a system message of their own after another one: several chat
    templates refuse a system message that does not lead. Without any system message they
    are the leading one (marked internal).
    """
    messages = list(plan.system)
    if plan.notes and messages:
        messages[0] = _append_section(messages[0], render_recall_section(plan.notes))
    elif plan.notes:
        messages.append(recall_message(plan.notes))
    messages.extend(dict(m) for m in body[plan.window_start :])
    return messages


def window_after_summary(body: Sequence[Mapping[str, Any]], start: int, covered: int) -> int:
    """``start`` moved past the ``covered`` messages the injected summary stands for (to the
    first safe cut at or after them): the messages a summary covers are not sent again.

    Never past the user's latest message nor into the newest tool-safe segment: the request
    the model answers, and a pending tool call with its results, always go as messages.
    """
    if covered <= start:
        return start
    cuts = safe_cut_points(body)
    newest = last_segment_start(cuts, len(body))
    users = [i for i, message in enumerate(body) if is_real_user_message(message)]
    if users:
        newest = min(newest, max(cut for cut in cuts if cut <= users[-1]))
    after = next((cut for cut in cuts if covered <= cut < len(body)), newest)
    return max(start, min(after, newest))
