"""Stubs that keep facts: tier 1's digest of a cleared tool output, and what a later summary
reads for a stub (the facts it kept, never the stub itself)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from synopsis.compaction.clear import (
    apply_clearing,
    cleared_stub,
    is_cleared,
    kept_facts,
    plan_clearing,
)
from synopsis.compaction.compactor import Compactor
from synopsis.compaction.options import CompactionOptions, ToolClearing
from synopsis.compaction.plan import KeepTail
from synopsis.messages import is_internal, strip_extensions
from synopsis.models.extractive import extractive_summary, fact_digest
from synopsis.summarizer import SummaryResult
from synopsis.tokens import TokenCounter, default_estimate

ESTIMATE = TokenCounter().estimate
SUMMARY = "<summary>1. Primary Request and Intent: keep the facts</summary>"
PLANTED = "Caroline: I signed up for a pottery class with Marguerite Okafor on 14 June 2024."
FILLER = "Melanie: That sounds really lovely, I hope you have a great time with it."


def log(session: int, planted: str | None = None, lines: int = 40) -> str:
    """A session log as a ``read_log`` tool returns it: its date, then one utterance a line."""
    body = [f"{FILLER} ({session}.{i})" for i in range(lines)]
    if planted:
        body.insert(lines // 2, planted)
    return "\n".join([f"1:56 pm on {session} May, 2023", *body])


def sessions(count: int, planted_in: int = 0) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You remember things."}]
    for n in range(count):
        call = {
            "id": f"log{n}",
            "type": "function",
            "function": {"name": "read_log", "arguments": json.dumps({"session": n})},
        }
        messages += [
            {"role": "user", "content": f"Read session {n}."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {
                "role": "tool",
                "tool_call_id": f"log{n}",
                "content": log(n + 1, PLANTED if n == planted_in else None),
            },
            {"role": "assistant", "content": f"I have read session {n}."},
        ]
    return messages


def options(digest: int, **keywords: Any) -> CompactionOptions:
    clearing = ToolClearing(keep_recent=1, digest_tokens=digest)
    return CompactionOptions(clear_tool_outputs=clearing, **keywords)


def clear(messages: Sequence[Mapping[str, Any]], digest: int) -> list[dict[str, Any]]:
    plan = plan_clearing(messages, options(digest), ESTIMATE)
    return apply_clearing(messages, plan, ESTIMATE, archive="a.jsonl", digest_tokens=digest)


class RecordingSummarizer:
    """Keeps every request it was asked to summarize."""

    def __init__(self) -> None:
        self.requests: list[list[Mapping[str, Any]]] = []

    def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:
        self.requests.append(list(messages))
        return SummaryResult(text=SUMMARY, model="recording", attempts=1)


# -- the digest -------------------------------------------------------------------------------


def test_a_digest_stub_keeps_a_planted_name_number_and_date() -> None:
    new = clear(sessions(4), digest=80)
    stub = str(new[3]["content"])
    assert is_cleared(new[3]) and "a.jsonl" in stub
    assert PLANTED.split(": ", 1)[1] in stub  # the sentence whole, its speaker named
    assert "- Caroline: " in stub and "Facts kept from it (1 May, 2023):" in stub


def test_a_digest_stays_within_its_cap_and_a_zero_cap_gives_a_bare_stub() -> None:
    date, facts = fact_digest(log(1, PLANTED, lines=200), tokens=50)
    assert date == "1 May, 2023" and facts
    assert sum(default_estimate(line) + 1 for line in facts) <= 50
    bare = clear(sessions(4), digest=0)
    assert str(bare[3]["content"]) == cleared_stub("read_log", ESTIMATE(sessions(4)[3]), "a.jsonl")


def test_a_chinese_output_keeps_whole_sentences() -> None:
    text = "2024年3月1日\n我们决定在2024年3月15日发布新版本。\n好的，我会在周五之前完成测试报告。"
    date, facts = fact_digest(text, tokens=80, who="张伟")
    assert date == "2024年3月1日"
    assert "- 张伟: 我们决定在2024年3月15日发布新版本。" in facts


def test_code_output_keeps_no_digest() -> None:
    _, facts = fact_digest("def f():\n    return 1\n" * 50, tokens=80)
    assert facts == []
    grep = "src/parser.py:12:    parser_token = self.config.get('value', 3)\n" * 20
    assert fact_digest(grep, tokens=80) == ("", [])


def test_an_output_that_is_mostly_not_prose_keeps_a_bare_stub() -> None:
    """A test run with one error line is no prose: its stub stays bare (section 4 of a summary
    keeps the error), so a coding session's stubs cost what they did."""
    run = "\n".join([*(f"tests/test_{i}.py::test_x PASSED" for i in range(40))])
    run += "\nAssertionError: expected 3 got 42 in the window test"
    assert fact_digest(run, tokens=80) == ("", [])


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(0, 1), st.sampled_from([0, 30, 120]))
def test_digest_stubs_are_idempotent(count: int, planted: int, digest: int) -> None:
    """Clearing a cleared history again plans nothing: a digest stub is never cleared twice."""
    once = clear(sessions(count, planted), digest)
    plan = plan_clearing(once, options(digest), ESTIMATE)
    assert not plan.worthwhile
    assert apply_clearing(once, plan, ESTIMATE, archive="a.jsonl", digest_tokens=digest) == once


