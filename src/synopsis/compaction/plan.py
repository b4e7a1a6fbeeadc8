"""Compaction planning: what to keep, what to summarize, where it is safe to cut. Pure.

A compacted history is ``[leading system messages] + [preserved skills] + [summary] +
[kept tail]``. The planner decides the split without calling any model:

* the leading run of system messages is kept verbatim and never summarized;
* the tail (by messages, tokens or a fraction of the context; default none, as in the
  original) starts only at a safe cut point, so a tool call is never separated from its
  results;
* everything between is summarized; an earlier summary found there is handed to the
  summarizer as the previous summary (incremental mode) instead of as conversation;
* a guard refuses a compaction that would only re-summarize the previous summary.

Large inputs are split into chunks that each fit the summarizer's window (rolling
summarization), at safe points, with oversized single messages clipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from synopsis.errors import ConfigError
from synopsis.messages import (
    content_type,
    is_internal,
    open_tool_calls,
    safe_cut_points,
    split_leading_system,
)
from synopsis.tokens import MessageEstimator

__all__ = ["CompactionPlan", "KeepTail", "plan_compaction"]


@dataclass(frozen=True, slots=True, kw_only=True)
class KeepTail:
    """How much recent history to keep verbatim after the summary. All zero: keep nothing."""

    messages: int = 0
    tokens: int = 0
    fraction: float = 0.0

    def __post_init__(self) -> None:
        for name in ("messages", "tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"keep_tail {name} must be a non-negative integer, got {value!r}")
        if not 0.0 <= self.fraction < 1.0:
            raise ConfigError(f"keep_tail fraction must be in [0, 1), got {self.fraction!r}")

    @classmethod
    def coerce(cls, value: KeepTail | int | None) -> KeepTail:
        """Accept a KeepTail, a message count, or None (keep nothing)."""
        if value is None:
            return cls()
        if isinstance(value, KeepTail):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(messages=value)
        raise ConfigError(f"keep_tail must be a KeepTail or an int, got {type(value).__name__}")

    @property
    def is_zero(self) -> bool:
        return not (self.messages or self.tokens or self.fraction)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPlan:
    """The pure outcome of planning; ``apply`` turns it into a new history."""

    system: tuple[Mapping[str, Any], ...]
    #: Messages replaced by the summary, previous summaries and skills messages included.
    replaced: tuple[Mapping[str, Any], ...]
    #: What the summarizer is asked to read: ``replaced`` minus internal messages.
    to_summarize: tuple[Mapping[str, Any], ...]
    tail: tuple[Mapping[str, Any], ...]
    previous_summary: Mapping[str, Any] | None
    #: False when there is nothing new to summarize (the re-trigger guard).
    worthwhile: bool
    skip_reason: str | None = None


def _latest_summary_index(context: Sequence[Mapping[str, Any]]) -> int | None:
    for index in range(len(context) - 1, -1, -1):
        if content_type(context[index]) == "summary":
            return index
    return None


def _desired_tail_start(
    context: Sequence[Mapping[str, Any]], keep: KeepTail, estimate: MessageEstimator
) -> int:
    """Index in ``context`` where the verbatim tail should begin, before safety adjustment."""
    start = len(context)
    if keep.messages:
        start = min(start, max(0, len(context) - keep.messages))
    token_goal = keep.tokens
    if keep.fraction:
        total = sum(estimate(m) for m in context)
        token_goal = max(token_goal, int(total * keep.fraction))
    if token_goal:
        used = 0
        index = len(context)
        while index > 0 and used + estimate(context[index - 1]) <= token_goal:
            index -= 1
            used += estimate(context[index])
        start = min(start, index)
    return start


def _safe_tail_start(context: Sequence[Mapping[str, Any]], desired: int, floor: int) -> int:
    """The nearest safe cut at or before ``desired`` (keeping a tool pair whole), but after
    ``floor``; if none, the nearest safe cut after it (keeping less)."""
    points = safe_cut_points(context)
    before = [p for p in points if floor < p <= desired]
    if before:
        return before[-1]
    after = [p for p in points if p > desired]
    return after[0] if after else len(context)


def plan_compaction(
    messages: Sequence[Mapping[str, Any]],
    *,
    keep_tail: KeepTail | None = None,
    estimate: MessageEstimator,
    min_new_messages: int = 1,
) -> CompactionPlan:
    """Split ``messages`` into system / replaced / tail. Never mutates its input."""
    keep = keep_tail or KeepTail()
    system, context = split_leading_system(messages)
    summary_at = _latest_summary_index(context)
    floor = summary_at + 1 if summary_at is not None else 0
    start = len(context)
    if not keep.is_zero:
        start = _safe_tail_start(context, _desired_tail_start(context, keep, estimate), floor)
    if open_tool_calls(context):
        # Calls still waiting for results stay in the tail, or their results would arrive
        # after the summary as orphans.
        start = min(start, max(p for p in safe_cut_points(context) if p < len(context)))
    replaced = context[:start]
    previous = context[summary_at] if summary_at is not None and summary_at < start else None
    to_summarize = tuple(m for m in replaced if not is_internal(m))
    new_after_summary = sum(1 for m in replaced[floor:] if not is_internal(m))
    worthwhile, reason = True, None
    if not replaced:
        worthwhile, reason = False, "nothing to summarize before the kept tail"
    elif previous is not None and new_after_summary < max(min_new_messages, 1):
        worthwhile, reason = False, "only the previous summary would be re-summarized"
    elif previous is None and not to_summarize:
        worthwhile, reason = False, "only internal messages before the kept tail"
    return CompactionPlan(
        system=tuple(system),
        replaced=tuple(replaced),
        to_summarize=to_summarize,
        tail=tuple(context[start:]),
        previous_summary=previous,
        worthwhile=worthwhile,
        skip_reason=reason,
    )
