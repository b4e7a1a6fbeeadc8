"""Orphan tool results (a result whose call is not in the history) never kill a turn.

Ported from the peers' suites (issue 20, item 13): inside the part being summarized an orphan
is read as a note, in the kept tail it is dropped with an ``orphan_tool_results_dropped``
event, and the strict :func:`synopsis.validate_messages` still reports it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.runtime import Runtime

import synopsis
from synopsis import AsyncCompactor, Compactor, InvalidMessage, validate_messages
from synopsis.adapters.langchain import CompactionMiddleware
from synopsis.testing import AsyncFakeModel, FakeModel
from synopsis.validation import orphan_results

SUMMARY = "The user greeted the agent ten times."


def history(*, orphan_in_tail: bool) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You help."},
        {"role": "tool", "tool_call_id": "gone-1", "name": "read_log", "content": "code 4417"},
    ]
    for turn in range(10):
        messages.append({"role": "user", "content": f"hello number {turn} " * 10})
        messages.append({"role": "assistant", "content": f"hi {turn}"})
    if orphan_in_tail:
        messages.append({"role": "tool", "tool_call_id": "gone-2", "content": "late result"})
    messages.append({"role": "user", "content": "what now?"})
    return messages


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def test_the_strict_validation_still_reports_an_orphan() -> None:
    with pytest.raises(InvalidMessage, match="'gone-1' has no matching assistant tool call"):
        validate_messages(history(orphan_in_tail=False))
    assert validate_messages(history(orphan_in_tail=True), orphans="allow")
    assert orphan_results(history(orphan_in_tail=True)) == (1, 22)


def test_an_orphan_in_the_summarized_part_is_read_as_a_note() -> None:
    model = FakeModel(default=SUMMARY)
    seen: list[Any] = []
    compactor = Compactor(model=model, trigger_messages=4, keep_tail=4, on_event=[seen.append])
    result = compactor.compact(history(orphan_in_tail=False))
    assert result.compacted and result.summary == SUMMARY
    request = model.requests[0].messages
    assert "tool" not in roles(request)
    notes = [m["content"] for m in request if "gone-1" in str(m.get("content"))]
    assert notes == [
        "[Tool result of read_log for call gone-1 (its call is not in the history)]\ncode 4417"
    ]
    assert "tool" not in roles(result.messages)
    assert not any(e.name == "orphan_tool_results_dropped" for e in seen)


def test_an_orphan_in_the_kept_tail_is_dropped_with_an_event() -> None:
    seen: list[Any] = []
    compactor = Compactor(
        model=FakeModel(default=SUMMARY), trigger_messages=4, keep_tail=4, on_event=[seen.append]
    )
    messages = history(orphan_in_tail=True)
    result = compactor.compact(messages)
    assert result.compacted
    assert roles(result.messages)[-3:] == ["user", "assistant", "user"]
    assert orphan_results(result.messages) == ()
    validate_messages(result.messages)
    dropped = [e for e in result.events if isinstance(e, synopsis.OrphanToolResultsDropped)]
    assert [e.to_dict() for e in dropped] == [
        {
            "event": "orphan_tool_results_dropped",
            "reason": "messages",
            "tool_call_ids": ["gone-2"],
            "indices": [22],
            "session_id": None,
        }
    ]
    assert dropped[0] in seen
    assert result.tokens_after == compactor.counter.count(result.messages).total
    assert messages[22]["tool_call_id"] == "gone-2"  # the caller's history keeps it


def test_the_async_compactor_heals_the_same_way() -> None:
    compactor = AsyncCompactor(
        model=AsyncFakeModel(default=SUMMARY), trigger_messages=4, keep_tail=4
    )
    result = asyncio.run(compactor.compact(history(orphan_in_tail=True)))
    assert result.compacted and orphan_results(result.messages) == ()
    assert any(e.name == "orphan_tool_results_dropped" for e in result.events)


def test_langchains_before_model_hook_survives_an_orphan_tool_message() -> None:
    """LangChain's own messages, through the middleware's hook: no InvalidMessage."""
    messages = [
        SystemMessage("You help.", id="s"),
        ToolMessage("code 4417", tool_call_id="gone-1", id="t0"),
        *[
            message
            for turn in range(6)
            for message in (
                HumanMessage(f"hello number {turn} " * 10, id=f"h{turn}"),
                AIMessage(f"hi {turn}", id=f"a{turn}"),
            )
        ],
        ToolMessage("late result", tool_call_id="gone-2", id="t1"),
        HumanMessage("what now?", id="last"),
    ]
    compactor = Compactor(model=FakeModel(default=SUMMARY), trigger_messages=4, keep_tail=3)
    update = CompactionMiddleware(compactor).before_model(
        {"messages": messages}, Runtime(context=None)
    )
    assert update is not None
    sent = update["messages"][1:]
    assert not any(isinstance(m, ToolMessage) for m in sent)
    assert sent[-1] is messages[-1]


def test_pydantic_ais_history_processor_survives_an_orphan_tool_return() -> None:
    """Pydantic AI's own messages, through the adapter's processor: no InvalidMessage."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolReturnPart,
        UserPromptPart,
    )

    from synopsis.adapters.pydantic_ai import history_processor

    messages: list[Any] = [ModelRequest(parts=[ToolReturnPart("read_log", "code 4417", "gone")])]
    for turn in range(6):
        messages.append(ModelRequest(parts=[UserPromptPart(f"hello number {turn} " * 10)]))
        messages.append(ModelResponse(parts=[TextPart(f"hi {turn}")]))
    messages.append(ModelRequest(parts=[UserPromptPart("what now?")]))
    compactor = Compactor(model=FakeModel(default=SUMMARY), trigger_messages=4, keep_tail=3)
    processed = history_processor(compactor)(messages)
    parts = [part for message in processed for part in message.parts]
    assert not any(isinstance(part, ToolReturnPart) for part in parts)
    assert SUMMARY in str(processed[0]) and "what now?" in str(processed[-1])
