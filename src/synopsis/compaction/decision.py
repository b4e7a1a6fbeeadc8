"""Whether a compaction is due: count the history (baseline + increment) and ask the trigger,
with the regrowth guard.

The guard: when the newest summary could not get the history below the trigger (its marker
carries ``tokens_after``), another compaction is tried only once the history has grown by
:data:`MIN_REGROWTH` of the limit since, so a history that cannot shrink does not pay a
summary on every call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from synopsis.compaction.options import CompactionOptions
from synopsis.compaction.summary import SUMMARY_KIND
from synopsis.compaction.trigger import TriggerDecision
from synopsis.errors import InvalidMessage
from synopsis.messages import marker_of
from synopsis.tokens import TokenCounter
from synopsis.validation import require_mappings

__all__ = ["MIN_REGROWTH", "decide", "decide_counted", "regrowth_guard"]

Messages = Sequence[Mapping[str, Any]]
#: A summary that could not get below the trigger is retried only after this much regrowth.
MIN_REGROWTH: Final = 0.10


def decide(
    options: CompactionOptions,
    counter: TokenCounter,
    messages: Messages,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[int, TriggerDecision]:
    """Count tokens (baseline + increment) and evaluate the trigger. O(new messages)."""
    return decide_counted(options, counter, messages, tools)[:2]


def decide_counted(
    options: CompactionOptions,
    counter: TokenCounter,
    messages: Messages,
    tools: Sequence[Mapping[str, Any]] | None,
) -> tuple[int, TriggerDecision, bool]:
    """:func:`decide`, and whether every message is a plain dict without ``meta``.

    The counter reads only what it has not read before (from the baseline on), refusing a
    non-mapping as it goes; the full check runs then, for the error naming the converter.
    """
    try:
        count = counter.count(messages, tools=tools)
    except InvalidMessage:
        require_mappings(messages)
        raise
    tokens = count.total
    decision = options.trigger.evaluate(tokens, len(messages))
    if decision.fired and regrowth_guard(options, messages, tokens):
        decision = options.trigger.evaluate(0, 0)
    return tokens, decision, count.plain


def regrowth_guard(options: CompactionOptions, messages: Messages, tokens: int) -> bool:
    """True when the newest summary could not get below the trigger and the history has not
    grown enough since to make another try worth a model call."""
    for message in reversed(messages):
        marker = marker_of(message)
        if marker is None or marker.kind != SUMMARY_KIND:
            continue
        after = marker.integer("tokens_after")
        limit = options.trigger.threshold_tokens()
        if after is None or limit is None or after <= limit:
            return False
        return tokens - after < MIN_REGROWTH * limit
    return False
