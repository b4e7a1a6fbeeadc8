"""Tier 1, clearing old tool output: a pure plan and apply, pinned by properties and examples.

Whatever the history and the options: no tool result or call is orphaned, system messages,
user messages, internal messages (summaries, skills), the skill tool's results and the kept
tail are never touched, and clearing twice is clearing once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synopsis.compaction.archive import MemoryArchive
from synopsis.compaction.clear import (
    CLEARED_ARGUMENTS,
    CLEARED_KIND,
    ClearingPlan,
    apply_clearing,
    cleared_stub,
    is_cleared,
    offload_large_tool_result,
    plan_clearing,
)
from synopsis.compaction.options import CompactionOptions, ToolClearing
from synopsis.compaction.plan import KeepTail, plan_compaction
from synopsis.errors import ConfigError
from synopsis.messages import (
    is_internal,
    is_system,
    mark,
    marked_body,
    marker_of,
    strip_extensions,
)
from synopsis.models.extractive import extractive_summary
from synopsis.tokens import TokenCounter
from synopsis.validation import validate_messages

ESTIMATE = TokenCounter().estimate
TOOLS = ("read_file", "run_tests", "grep", "skill")
_WORDS = st.text(alphabet="abcdef xyz\n", max_size=300)


@st.composite
def tool_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """System messages, maybe a summary and a skills message, then turns with tool calls of
    several tools (the skill tool among them), some with usage."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "system"} for _ in range(draw(st.integers(0, 2)))
    ]
    if draw(st.booleans()):
        messages.append({"role": "user", "content": mark("summary", "earlier work")})
    if draw(st.booleans()):
        messages.append({"role": "user", "content": mark("skills", "a loaded skill")})
    number = 0
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "tools"]))
        if kind == "user":
            messages.append({"role": "user", "content": draw(_WORDS) or "hi"})
        elif kind == "assistant":
            reply: dict[str, Any] = {"role": "assistant", "content": draw(_WORDS)}
            if draw(st.booleans()):
                reply["usage"] = {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}
            messages.append(reply)
        else:
            ids = [f"call_{number + i}" for i in range(draw(st.integers(1, 3)))]
            number += len(ids)
            calls = [_call(i, draw(st.sampled_from(TOOLS))) for i in ids]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            messages += [
                {"role": "tool", "tool_call_id": i, "content": draw(_WORDS)}
                for i in draw(st.permutations(ids))
            ]
    return messages


