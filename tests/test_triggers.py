"""Triggers: token / message / fraction thresholds, the zero-token fix, validation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synopsis.compaction.trigger import DEFAULT_TRIGGER_TOKENS, Trigger, TriggerDecision
from synopsis.errors import ConfigError


def test_seed_b_token_threshold_fires() -> None:
    """Seed B: 5209 tokens > 5000 fires, with reason and threshold."""
    decision = Trigger(tokens=5000).evaluate(5209, 6)
    assert decision == TriggerDecision(
        fired=True, reason="tokens", threshold=5000, tokens=5209, messages=6
    )


def test_seed_b_huge_token_threshold_does_not_fire() -> None:
    """Seed B: 5209 tokens under 999999 does not fire."""
    decision = Trigger(tokens=999_999).evaluate(5209, 6)
    assert (decision.fired, decision.reason, decision.threshold) == (False, None, None)


def test_seed_b_message_threshold_fires() -> None:
    """Seed B: 6 messages > 5 fires even with a huge token threshold."""
    decision = Trigger(tokens=999_999, messages=5).evaluate(5209, 6)
    assert (decision.fired, decision.reason, decision.threshold) == (True, "messages", 5)


def test_message_only_trigger_does_not_enable_zero_token_threshold() -> None:
    """The original's defect is fixed: a message-only trigger never fires on tokens."""
    trigger = Trigger(messages=3)
    assert not trigger.evaluate(2, 2).fired  # upstream: "msg1"/"msg2", N = 3
    assert not trigger.evaluate(10**9, 3).fired
    assert trigger.threshold_tokens() is None


def test_thresholds_are_strict() -> None:
    """Equal to a threshold does not fire; one above does."""
    trigger = Trigger(tokens=100, messages=10)
    assert not trigger.evaluate(100, 10).fired
    assert trigger.evaluate(101, 10).reason == "tokens"
    assert trigger.evaluate(100, 11).reason == "messages"


def test_upstream_should_summarize_cases() -> None:
    """TestMiddlewareShouldSummarize: over/under messages and tokens; default is 160k."""
    assert Trigger(messages=2, tokens=1000).evaluate(5, 3).fired
    assert not Trigger(messages=10, tokens=1000).evaluate(5, 3).fired
    assert Trigger(tokens=10).evaluate(11, 1).fired
    assert not Trigger(tokens=10).evaluate(10, 1).fired
    assert not Trigger.default().evaluate(20, 1).fired
    assert Trigger.default().tokens == DEFAULT_TRIGGER_TOKENS == 160_000


def test_zero_means_off() -> None:
    """0 and None turn a condition off; nothing set means the trigger is off."""
    assert Trigger(tokens=0, messages=0).is_off
    assert Trigger().is_off
    assert not Trigger().evaluate(10**12, 10**6).fired
    assert not Trigger(messages=1).is_off


def test_fraction_of_context_window_with_reserve() -> None:
    """fraction * window - reserve is a token limit reported as reason 'fraction'."""
    trigger = Trigger(fraction=0.8, context_window=100_000, reserve_output=8_000)
    assert trigger.threshold_tokens() == 72_000
    assert not trigger.evaluate(72_000, 1).fired
    decision = trigger.evaluate(72_001, 1)
    assert (decision.reason, decision.threshold) == ("fraction", 72_000)


def test_threshold_tokens_is_the_smaller_limit() -> None:
    """With both a token and a fraction limit, the smaller one governs."""
    assert Trigger(tokens=50_000, fraction=1, context_window=100_000).threshold_tokens() == 50_000
    both = Trigger(tokens=90_000, fraction=0.5, context_window=100_000)
    assert both.threshold_tokens() == 50_000
    assert both.evaluate(60_000, 1).reason == "fraction"
    assert Trigger(tokens=50_000, fraction=1, context_window=100_000).evaluate(
        60_000, 1
    ).reason == ("tokens")


def test_context_window_alone_enables_nothing() -> None:
    """A context window without a fraction is informational only."""
    trigger = Trigger(context_window=8_000)
    assert trigger.is_off
    assert trigger.threshold_tokens() is None


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"tokens": -1}, "tokens must be >= 0"),
        ({"messages": -1}, "messages must be >= 0"),
        ({"context_window": -5}, "context_window must be >= 0"),
        ({"tokens": True}, "tokens must be an integer"),
        ({"messages": 2.5}, "messages must be an integer"),
        ({"fraction": 1.5, "context_window": 1000}, r"fraction must be in \(0, 1\]"),
        ({"fraction": -0.1, "context_window": 1000}, r"fraction must be in \(0, 1\]"),
        ({"fraction": True, "context_window": 1000}, "fraction must be a number"),
        ({"fraction": "0.5", "context_window": 1000}, "fraction must be a number"),
        ({"fraction": 0.5}, "fraction needs context_window"),
        ({"reserve_output": 10}, "reserve_output only applies with fraction"),
        ({"fraction": 0.5, "context_window": 1000, "reserve_output": 500}, "leaves no room"),
    ],
)
def test_invalid_triggers_raise_config_error(options: dict[str, Any], match: str) -> None:
    """Bad thresholds raise ConfigError naming the field and the fix."""
    with pytest.raises(ConfigError, match=match):
        Trigger(**options)


def test_options_are_keyword_only() -> None:
    """Positional thresholds are rejected, so tokens and messages cannot be swapped."""
    with pytest.raises(TypeError):
        Trigger(100)  # type: ignore[misc]


@given(
    st.integers(0, 10**6) | st.none(),
    st.integers(0, 1000) | st.none(),
    st.integers(0, 10**7),
    st.integers(0, 2000),
)
def test_fires_iff_a_condition_holds(
    tokens: int | None, messages: int | None, token_count: int, message_count: int
) -> None:
    """fired is exactly 'tokens over an enabled limit or messages over an enabled limit'."""
    decision = Trigger(tokens=tokens, messages=messages).evaluate(token_count, message_count)
    expected = bool(tokens and token_count > tokens) or bool(messages and message_count > messages)
    assert decision.fired is expected
    assert (decision.reason is None) is (not expected)
