"""Fitting a summarizer's input into its window: clipping long texts, cutting chunks.

Pure functions (no I/O, no model) used by :mod:`synopsis.summarizer`: a message or a text is
clipped in the middle, head and tail kept, until our estimate of it fits; a history is cut into
chunks at safe points only (a chunk never separates a tool call from its results), and a group
of messages too large for any chunk is shrunk until it fits. Every size is the caller's
estimate, so "fits" means fits by the same counter the summarizer budgets with.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from synopsis.errors import ConfigError
from synopsis.messages import safe_cut_points, text_of
from synopsis.tokens import Estimator, MessageEstimator, TokenCounter

__all__ = [
    "chunk_for_window",
    "clip_message",
    "clip_text",
    "safe_groups",
    "shrink_group",
    "take_chunk",
]

Messages = Sequence[Mapping[str, Any]]


def clip_text(text: str, max_tokens: int, estimate_text: Estimator) -> str:
    """``text`` cut in the middle (head and tail kept, a marker between) until its estimate is
    at most ``max_tokens``; at worst only the marker remains."""
    tokens = estimate_text(text)
    if tokens <= max_tokens:
        return text
    keep = len(text) * max(max_tokens, 0) // tokens // 2
    while True:
        dropped = len(text) - 2 * keep
        clipped = (
            f"{text[:keep]}\n[... {dropped} characters clipped ...]\n{text[len(text) - keep :]}"
        )
        if keep == 0 or estimate_text(clipped) <= max_tokens:
            return clipped
        keep = keep * 3 // 4


def clip_message(
    message: Mapping[str, Any],
    max_tokens: int,
    estimate_text: Estimator,
    bound: Callable[[str], int | None] | None = None,
) -> Mapping[str, Any]:
    """A copy of ``message`` whose text is cut to about ``max_tokens`` (head and tail kept).

    ``bound`` (e.g. :meth:`TokenCounter.text_bound`) may say the text is short enough without
    estimating it. Only the summarizer's input is clipped; the archive keeps the original.
    """
    text = text_of(message)
    limit = bound(text) if bound is not None else None
    if limit is not None and limit <= max_tokens:
        return message
    clipped = clip_text(text, max_tokens, estimate_text) if text else text
    if clipped is text:
        return message
    result = dict(message)
    result["content"] = clipped
    return result


Groups = Sequence[Sequence[Mapping[str, Any]]]


def _fitting(
    groups: Groups, start: int, budget: int, estimate: MessageEstimator
) -> tuple[int, int]:
    """The end of the longest run of ``groups[start:]`` within ``budget`` (at least one
    group), and its size. Only the groups looked at are estimated."""
    end, used = start, 0
    while end < len(groups):
        size = sum(estimate(m) for m in groups[end])
        if end > start and used + size > budget:
            break
        end, used = end + 1, used + size
    return end, used


def safe_groups(messages: Messages) -> list[list[Mapping[str, Any]]]:
    """``messages`` split at every safe cut point: a group never separates a call from its
    results."""
    points = safe_cut_points(messages)
    return [list(messages[left:right]) for left, right in itertools.pairwise(points)]


def chunk_for_window(
    messages: Messages, *, budget: int, estimate: MessageEstimator
) -> list[list[Mapping[str, Any]]]:
    """Split ``messages`` into consecutive chunks of at most ``budget`` tokens each, cutting
    at safe points where possible. A single group larger than the budget forms its own chunk
    (:func:`take_chunk` shrinks such a group instead)."""
    if budget <= 0:
        raise ConfigError("the summarizer's window leaves no room for conversation")
    groups = safe_groups(messages)
    chunks: list[list[Mapping[str, Any]]] = []
    start = 0
    while start < len(groups):
        end, _ = _fitting(groups, start, budget, estimate)
        chunks.append([m for group in groups[start:end] for m in group])
        start = end
    return chunks


def take_chunk(
    groups: Groups, start: int, *, budget: int, counter: TokenCounter
) -> tuple[list[Mapping[str, Any]], int]:
    """The groups from ``start`` on that fit ``budget`` as one chunk, and where the next
    chunk starts.

    A first group larger than the budget on its own is shrunk until it fits (see
    :func:`shrink_group`), so a chunk never exceeds the budget.
    """
    end, used = _fitting(groups, start, budget, counter.estimate)
    chunk = [m for group in groups[start:end] for m in group]
    if used > budget:
        chunk = shrink_group(chunk, budget=budget, counter=counter)
    return chunk, end


def shrink_group(group: Messages, *, budget: int, counter: TokenCounter) -> list[Mapping[str, Any]]:
    """``group`` within ``budget``: each message's text clipped to an equal share; when that
    is not enough (long tool arguments, media, many messages) the group becomes one plain-text
    transcript message, clipped in the middle."""
    framing = counter.estimate({"role": "user", "content": ""})
    share = budget // max(len(group), 1) - framing
    if share > 0:
        clipped = [clip_message(m, share, counter.estimate_text) for m in group]
        if sum(counter.estimate(m) for m in clipped) <= budget:
            return clipped
    transcript = "\n\n".join(_transcript_entry(m) for m in group)
    return [
        {"role": "user", "content": clip_text(transcript, budget - framing, counter.estimate_text)}
    ]


def _transcript_entry(message: Mapping[str, Any]) -> str:
    """One message as plain text: ``role: text`` and one line per tool call."""
    lines = [f"{message.get('role', '?')}: {text_of(message)}"]
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            lines.append(f"  called {function.get('name')}({function.get('arguments') or ''})")
    return "\n".join(lines)