def _call(call_id: str, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
    args = json.dumps(arguments or {"path": f"{call_id}.py", "skill": "deploy"})
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


clearings = st.builds(
    ToolClearing,
    keep_recent=st.integers(0, 4),
    min_tokens=st.sampled_from([0, 1, 20, 60]),
    exclude_tools=st.frozensets(st.sampled_from(TOOLS), max_size=2),
    clear_arguments=st.booleans(),
)
tails = st.builds(KeepTail, messages=st.integers(0, 6), tokens=st.sampled_from([0, 50, 200]))


def options_for(clearing: ToolClearing, keep_tail: KeepTail | None = None) -> CompactionOptions:
    return CompactionOptions(clear_tool_outputs=clearing, keep_tail=keep_tail or KeepTail())


def clear(
    messages: Sequence[Mapping[str, Any]], options: CompactionOptions, archive: str | None = "a"
) -> tuple[ClearingPlan, list[dict[str, Any]]]:
    plan = plan_clearing(messages, options, ESTIMATE)
    return plan, apply_clearing(messages, plan, ESTIMATE, archive=archive)


def names_by_call(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    return {
        call["id"]: call["function"]["name"] for m in messages for call in m.get("tool_calls") or ()
    }


# -- properties -------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(tool_histories(), clearings, tails)
def test_clearing_orphans_nothing_and_keeps_every_pair_in_place(
    messages: list[dict[str, Any]], clearing: ToolClearing, keep_tail: KeepTail
) -> None:
    """Same length, same roles, same call ids in the same places; the result validates."""
    _, new = clear(messages, options_for(clearing, keep_tail))
    validate_messages(new)
    assert len(new) == len(messages)
    for old, out in zip(messages, new, strict=True):
        assert out["role"] == old["role"] and out.get("tool_call_id") == old.get("tool_call_id")
        assert [c["id"] for c in out.get("tool_calls") or ()] == [
            c["id"] for c in old.get("tool_calls") or ()
        ]


@settings(max_examples=300, deadline=None)
@given(tool_histories(), clearings, tails)
def test_clearing_never_touches_what_it_must_keep(
    messages: list[dict[str, Any]], clearing: ToolClearing, keep_tail: KeepTail
) -> None:
    """System, user and internal messages, the kept tail, the newest results, excluded tools
    and the skill tool stay as they were (a stale ``usage`` aside)."""
    options = options_for(clearing, keep_tail)
    plan, new = clear(messages, options)
    tail = plan_compaction(messages, keep_tail=keep_tail, estimate=ESTIMATE).tail
    results = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    recent = set(results[len(results) - clearing.keep_recent :]) if clearing.keep_recent else set()
    names = names_by_call(messages)
    for index, (old, out) in enumerate(zip(messages, new, strict=True)):
        protected = (
            is_system(old)
            or old["role"] == "user"
            or is_internal(old)
            or index >= len(messages) - len(tail)
            or index in recent
            or names.get(old.get("tool_call_id", "")) in {*clearing.exclude_tools, "skill"}
        )
        if protected:
            assert strip_extensions(out) == strip_extensions(old), index
    for index in plan.results:
        assert messages[index]["role"] == "tool"
        assert ESTIMATE(messages[index]) >= clearing.min_tokens
        assert is_cleared(new[index])


@settings(max_examples=300, deadline=None)
@given(tool_histories(), clearings, tails)
def test_clearing_is_idempotent(
    messages: list[dict[str, Any]], clearing: ToolClearing, keep_tail: KeepTail
) -> None:
    """A second pass over a cleared history plans nothing and changes nothing."""
    options = options_for(clearing, keep_tail)
    _, once = clear(messages, options)
    plan, twice = clear(once, options)
    assert not plan.worthwhile
    assert twice == once


@settings(max_examples=200, deadline=None)
@given(tool_histories(), clearings)
def test_only_the_arguments_of_cleared_calls_are_cleared(
    messages: list[dict[str, Any]], clearing: ToolClearing
) -> None:
    plan, new = clear(messages, options_for(clearing))
    gone = {messages[i]["tool_call_id"] for i in plan.results}
    for old, out in zip(messages, new, strict=True):
        for before, after in zip(
            old.get("tool_calls") or (), out.get("tool_calls") or (), strict=True
        ):
            changed = before["function"]["arguments"] != after["function"]["arguments"]
            assert changed == (clearing.clear_arguments and before["id"] in gone)
            if changed:
                assert json.loads(after["function"]["arguments"]) == json.loads(CLEARED_ARGUMENTS)


# -- examples ---------------------------------------------------------------------------------


def coding_session(results: int = 6, size: int = 400) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    for i in range(results):
        messages.append(
            {"role": "assistant", "content": None, "tool_calls": [_call(f"c{i}", "read_file")]}
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i}\n" * size})
    messages.append(
        {
            "role": "assistant",
            "content": "Found it.",
            "usage": {"prompt_tokens": 9000, "completion_tokens": 5, "total_tokens": 9005},
        }
    )
    return messages


def test_the_stub_names_the_tool_the_size_and_the_archive() -> None:
    messages = coding_session()
    plan, new = clear(messages, options_for(ToolClearing(keep_recent=1)), archive="/a/s1.jsonl")
    assert plan.results == (3, 5, 7, 9, 11)
    stub = new[3]
    marker = marker_of(stub)
    assert marker is not None and marker.kind == CLEARED_KIND
    assert marker.integer("tokens") == ESTIMATE(messages[3])
    assert stub["content"].count("read_file output cleared") == 1
    assert "/a/s1.jsonl" in stub["content"] and set(stub) == {"role", "tool_call_id", "content"}
    assert new[13] == messages[13]  # the newest result is kept


def test_a_stub_without_an_archive_says_so() -> None:
    assert "not archived" in cleared_stub("grep", 10, None)


def test_marker_text_in_a_tool_name_is_escaped() -> None:
    text = cleared_stub("</synopsis:cleared><synopsis:summary>", 5, None)
    stub = {"role": "tool", "content": text}
    assert is_cleared(stub) and marked_body(stub).startswith("[</synopsis:cleared><synopsis:")


def test_small_results_are_not_worth_a_stub() -> None:
    messages = coding_session(size=2)
    assert not plan_clearing(
        messages, options_for(ToolClearing(keep_recent=0)), ESTIMATE
    ).worthwhile


def test_the_skill_tool_is_never_cleared() -> None:
    messages = coding_session(results=3)
    messages[2]["tool_calls"] = [_call("c0", "skill")]
    plan = plan_clearing(messages, options_for(ToolClearing(keep_recent=0)), ESTIMATE)
    assert 3 not in plan.results and plan.results == (5, 7)


def test_usage_is_dropped_only_after_the_first_change() -> None:
    messages = coding_session()
    messages[1] = {**messages[1], "role": "assistant", "usage": {"total_tokens": 7}}
    _, new = clear(messages, options_for(ToolClearing(keep_recent=1)))
    assert "usage" in new[1] and "usage" not in new[-1]
    assert TokenCounter().count(new).baseline == 7  # the baseline before any change stands


def test_a_stub_stays_in_what_the_summarizer_reads() -> None:
    """A cleared result answers its call: dropping it would leave the call without a result."""
    _, new = clear(coding_session(), options_for(ToolClearing(keep_recent=0)))
    plan = plan_compaction(new, estimate=ESTIMATE)
    assert [m for m in plan.to_summarize if m["role"] == "tool"] == new[3:14:2]


def test_the_extractive_summary_does_not_quote_stubs() -> None:
    _, new = clear(coding_session(), options_for(ToolClearing(keep_recent=0)), archive="/x/a.jsonl")
    summary = extractive_summary([m for m in new if m["role"] != "system"])
    assert "synopsis" not in summary and "a.jsonl" not in summary and "archived" not in summary


def test_clearing_off_plans_nothing() -> None:
    options = CompactionOptions(clear_tool_outputs=None)
    assert plan_clearing(coding_session(), options, ESTIMATE) == ClearingPlan()


@pytest.mark.parametrize(
    "fields",
    [
        {"keep_recent": -1},
        {"min_tokens": True},
        {"exclude_tools": "grep"},
        {"clear_arguments": 1},
        {"target": 0},
        {"target": 1.5},
    ],
)
def test_bad_clearing_options_are_config_errors(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="ToolClearing"):
        ToolClearing(**fields)


def test_exclude_tools_accepts_any_collection_and_stays_hashable() -> None:
    clearing = ToolClearing(exclude_tools=["grep", "grep"])  # type: ignore[arg-type]
    assert clearing.exclude_tools == frozenset({"grep"}) and hash(clearing)


def test_the_compactor_keywords_accept_true_and_false() -> None:
    assert (
        CompactionOptions.from_keywords(clear_tool_outputs=True).clear_tool_outputs
        == ToolClearing()
    )
    assert CompactionOptions.from_keywords(clear_tool_outputs=False).clear_tool_outputs is None
    with pytest.raises(ConfigError, match="clear_tool_outputs"):
        CompactionOptions(clear_tool_outputs=3)  # type: ignore[arg-type]


# -- offloading at arrival --------------------------------------------------------------------


def test_a_large_result_is_archived_and_stubbed_as_it_arrives() -> None:
    archive = MemoryArchive()
    result = {"role": "tool", "tool_call_id": "c1", "content": "log line\n" * 500}
    stub = offload_large_tool_result(result, archive, 200, tool="run_tests", session_id="s1")
    assert archive.batches == [("s1", [result])]
    assert is_cleared(stub) and stub["tool_call_id"] == "c1"
    assert "run_tests output cleared" in stub["content"]
    assert "memory://archive/s1/1" in stub["content"]


@pytest.mark.parametrize(
    "message",
    [
        {"role": "tool", "tool_call_id": "c1", "content": "short"},
        {"role": "user", "content": "word " * 1000},
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": cleared_stub("x", 9000, None) + " " * 2000,
        },
    ],
    ids=["small", "not a tool result", "already a stub"],
)
def test_other_messages_arrive_as_they_are(message: dict[str, Any]) -> None:
    archive = MemoryArchive()
    assert offload_large_tool_result(message, archive, 100) == message
    assert archive.batches == []
