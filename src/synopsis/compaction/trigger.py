"""When to compact: token, message-count and context-window-fraction thresholds.

A :class:`Trigger` fires when **any** enabled condition holds (all comparisons strict):

* ``tokens > tokens_threshold``;
* ``messages > messages_threshold`` (system messages count);
* ``tokens > fraction * context_window - reserve_output``.

A threshold of 0 or ``None`` is off. (The original middleware treated an unset token threshold
as 0 whenever a message threshold was set, so any non-empty history fired on every call.)
Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from synopsis.errors import ConfigError

__all__ = ["DEFAULT_TRIGGER_TOKENS", "Trigger", "TriggerDecision", "TriggerReason"]

#: The original's threshold when nothing is configured.
DEFAULT_TRIGGER_TOKENS: Final = 160_000

TriggerReason = Literal["tokens", "messages", "fraction"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerDecision:
    """Whether a trigger fired, which condition fired it and at what threshold."""

    fired: bool
    reason: TriggerReason | None
    threshold: int | None
    tokens: int
    messages: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Trigger:
    """Thresholds for compaction; 0 or ``None`` disables a condition.

    ``fraction`` (in (0, 1]) of ``context_window``, minus ``reserve_output`` for the answer,
    gives a token limit that follows the model. ``context_window`` alone enables nothing; it
    is there for :meth:`threshold_tokens` users and to pair with ``fraction``.
    """

    tokens: int | None = None
    messages: int | None = None
    fraction: float | None = None
    context_window: int | None = None
    reserve_output: int = 0

    def __post_init__(self) -> None:
        for name in ("tokens", "messages", "context_window", "reserve_output"):
            _check_count(name, getattr(self, name))
        fraction = self.fraction
        if fraction is None or fraction == 0:
            if self.reserve_output:
                raise ConfigError("reserve_output only applies with fraction; set fraction too")
            return
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise ConfigError(f"fraction must be a number in (0, 1], got {fraction!r}")
        if not 0 < fraction <= 1:
            raise ConfigError(f"fraction must be in (0, 1], got {fraction!r}")
        if not self.context_window:
            raise ConfigError("fraction needs context_window (the model's window in tokens)")
        limit = self._fraction_limit()
        if limit is not None and limit <= 0:
            raise ConfigError(
                f"reserve_output ({self.reserve_output}) leaves no room: "
                f"fraction * context_window is {int(fraction * self.context_window)}"
            )

    @classmethod
    def default(cls) -> Trigger:
        """The original's default: fire above 160,000 tokens."""
        return cls(tokens=DEFAULT_TRIGGER_TOKENS)

    @property
    def is_off(self) -> bool:
        """True when no condition is enabled (the trigger never fires)."""
        return not self.tokens and not self.messages and self._fraction_limit() is None

    def threshold_tokens(self) -> int | None:
        """The effective token limit: the smaller of ``tokens`` and the fraction's, or None."""
        limits = [x for x in (self.tokens or None, self._fraction_limit()) if x is not None]
        return min(limits) if limits else None

    def evaluate(self, token_count: int, message_count: int) -> TriggerDecision:
        """Decide for a history of ``message_count`` messages costing ``token_count`` tokens."""
        decision = TriggerDecision(
            fired=False, reason=None, threshold=None, tokens=token_count, messages=message_count
        )
        if self.messages and message_count > self.messages:
            return _fired(decision, "messages", self.messages)
        limit = self.threshold_tokens()
        if limit is not None and token_count > limit:
            reason: TriggerReason = "tokens" if limit == self.tokens else "fraction"
            return _fired(decision, reason, limit)
        return decision

    def _fraction_limit(self) -> int | None:
        if not self.fraction or not self.context_window:
            return None
        return int(self.fraction * self.context_window) - self.reserve_output


def _fired(decision: TriggerDecision, reason: TriggerReason, threshold: int) -> TriggerDecision:
    return TriggerDecision(
        fired=True,
        reason=reason,
        threshold=threshold,
        tokens=decision.tokens,
        messages=decision.messages,
    )


def _check_count(name: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer or None, got {value!r}")
    if value < 0:
        raise ConfigError(f"{name} must be >= 0 (0 or None turns it off), got {value}")
