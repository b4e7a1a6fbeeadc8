"""Tiered compaction: clear old tool output first, summarize only if still over budget.

A history that clearing alone brings under the trigger makes no model call (the summarizer
here fails the test if called); one that is still over budget gets exactly one summary. Both
compactors carry out the same steps and give the same result.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from synopsis.compaction.archive import MemoryArchive
from synopsis.compaction.clear import is_cleared
from synopsis.compaction.compactor import AsyncCompactor, Compactor
from synopsis.compaction.options import ToolClearing
from synopsis.errors import CompactionError, ProviderUnavailable
from synopsis.events import ToolOutputsCleared
from synopsis.messages import content_type
from synopsis.models.retry import RetryPolicy
from synopsis.summarizer import SummaryResult
from synopsis.testing import AsyncFakeModel, FakeModel
from synopsis.validation import validate_messages

SUMMARY = "<summary>1. Primary Request and Intent: fix the failing test</summary>"
NO_SLEEP = RetryPolicy(max_retries=0, initial_delay=0.0, max_delay=0.0, jitter=False)


class ForbiddenSummarizer:
    """Fails the test if tier 2 is reached."""

    def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:
        raise AssertionError("the summarizer was called")


class AsyncForbiddenSummarizer:
    async def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:
        raise AssertionError("the summarizer was called")


class FullArchive:
    def write(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None) -> str:
        raise CompactionError("cannot archive: disk full")


def tool_heavy(results: int = 8, lines: int = 300, chat: int = 0) -> list[dict[str, Any]]:
    """A coding session: file reads of ``lines`` lines each, then ``chat`` plain turns."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test in parser.py."},
    ]
    for i in range(results):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": f"m{i}.py"})},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"c{i}",
                "content": f"def f{i}():\n    return {i}\n" * lines,
            }
        )
    for i in range(chat):
        messages.append({"role": "user", "content": f"And what about case {i}? " * 40})
        messages.append(
            {"role": "assistant", "content": f"Case {i} is handled by the parser. " * 40}
        )
    return messages


def compactor(trigger: int, **keywords: Any) -> Compactor:
    keywords.setdefault("summarizer", ForbiddenSummarizer())
    return Compactor(
        trigger_tokens=trigger,
        clear_tool_outputs=ToolClearing(keep_recent=2),
        session_id="s1",
        **keywords,
    )


def test_a_history_under_budget_after_clearing_makes_no_model_call() -> None:
    archive = MemoryArchive()
    messages = tool_heavy()
    result = compactor(8_000, archive=archive).compact(messages, force=False)
    assert result.compacted and result.summary is None and result.model is None
    assert result.tokens_after <= 8_000 < result.tokens_before
    assert [tier.name for tier in result.tiers] == ["clear"]
    assert [event.name for event in result.events] == ["tool_outputs_cleared"]
    cleared = [i for i, m in enumerate(result.messages) if is_cleared(m)]
    assert cleared == [3, 5, 7, 9, 11, 13]
    assert archive.batches == [("s1", [messages[i] for i in cleared])]
    validate_messages(result.messages)


def test_a_history_still_over_budget_gets_exactly_one_summary() -> None:
    model = FakeModel(default=SUMMARY)
    messages = tool_heavy(chat=12)
    keywords = {"model": model, "retry": NO_SLEEP, "keep_tail": 4}
    result = compactor(1_500, summarizer=None, **keywords).compact(messages, force=False)
    assert len(model.requests) == 1
    assert [tier.name for tier in result.tiers] == ["clear", "summarize"]
    assert result.tiers[0].tokens_after == result.tiers[1].tokens_before
    assert result.tokens_before == result.tiers[0].tokens_before
    assert result.tokens_after == result.tiers[1].tokens_after
    names = [event.name for event in result.events]
    assert names == ["tool_outputs_cleared", "before_summarize", "after_summarize"]
    sent = model.requests[0].messages
    # The summarizer reads the originals tier 1 cleared from the context, pairs intact.
    tools = [m for m in sent if m.get("role") == "tool"]
    assert tools and not any(is_cleared(m) for m in tools)
    assert messages[3]["content"] in [m["content"] for m in tools]
    validate_messages(sent[1:-1])


