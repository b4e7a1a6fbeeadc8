"""The pure compaction planner: splits, safe cuts, the re-trigger guard, chunking."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synopsis.compaction.plan import KeepTail, plan_compaction
from synopsis.errors import ConfigError
from synopsis.messages import open_tool_calls, text_of
from synopsis.summarizer import chunk_for_window, clip_message
from synopsis.validation import validate_messages
from tests.strategies import histories


def est(message: dict[str, Any]) -> int:
    return max(1, len(text_of(message)) // 4)


def _call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


SYSTEM = {"role": "system", "content": "be brief"}


def test_default_keeps_no_tail_and_all_system_messages() -> None:
    """With no tail asked for, everything after the leading system messages but the last
    message is replaced; the newest user message, not in the tail, is pinned."""
    history = [
        SYSTEM,
        *(
            {"role": r, "content": c}
            for r, c in (("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d"))
        ),
    ]
    plan = plan_compaction(history, estimate=est)
    assert plan.system == (SYSTEM,)
    assert list(plan.replaced) == history[1:-1]
    assert plan.tail == (history[-1],)
    assert plan.pinned == (history[3],)
    assert plan.worthwhile


def test_the_last_message_and_a_pending_tool_result_always_stay() -> None:
    """Even with no tail asked for, the last message stays with its tool group (issue 20.5):
    a result the model has not answered yet is never summarized away from it."""
    history = [
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "look it up"},
        {"role": "assistant", "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "result"},
    ]
    plan = plan_compaction(history, estimate=est)
    assert plan.tail == tuple(history[3:])
    assert plan.pinned == (history[2],)  # the newest request stays as its own message
    assert plan.to_summarize == tuple(history[:3])  # and is read by the summarizer too
    huge = [*history[:3], {"role": "user", "content": "x " * 5_000}]
    tight = plan_compaction(huge, keep_tail=KeepTail(tokens=10), estimate=est)
    assert tight.tail == (huge[-1],)  # larger than the token tail, kept all the same


def test_only_the_newest_request_before_the_tail_is_not_worth_a_summary() -> None:
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    plan = plan_compaction(history, estimate=est)
    assert not plan.worthwhile and "newest user message" in (plan.skip_reason or "")


def test_a_fraction_tail_is_a_share_of_the_budget_not_of_a_huge_history() -> None:
    history = [{"role": r, "content": "w " * 100} for r in ("user", "assistant") * 50]
    whole = plan_compaction(history, keep_tail=KeepTail(fraction=0.25), estimate=est)
    bounded = plan_compaction(history, keep_tail=KeepTail(fraction=0.25), estimate=est, budget=800)
    assert sum(map(est, bounded.tail)) <= 200 < sum(map(est, whole.tail))


def test_tail_by_messages_moves_back_to_keep_tool_pairs_whole() -> None:
    """A tail of 1 message that would start on a tool result grows to include its call."""
    history = [
        {"role": "user", "content": "u1"},
        {"role": "assistant", "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
    ]
    plan = plan_compaction(history, keep_tail=KeepTail(messages=1), estimate=est)
    assert [m["role"] for m in plan.tail] == ["assistant", "tool"]
    assert list(plan.replaced) == history[:1]


def test_tail_by_tokens_keeps_what_fits() -> None:
    """A token tail keeps the newest messages whose estimates fit the budget."""
    history = [
        {"role": "user", "content": "x" * 400},
        {"role": "assistant", "content": "y" * 40},
        {"role": "user", "content": "z" * 40},
    ]
    plan = plan_compaction(history, keep_tail=KeepTail(tokens=25), estimate=est)
    assert len(plan.tail) == 2


def test_pending_tool_calls_stay_in_the_tail() -> None:
    """A call still waiting for results is never summarized away."""
    history = [{"role": "user", "content": "u"}, {"role": "assistant", "tool_calls": [_call("c1")]}]
    plan = plan_compaction(history, estimate=est)
    assert [m["role"] for m in plan.tail] == ["assistant"]


def test_previous_summary_is_not_summarized_as_conversation() -> None:
    """An earlier summary goes to previous_summary, not into to_summarize."""
    summary = {"role": "user", "content": "S", "meta": {"content_type": "summary"}}
    history = [
        SYSTEM,
        summary,
        {"role": "user", "content": "new"},
        {"role": "assistant", "content": "reply"},
        {"role": "user", "content": "newest"},
    ]
    plan = plan_compaction(history, estimate=est)
    assert plan.previous_summary is summary
    assert [m["content"] for m in plan.to_summarize] == ["new", "reply"]


def test_guard_refuses_to_resummarize_only_the_summary() -> None:
    """[system, summary] alone is not worth compacting again (the snowball guard)."""
    summary = {"role": "user", "content": "S", "meta": {"content_type": "summary"}}
    plan = plan_compaction([SYSTEM, summary], estimate=est)
    assert not plan.worthwhile
    assert "previous summary" in (plan.skip_reason or "")


def test_guard_counts_only_messages_after_the_summary() -> None:
    """With min_new_messages=3, two new messages after a summary are not enough."""
    summary = {"role": "user", "content": "S", "meta": {"content_type": "summary"}}
    # The last message always stays, and the newest user message with it: "a" and "b" go.
    history = [
        summary,
        *({"role": r, "content": c} for r, c in (("user", "a"), ("assistant", "b"))),
        {"role": "user", "content": "c"},
    ]
    assert not plan_compaction(history, estimate=est, min_new_messages=3).worthwhile
    assert plan_compaction(history, estimate=est, min_new_messages=2).worthwhile


def test_empty_history_is_not_worthwhile() -> None:
    """Nothing but system messages: nothing to do."""
    assert not plan_compaction([SYSTEM], estimate=est).worthwhile


@pytest.mark.parametrize("bad", [KeepTail, 1.5, "3"])
def test_keep_tail_coercion_rejects_wrong_types(bad: object) -> None:
    """KeepTail.coerce accepts KeepTail, int or None only."""
    if bad is KeepTail:
        assert KeepTail.coerce(None).is_zero
        assert KeepTail.coerce(3) == KeepTail(messages=3)
        return
    with pytest.raises(ConfigError):
        KeepTail.coerce(bad)  # type: ignore[arg-type]


def test_keep_tail_validation() -> None:
    """Negative counts and fractions out of range are configuration errors."""
    with pytest.raises(ConfigError):
        KeepTail(messages=-1)
    with pytest.raises(ConfigError):
        KeepTail(fraction=1.0)


@given(histories(), st.integers(0, 6), st.integers(0, 60))
def test_plan_invariants(history: list, keep_messages: int, keep_tokens: int) -> None:
    """For random histories: no orphans either side, system verbatim, input unchanged."""
    before = copy.deepcopy(history)
    plan = plan_compaction(
        history, keep_tail=KeepTail(messages=keep_messages, tokens=keep_tokens), estimate=est
    )
    assert history == before
    assert list(plan.system) + list(plan.replaced) + list(plan.tail) == history
    validate_messages(list(plan.tail))
    assert not open_tool_calls(plan.replaced)


def test_clip_message_keeps_head_and_tail() -> None:
    """An oversized message is clipped in the middle with a marker; small ones untouched."""
    big = {"role": "tool", "tool_call_id": "c", "content": "A" * 1000 + "B" * 1000}
    clipped = clip_message(big, 100, lambda s: len(s) // 4)
    text = text_of(clipped)
    assert text.startswith("A") and text.endswith("B") and "clipped" in text
    assert len(text) < 600
    small = {"role": "user", "content": "hi"}
    assert clip_message(small, 100, lambda s: len(s) // 4) is small


def test_chunks_respect_budget_and_safe_points() -> None:
    """Chunks stay within budget and never split a call from its results."""
    history = []
    for i in range(6):
        history += [
            {"role": "assistant", "tool_calls": [_call(f"c{i}")]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 40},
        ]
    chunks = chunk_for_window(history, budget=25, estimate=est)
    assert sum(len(c) for c in chunks) == len(history)
    for chunk in chunks:
        validate_messages(chunk)
        assert not open_tool_calls(chunk)
        assert sum(est(m) for m in chunk) <= 25


def test_chunking_needs_a_positive_budget() -> None:
    """A window too small for any conversation is a configuration error."""
    with pytest.raises(ConfigError):
        chunk_for_window([], budget=0, estimate=est)
