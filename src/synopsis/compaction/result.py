"""What a compaction returns: :class:`CompactionResult`, with one :class:`Tier` per tier that
ran, and the result of a compaction that left the history as it was (:func:`unchanged_result`).

``messages`` is always a new list, sendable as it is: messages carry only the keys of the
input's message schema (a legacy ``meta`` marker moves into the text, see
:func:`synopsis.messages.without_meta`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from synopsis.events import Event
from synopsis.messages import without_meta
from synopsis.models import Usage

__all__ = ["CompactionResult", "Tier", "sendable", "unchanged_result"]

Messages = Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Tier:
    """What one tier did: ``clear`` (old tool output), ``summarize``, or ``truncate`` (the
    fallback); the tokens before and after it; the input messages it cleared, summarized or
    dropped (indices)."""

    name: str
    tokens_before: int
    tokens_after: int
    messages: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "tier": self.name,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_saved": self.tokens_before - self.tokens_after,
            "messages": len(self.messages),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionResult:
    """What one compaction did. ``messages`` is always a new list."""

    messages: list[dict[str, Any]]
    triggered: bool
    compacted: bool
    reason: str | None
    tokens_before: int
    tokens_after: int
    model: str | None = None
    attempts: int = 0
    summary: str | None = None
    archive: str | None = None
    skipped: str | None = None
    fallback: str | None = None
    error: dict[str, Any] | None = None
    events: tuple[Event, ...] = field(default_factory=tuple)
    version: int | None = None
    usage: Usage | None = None  # what the summary cost, summed over its calls
    calls: int = 0
    tiers: tuple[Tier, ...] = ()
    #: With ``redact=``: how many values of each kind were redacted (never the values).
    redacted: Mapping[str, int] = field(default_factory=dict)

    def report(self) -> dict[str, Any]:
        """A JSON-ready summary of the result (without the messages)."""
        return {
            "triggered": self.triggered,
            "compacted": self.compacted,
            "reason": self.reason,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "model": self.model,
            "attempts": self.attempts,
            "archive": self.archive,
            "skipped": self.skipped,
            "fallback": self.fallback,
            "error": self.error,
            "version": self.version,
            "usage": self.usage.as_dict() if self.usage else None,
            "calls": self.calls,
            "tiers": [tier.to_dict() for tier in self.tiers],
            "redacted": dict(self.redacted),
        }


def sendable(message: Mapping[str, Any]) -> dict[str, Any]:
    # A plain dict without ``meta`` is what without_meta would return: no call for it.
    if type(message) is dict and "meta" not in message:
        return message
    return without_meta(message)


def unchanged_result(
    messages: Messages,
    tokens: int,
    *,
    reason: str | None,
    triggered: bool,
    skipped: str | None = None,
    error: dict[str, Any] | None = None,
    events: tuple[Event, ...] = (),
    plain: bool = False,
) -> CompactionResult:
    """``messages`` in a new list; ``plain`` (the counter found only dicts without ``meta``)
    makes it one copy, without a pass that moves legacy markers into the text."""
    return CompactionResult(
        messages=cast("list[dict[str, Any]]", list(messages))
        if plain
        else [sendable(m) for m in messages],
        triggered=triggered,
        compacted=False,
        reason=reason,
        tokens_before=tokens,
        tokens_after=tokens,
        skipped=skipped,
        error=error,
        fallback="keep" if error else None,
        events=events,
    )