def test_the_event_counts_what_tier_one_saved() -> None:
    result = compactor(8_000).compact(tool_heavy(), force=False)
    event = result.events[0]
    assert isinstance(event, ToolOutputsCleared)
    assert (event.cleared, event.arguments_cleared) == (6, 0)
    assert event.tokens_saved == event.tokens_before - event.tokens_after > 0
    assert event.to_dict()["event"] == "tool_outputs_cleared"


def test_the_report_lists_each_tier_and_what_it_saved() -> None:
    model = FakeModel(default=SUMMARY)
    result = compactor(1_500, summarizer=None, model=model, keep_tail=4).compact(
        tool_heavy(chat=12), force=False
    )
    tiers = result.report()["tiers"]
    assert [t["tier"] for t in tiers] == ["clear", "summarize"]
    assert all(t["tokens_saved"] == t["tokens_before"] - t["tokens_after"] > 0 for t in tiers)


def test_a_forced_compaction_without_budget_pressure_runs_every_tier() -> None:
    model = FakeModel(default=SUMMARY)
    result = compactor(1_000_000, summarizer=None, model=model).compact(tool_heavy())
    assert not result.triggered and len(model.requests) == 1
    assert [tier.name for tier in result.tiers] == ["clear", "summarize"]


def test_below_the_trigger_nothing_happens() -> None:
    result = compactor(1_000_000).compact(tool_heavy(), force=False)
    assert not result.compacted and result.tiers == () and result.events == ()


def test_nothing_to_clear_goes_straight_to_the_summary() -> None:
    model = FakeModel(default=SUMMARY)
    messages = tool_heavy(results=0, chat=20)
    result = compactor(500, summarizer=None, model=model).compact(messages, force=False)
    assert [tier.name for tier in result.tiers] == ["summarize"] and len(model.requests) == 1


def test_an_archive_that_fails_keeps_the_history_and_calls_no_model() -> None:
    messages = tool_heavy()
    result = compactor(8_000, archive=FullArchive()).compact(messages, force=False)
    assert not result.compacted and result.messages == messages
    assert result.error is not None and "disk full" in result.error["message"]


def test_when_the_summary_fails_the_cleared_history_still_stands() -> None:
    model = FakeModel(default=ProviderUnavailable("down", model="fake:model"))
    result = compactor(1_500, summarizer=None, model=model, retry=NO_SLEEP).compact(
        tool_heavy(chat=12), force=False
    )
    assert result.compacted and result.error is not None and result.fallback == "keep"
    assert any(is_cleared(m) for m in result.messages)
    assert not any(content_type(m) == "summary" for m in result.messages)
    assert [tier.name for tier in result.tiers] == ["clear"]


def test_clearing_off_keeps_the_summary_only_behaviour() -> None:
    model = FakeModel(default=SUMMARY)
    result = Compactor(trigger_tokens=8_000, model=model, clear_tool_outputs=None).compact(
        tool_heavy(), force=False
    )
    assert len(model.requests) == 1 and [tier.name for tier in result.tiers] == ["summarize"]
    assert not any(is_cleared(m) for m in result.messages)


def test_the_regrowth_guard_still_sees_a_cleared_history() -> None:
    """Clearing then summarizing: the next call on the result does not compact again."""
    model = FakeModel(default=SUMMARY)
    c = compactor(1_500, summarizer=None, model=model, keep_tail=4)
    first = c.compact(tool_heavy(chat=12), force=False)
    again = c.compact(first.messages, force=False)
    assert not again.compacted and len(model.requests) == 1