def test_a_digest_stub_is_internal_and_never_quoted_as_the_user() -> None:
    new = clear(sessions(4), digest=80)
    assert is_internal(new[3]) and strip_extensions(new[3]) == new[3]
    summary = extractive_summary([m for m in new if m["role"] != "system"])
    assert "a.jsonl" not in summary and "Facts kept from it" not in summary
    assert "synopsis:cleared" not in summary


# -- what a later summary reads ---------------------------------------------------------------


def test_kept_facts_reads_the_digest_without_the_stub() -> None:
    stub = {"role": "tool", "tool_call_id": "x", "content": cleared_stub("t", 9, "a", facts=[])}
    assert kept_facts(stub) is None
    facts = ["- Anna: Invoice 48213 is due on 14 June 2024."]
    digest = {**stub, "content": cleared_stub("t", 9, "a", facts=facts, date="1 May, 2023")}
    read = kept_facts(digest)
    assert read == {
        "role": "tool",
        "tool_call_id": "x",
        "content": "Facts kept from it (1 May, 2023):\nAnna: Invoice 48213 is due on 14 June 2024.",
    }
    assert not is_internal(read)


def test_the_summarizer_reads_the_facts_of_an_output_cleared_in_an_earlier_compaction() -> None:
    """Compaction 1 clears (tier 1 is enough); compaction 2 summarizes the part that holds the
    stub: the summarizer reads the planted fact, and never a stub."""
    summarizer = RecordingSummarizer()

    def compactor(trigger: int) -> Compactor:
        return Compactor(
            trigger_tokens=trigger,
            clear_tool_outputs=ToolClearing(keep_recent=1, digest_tokens=80),
            keep_tail=KeepTail(messages=4),
            summarizer=summarizer,
        )

    first = compactor(2_400).compact(sessions(3), force=False)
    assert [tier.name for tier in first.tiers] == ["clear"] and not summarizer.requests
    assert is_cleared(first.messages[3])
    grown = [*first.messages, *sessions(5)[len(sessions(3)) :]]
    grown.append({"role": "user", "content": "What did Caroline sign up for?"})
    second = compactor(100_000).compact(grown)  # asked for, no pressure: every tier runs
    assert [tier.name for tier in second.tiers][-1] == "summarize"
    read = [m for request in summarizer.requests for m in request]
    assert not any(is_cleared(m) for m in read)
    assert any(PLANTED.split(": ", 1)[1] in str(m.get("content")) for m in read)
