"""The framework-neutral search_history tool: its schema, its bounded answers, and how it
answers a chat-completions tool call, well-formed or not."""

from __future__ import annotations

import json
from typing import Any

import pytest

from synopsis import HistoryTool, MemoryArchive
from synopsis.compaction.history import DESCRIPTION, SEARCH_HISTORY
from synopsis.errors import ConfigError, InvalidInput


def _tool(**options: Any) -> HistoryTool:
    archive = MemoryArchive()
    archive.write(
        [{"role": "user", "content": f"apple report {i}: " + "pulp " * 400} for i in range(20)]
        + [{"role": "assistant", "content": "The invoice number is INV-2024-0042."}],
        session_id="s1",
    )
    return HistoryTool(archive=archive, session_id="s1", **options)


def test_the_schema_is_a_chat_completions_tool() -> None:
    spec = _tool().openai_tool()
    assert spec["function"]["name"] == SEARCH_HISTORY
    assert spec["function"]["description"] == DESCRIPTION
    assert spec["function"]["parameters"]["required"] == ["query"]


def test_an_answer_quotes_the_hit_with_role_and_position() -> None:
    answer = _tool().run("invoice number")
    assert "[1] assistant (message #20): The invoice number is INV-2024-0042." in answer


def test_answers_are_bounded_however_large_the_hits() -> None:
    tool = _tool(max_chars=2_000)
    answer = tool.run("apple pulp", limit=20)
    assert len(answer) <= 2_000
    assert "more left out" in answer
    one = _tool(max_chars=300).run("apple pulp", limit=3)
    assert len(one) <= 300
    assert "[1] user" in one


def test_each_message_is_clipped() -> None:
    answer = _tool(neighbours=0).run("apple", limit=1)
    assert len(answer) < 1_100
    assert answer.endswith("…")
    # Each neighbour shown with a hit is clipped to half as much.
    around = _tool(neighbours=1).run("apple", limit=1)
    assert len(around) < 1_100 + 2 * 530


def test_no_hit_says_so_and_how_to_go_on() -> None:
    assert "No archived message matches 'zebra'" in _tool().run("zebra")


def test_a_tool_call_is_answered_with_a_tool_message() -> None:
    call = {"id": "c9", "function": {"name": SEARCH_HISTORY, "arguments": '{"query": "INV"}'}}
    reply = _tool().answer(call)
    assert reply["role"] == "tool"
    assert reply["tool_call_id"] == "c9"
    assert "INV-2024-0042" in reply["content"]


@pytest.mark.parametrize(
    "arguments",
    ["not json", "[1]", '{"query": ""}', '{"limit": 3}', '{"query": "x", "limit": 0}',
     '{"query": "x", "mode": "vector"}', json.dumps({"query": 5})],
)  # fmt: skip
def test_a_bad_tool_call_is_answered_with_an_error_the_model_can_fix(arguments: str) -> None:
    reply = _tool().answer({"id": "c1", "function": {"arguments": arguments}})
    assert reply["content"].startswith("Error: ")


def test_bad_arguments_to_run_raise_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        _tool().run("  ")


def test_bad_options_are_refused() -> None:
    with pytest.raises(ConfigError, match="cannot be searched"):
        HistoryTool(archive=object(), session_id=None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_chars"):
        _tool(max_chars=0)
    with pytest.raises(ConfigError, match="default_limit"):
        _tool(default_limit=1000)
