"""Compaction planning: what to keep, what to summarize, where it is safe to cut. Pure.

A compacted history is ``[leading system messages] + [preserved skills] + [summary] +
[kept tail]``. The planner decides the split without calling any model:

* the leading run of system messages is kept verbatim and never summarized;
* the tail (by messages, tokens or a fraction of the budget) starts only at a safe cut point,
  so a tool call is never separated from its results; whatever ``keep_tail`` says it holds at
  least the last message with its tool group (a pending call or result stays as it is);
* the newest message a person wrote stays in the context as its own message: when the tail
  does not hold it, it is *pinned* after the summary (and still read by the summarizer);
* everything between is summarized; an earlier summary found there is handed to the
  summarizer as the previous summary (incremental mode) instead of as conversation;
* a guard refuses a compaction that would only re-summarize the previous summary, and one
  that could summarize something only by cutting into the requested tail.

When summarizing fails and the fallback is truncation, :func:`plan_truncation` decides which
of the replaced messages go: the oldest unprotected ones first, whole tool groups at a time.

Large inputs are split into chunks that each fit the summarizer's window (rolling
summarization), at safe points, with oversized single messages clipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from synopsis.errors import ConfigError
from synopsis.messages import (
    content_type,
    is_internal,
    is_real_user_message,
    safe_cut_points,
    split_leading_system,
)
from synopsis.tokens import MessageEstimator

__all__ = ["CompactionPlan", "KeepTail", "Truncation", "plan_compaction", "plan_truncation"]

Messages = tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class KeepTail:
    """How much recent history to keep verbatim after the summary: the last ``messages``,
    the newest ``tokens``, or ``fraction`` of the budget (the trigger's token limit, or the
    history when it is smaller or the trigger has none); the largest of them wins. All zero
    keeps only what is always kept: the last message with its tool group, and the newest
    user message."""

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
    #: What the summarizer is asked to read: ``replaced`` minus internal messages (a cleared
    #: tool result stays: it answers a call).
    to_summarize: tuple[Mapping[str, Any], ...]
    tail: tuple[Mapping[str, Any], ...]
    previous_summary: Mapping[str, Any] | None
    #: The newest user message when the tail does not hold it: one of ``replaced`` (the
    #: summarizer reads it), kept as its own message between the summary and the tail.
    pinned: tuple[Mapping[str, Any], ...] = ()
    #: False when there is nothing new to summarize (the re-trigger guard).
    worthwhile: bool
    skip_reason: str | None = None

    @property
    def removed(self) -> tuple[Mapping[str, Any], ...]:
        """What leaves the context: ``replaced`` without the pinned message."""
        if not self.pinned:
            return self.replaced
        pinned = {id(m) for m in self.pinned}
        return tuple(m for m in self.replaced if id(m) not in pinned)


def _latest_summary_index(context: Sequence[Mapping[str, Any]]) -> int | None:
    for index in range(len(context) - 1, -1, -1):
        if content_type(context[index]) == "summary":
            return index
    return None


def _desired_tail_start(
    context: Sequence[Mapping[str, Any]],
    keep: KeepTail,
    estimate: MessageEstimator,
    budget: int | None,
    budget_messages: int | None = None,
) -> int:
    """Index in ``context`` where the verbatim tail should begin, before safety adjustment."""
    start = len(context)
    if keep.messages:
        start = min(start, max(0, len(context) - keep.messages))
    if keep.tokens:
        start = min(start, _newest_within(context, keep.tokens, estimate))
    if keep.fraction:
        total = sum(estimate(m) for m in context)
        base = total if budget is None else min(total, budget)
        share = _newest_within(context, int(base * keep.fraction), estimate)
        if budget_messages:  # a trigger by messages bounds the share in messages too
            share = max(share, len(context) - int(budget_messages * keep.fraction))
        start = min(start, share)
    return start


def _newest_within(
    context: Sequence[Mapping[str, Any]], tokens: int, estimate: MessageEstimator
) -> int:
    """Where the newest run of messages costing at most ``tokens`` starts."""
    used = 0
    index = len(context)
    while index > 0 and used + estimate(context[index - 1]) <= tokens:
        index -= 1
        used += estimate(context[index])
    return index


def _safe_tail_start(context: Sequence[Mapping[str, Any]], desired: int, floor: int) -> int:
    """The nearest safe cut at or before ``desired`` (keeping a tool pair whole) but after
    ``floor``; ``floor`` itself when there is none, which leaves nothing to summarize: the
    tail is never cut into to make room (LangChain's behaviour)."""
    before = [p for p in safe_cut_points(context) if floor < p <= desired]
    return before[-1] if before else floor


def plan_compaction(
    messages: Sequence[Mapping[str, Any]],
    *,
    keep_tail: KeepTail | None = None,
    estimate: MessageEstimator,
    min_new_messages: int = 1,
    budget: int | None = None,
    budget_messages: int | None = None,
) -> CompactionPlan:
    """Split ``messages`` into system / replaced / tail. Never mutates its input.

    ``budget`` and ``budget_messages`` (the trigger's token and message limits) bound a
    ``fraction`` tail."""
    keep = keep_tail or KeepTail()
    system, context = split_leading_system(messages)
    summary_at = _latest_summary_index(context)
    floor = summary_at + 1 if summary_at is not None else 0
    desired = _desired_tail_start(context, keep, estimate, budget, budget_messages)
    # At least the last message with its tool group (a pending call, a result not yet
    # answered), as LangChain keeps at least the last message; calls still waiting for results
    # stay too, or their results would arrive after the summary as orphans.
    cuts = [p for p in safe_cut_points(context) if floor < p < len(context)]
    if cuts:
        start = _safe_tail_start(context, min(desired, cuts[-1]), floor)
        if start == floor:
            return _covered_by_tail(system, context)
    elif floor < len(context):  # after the summary, one group: all of it is the last message's
        return _covered_by_tail(system, context)
    else:
        start = len(context)  # nothing after the summary: the guard below says so
    replaced = context[:start]
    previous = context[summary_at] if summary_at is not None and summary_at < start else None
    to_summarize = tuple(m for m in replaced if not _injected(m))
    tail = tuple(context[start:])
    pinned: tuple[Mapping[str, Any], ...] = ()
    if not any(is_real_user_message(m) for m in tail):
        pinned = tuple([m for m in replaced[floor:] if is_real_user_message(m)][-1:])
    # What the summary would take out of the context: the pinned message stays.
    new_after_summary = sum(1 for m in replaced[floor:] if not _injected(m)) - len(pinned)
    worthwhile, reason = True, None
    if not replaced:
        worthwhile, reason = False, "nothing to summarize before the kept tail"
    elif previous is not None and new_after_summary < max(min_new_messages, 1):
        worthwhile, reason = False, "only the previous summary would be re-summarized"
    elif previous is None and not to_summarize:
        worthwhile, reason = False, "only internal messages before the kept tail"
    elif previous is None and new_after_summary < 1:
        worthwhile, reason = False, "only the newest user message, which stays, before the tail"
    return CompactionPlan(
        system=tuple(system),
        replaced=tuple(replaced),
        to_summarize=to_summarize,
        tail=tail,
        previous_summary=previous,
        worthwhile=worthwhile,
        skip_reason=reason,
        pinned=pinned,
    )


def _injected(message: Mapping[str, Any]) -> bool:
    """An internal message the summarizer does not read. A marked tool result (a cleared
    stub) is read all the same: it answers a call, and a call without its result is an
    invalid request to the summarizer's model."""
    return is_internal(message) and message.get("role") != "tool"


def _covered_by_tail(
    system: Sequence[Mapping[str, Any]], context: Sequence[Mapping[str, Any]]
) -> CompactionPlan:
    return CompactionPlan(
        system=tuple(system),
        replaced=(),
        to_summarize=(),
        tail=tuple(context),
        previous_summary=None,
        worthwhile=False,
        skip_reason="the kept tail covers the whole history: nothing to summarize without "
        "cutting into it",
    )


# ---------------------------------------------------------------------------------------------
# The truncation fallback


@dataclass(frozen=True, slots=True, kw_only=True)
class Truncation:
    """Which replaced messages the truncation fallback keeps, and which it drops."""

    kept: Messages
    dropped: Messages


def plan_truncation(
    plan: CompactionPlan,
    *,
    estimate: MessageEstimator,
    max_tokens: int | None = None,
    max_messages: int | None = None,
    reserved_tokens: int = 0,
    reserved_messages: int = 0,
) -> Truncation:
    """Drop the oldest unprotected messages of ``plan.replaced`` until the history fits.

    The history is ``plan.system``, what is kept and ``plan.tail``, plus ``reserved_*`` for the
    messages the caller adds (preserved skills, a notice). Protected, and always kept: the
    previous summary and the newest user message (when it is not in the tail anyway). Other
    internal messages always go: what they carried (skills, quoted user messages) is carried
    on by the caller's own messages. Messages go in whole groups between safe cut points, so
    a tool call never loses its results; the kept part is the newest run that fits.
    """
    groups = _groups(plan.replaced)
    protected = _protected(plan)
    keep = [any(_same(m, protected) for m in group) for group in groups]
    fixed = [
        *plan.system,
        *plan.tail,
        *(m for g, k in zip(groups, keep, strict=True) if k for m in g),
    ]
    tokens = reserved_tokens + sum(estimate(m) for m in fixed)
    count = reserved_messages + len(fixed)
    for index in range(len(groups) - 1, -1, -1):
        group = groups[index]
        if keep[index] or all(is_internal(m) for m in group):
            continue
        tokens += sum(estimate(m) for m in group)
        count += len(group)
        if (max_tokens is not None and tokens > max_tokens) or (
            max_messages is not None and count > max_messages
        ):
            break
        keep[index] = True
    kept = tuple(m for g, k in zip(groups, keep, strict=True) if k for m in g)
    dropped = tuple(m for g, k in zip(groups, keep, strict=True) if not k for m in g)
    return Truncation(kept=kept, dropped=dropped)


def _groups(messages: Sequence[Mapping[str, Any]]) -> list[Messages]:
    """``messages`` split at every safe cut point: a tool call and its results stay together."""
    cuts = safe_cut_points(messages)
    return [tuple(messages[a:b]) for a, b in pairwise(cuts) if a < b]


def _protected(plan: CompactionPlan) -> list[Mapping[str, Any]]:
    protected = [plan.previous_summary] if plan.previous_summary is not None else []
    if not any(is_real_user_message(m) for m in plan.tail):
        newest = [m for m in plan.replaced if is_real_user_message(m)][-1:]
        protected += newest
    return protected


def _same(message: Mapping[str, Any], among: Sequence[Mapping[str, Any]]) -> bool:
    return any(message is other for other in among)