def test_both_compactors_carry_out_the_same_tiers() -> None:
    messages = tool_heavy(chat=12)
    sync_model, async_model = FakeModel(default=SUMMARY), AsyncFakeModel(default=SUMMARY)
    keywords: dict[str, Any] = {
        "trigger_tokens": 1_500,
        "clear_tool_outputs": ToolClearing(keep_recent=2, clear_arguments=True),
        "keep_tail": 4,
        "session_id": "s1",
    }
    sync_archive, async_archive = MemoryArchive(), MemoryArchive()
    sync = Compactor(model=sync_model, archive=sync_archive, **keywords).compact(messages)
    asynchronous = asyncio.run(
        AsyncCompactor(model=async_model, archive=async_archive, **keywords).compact(messages)
    )
    assert sync == asynchronous
    assert sync_archive.batches == async_archive.batches
    assert len(sync_model.requests) == len(async_model.requests) == 1


def test_the_async_compactor_makes_no_model_call_under_budget() -> None:
    c = AsyncCompactor(
        trigger_tokens=10_000,
        clear_tool_outputs=True,  # the default ToolClearing: the 3 newest results stay
        summarizer=AsyncForbiddenSummarizer(),
    )
    result = asyncio.run(c.compact(tool_heavy(), force=False))
    assert [tier.name for tier in result.tiers] == ["clear"]


@pytest.mark.parametrize("force", [True, False])
def test_the_before_model_hook_clears_too(force: bool) -> None:
    messages = tool_heavy()
    hooked = compactor(8_000)(messages)
    assert hooked == compactor(8_000).compact(messages, force=force).messages


@pytest.mark.parametrize(("target", "tiers"), [(1.0, ["clear"]), (0.75, ["clear", "summarize"])])
def test_clearing_that_leaves_the_history_near_the_limit_is_followed_by_a_summary(
    target: float, tiers: list[str]
) -> None:
    """Tier 1 leaves 5,091 of a 6,000-token limit: under it, but above 75% of it."""
    model = FakeModel(default=SUMMARY)
    clearing = ToolClearing(keep_recent=2, target=target)
    c = Compactor(trigger_tokens=6_000, clear_tool_outputs=clearing, model=model)
    result = c.compact(tool_heavy(), force=False)
    assert [tier.name for tier in result.tiers] == tiers
    assert result.tiers[0].tokens_after < 6_000 and len(model.requests) == len(tiers) - 1


def test_the_default_clears_tool_output_first() -> None:
    """Chosen from bench_cost.py and bench_retention.py (docs/benchmarks.md)."""
    from synopsis.compaction.options import CompactionOptions

    assert CompactionOptions().clear_tool_outputs == ToolClearing(
        keep_recent=3, min_tokens=100, clear_arguments=False, target=0.75
    )


class RecordingSummarizer:
    """Keeps what it was asked to read, and answers with the extractive summary of it."""

    def __init__(self) -> None:
        self.read: list[Mapping[str, Any]] = []

    def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:
        self.read.extend(messages)
        return SummaryResult(text=SUMMARY, model="recording", attempts=1)


def test_the_summarizer_reads_the_original_tool_output_that_tier_one_cleared() -> None:
    messages = tool_heavy()
    messages[3] = {**messages[3], "content": messages[3]["content"] + "The secret port is 8443.\n"}
    summarizer = RecordingSummarizer()
    result = compactor(2_000, summarizer=summarizer).compact(messages)

    assert [tier.name for tier in result.tiers] == ["clear", "summarize"]
    read = [m for m in summarizer.read if m.get("role") == "tool"]
    assert read and not any(is_cleared(m) for m in read)
    assert any("The secret port is 8443." in str(m["content"]) for m in read)
    # ... while the context itself got the stub, not the original.
    kept = [m for m in result.messages if m.get("role") == "tool"]
    assert all("8443" not in str(m["content"]) for m in kept)


def test_a_fact_in_cleared_tool_output_reaches_the_extractive_summary() -> None:
    messages = tool_heavy()
    messages[3] = {**messages[3], "content": "Deployed by Marguerite Okafor on 2024-03-17.\n"}
    result = Compactor(
        trigger_tokens=2_000, clear_tool_outputs=ToolClearing(keep_recent=2, min_tokens=0)
    ).compact(messages)

    assert [tier.name for tier in result.tiers] == ["clear", "summarize"]
    assert result.summary is not None and "Marguerite Okafor" in result.summary
