"""to_responses_items / from_responses_items: Agents SDK items, grouping, lossless round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.memory import SQLiteSession
from agents.models.chatcmpl_converter import Converter
from agents.testing import ScriptedModel, assistant_message, function_call
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synopsis.convert import CARRY_KEY, from_responses_items, to_responses_items
from synopsis.errors import InvalidMessage
from synopsis.messages import open_tool_calls
from synopsis.validation import validate_messages
from tests.convert_histories import SUMMARY_MARKER, TEXT, chat_histories

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NO_TRACING = RunConfig(tracing_disabled=True)


@function_tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def sdk_run_items() -> list[dict[str, Any]]:
    """Items of a real Agents SDK run: text next to two calls, their outputs, a final answer."""
    model = ScriptedModel(
        [
            [
                assistant_message("先算一下"),
                function_call("add", {"a": 1, "b": 2}, call_id="c1"),
                function_call("add", {"a": 3, "b": 4}, call_id="c2"),
            ],
            [assistant_message("3 和 7")],
        ]
    )
    agent = Agent(name="calc", instructions="be brief", model=model, tools=[add])
    # Runner.run, not run_sync: run_sync leaves a default event loop open behind the tests.
    result = await Runner.run(agent, "add 你好", run_config=NO_TRACING)
    items: list[dict[str, Any]] = result.to_input_list()
    return items


async def test_sdk_items_become_chat_messages() -> None:
    """The text and both calls form one assistant message; each output a tool message."""
    assert from_responses_items(await sdk_run_items()) == [
        {"role": "user", "content": "add 你好"},
        {
            "role": "assistant",
            "content": "先算一下",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a":1,"b":2}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a":3,"b":4}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
        {"role": "tool", "tool_call_id": "c2", "content": "7"},
        {"role": "assistant", "content": "3 和 7"},
    ]


async def test_sdk_items_round_trip_exactly() -> None:
    """With extras, ids, statuses, annotations and logprobs come back: the same items."""
    items = await sdk_run_items()
    ours = from_responses_items(items, keep_extras=True)
    assert to_responses_items(ours) == items


async def test_session_items_round_trip_exactly() -> None:
    """What an SQLiteSession stores converts and comes back unchanged."""
    model = ScriptedModel(
        [[function_call("add", '{"a": 1, "b": 1}', call_id="x")], [assistant_message("2")]]
    )
    agent = Agent(name="calc", model=model, tools=[add])
    session = SQLiteSession("convert-test")
    await Runner.run(agent, "1+1?", session=session, run_config=NO_TRACING)
    items = await session.get_items()
    assert [m["role"] for m in from_responses_items(items)] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert to_responses_items(from_responses_items(items, keep_extras=True)) == items
    session.close()


async def test_converted_history_is_input_the_sdk_accepts() -> None:
    """Our messages, as items, run through the SDK and reach the model unchanged."""
    history = from_responses_items(await sdk_run_items())
    model = ScriptedModel([[assistant_message("好")]])
    agent = Agent(name="calc", model=model, tools=[add])
    items = to_responses_items(history)
    await Runner.run(agent, items, run_config=NO_TRACING)
    call = model.first_call
    assert call is not None
    assert from_responses_items(list(call.input)) == history


async def test_agrees_with_the_sdks_chat_converter() -> None:
    """The SDK's own items_to_messages yields the same roles, texts and tool-call pairing."""
    items = await sdk_run_items()
    theirs = Converter.items_to_messages(items)
    ours = from_responses_items(items)
    assert [m["role"] for m in theirs] == [m["role"] for m in ours]
    assert [c["id"] for c in theirs[1]["tool_calls"]] == [c["id"] for c in ours[1]["tool_calls"]]
    assert [m.get("tool_call_id") for m in theirs] == [m.get("tool_call_id") for m in ours]


def test_reasoning_and_other_items() -> None:
    """A reasoning summary becomes reasoning_content; a web search call rides with extras only."""
    items: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "input_text", "text": "找"}]},
        {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "先搜"}],
            "encrypted_content": "gAAA",
        },
        {
            "id": "ws_1",
            "type": "web_search_call",
            "status": "completed",
            "action": {"type": "search"},
        },
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "找到了", "annotations": []}],
        },
    ]
    assert from_responses_items(items) == [
        {"role": "user", "content": [{"type": "text", "text": "找"}]},
        {"role": "assistant", "content": "找到了", "reasoning_content": "先搜"},
    ]
    assert to_responses_items(from_responses_items(items, keep_extras=True)) == items


def test_parts_map_both_ways() -> None:
    """input_text/input_image/input_file <-> text/image_url/file parts; output_text for replies."""
    items: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "看"},
                {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "low"},
                {"type": "input_file", "file_id": "file-1", "filename": "a.pdf"},
            ],
        }
    ]
    (ours,) = from_responses_items(items)
    assert ours["content"] == [
        {"type": "text", "text": "看"},
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "low"}},
        {"type": "file", "file": {"file_id": "file-1", "filename": "a.pdf"}},
    ]
    (item,) = to_responses_items([ours])
    assert item == {"role": "user", "content": items[0]["content"]}
    reply = to_responses_items([{"role": "assistant", "content": [{"type": "text", "text": "好"}]}])
    assert reply == [
        {"role": "assistant", "content": [{"type": "output_text", "text": "好", "annotations": []}]}
    ]


def test_tool_calls_split_into_function_call_items() -> None:
    """One assistant message with two calls becomes function_call items after its text."""
    history: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": "两个",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "oops{"}},
            ],
        },
        {"role": "tool", "tool_call_id": "b", "content": "B", "name": "g"},
        {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "A"}]},
    ]
    assert to_responses_items(history) == [
        {"role": "assistant", "content": "两个"},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "g", "arguments": "oops{"},
        {"type": "function_call_output", "call_id": "b", "output": "B", "name": "g"},
        {
            "type": "function_call_output",
            "call_id": "a",
            "output": [{"type": "input_text", "text": "A"}],
        },
    ]
    assert from_responses_items(to_responses_items(history)) == history


def test_extras_ride_on_the_first_item_only_when_asked() -> None:
    """Default items hold only API fields; keep_extras puts usage and meta under CARRY_KEY."""
    history: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": SUMMARY_MARKER + "要点…\r\n",
            "meta": {"content_type": "summary"},
        },
        {
            "role": "assistant",
            "content": "ok",
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        },
    ]
    plain = to_responses_items(history)
    assert CARRY_KEY not in json.dumps(plain)
    assert plain[0]["content"].encode() == history[0]["content"].encode()
    carried = to_responses_items(history, keep_extras=True)
    assert carried[0][CARRY_KEY] == {"meta": {"content_type": "summary"}}
    assert from_responses_items(carried) == history


async def test_edits_win_over_carried_items() -> None:
    """A cleared tool output is sent as cleared, not as the carried original."""
    items = await sdk_run_items()
    ours = from_responses_items(items, keep_extras=True)
    ours[1]["content"] = "edited"
    back = to_responses_items(ours)
    # The edited reply loses its item id (the API would send its stored copy instead).
    assert back[1] == {"role": "assistant", "content": "edited"}
    assert back[2:] == items[2:]  # untouched calls keep their item ids


def test_an_edited_item_loses_its_id() -> None:
    """A tool output returned by the API with an id is sent without it once its text changed."""
    items: list[dict[str, Any]] = [
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "id": "fc_1"},
        {"type": "function_call_output", "call_id": "c", "output": "long", "id": "fco_1"},
    ]
    ours = from_responses_items(items, keep_extras=True)
    assert to_responses_items(ours) == items
    ours[1]["content"] = "[cleared]"
    assert to_responses_items(ours) == [
        items[0],
        {"type": "function_call_output", "call_id": "c", "output": "[cleared]"},
    ]


def test_non_items_are_rejected() -> None:
    """A non-dict item or an unknown role raises InvalidMessage with its index."""
    with pytest.raises(InvalidMessage, match="message 1: expected a Responses item"):
        from_responses_items([{"role": "user", "content": "x"}, "hello"])  # type: ignore[list-item]
    with pytest.raises(InvalidMessage, match="message 0: cannot convert role 'critic'"):
        to_responses_items([{"role": "critic", "content": "x"}])


# ---------------------------------------------------------------------------------------------
# Properties


def as_items_carry(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What plain items can say of a history: '' next to calls is no text; a reply's calls
    following a text-only reply join it (items have no seam between two assistant turns)."""
    result: list[dict[str, Any]] = []
    for message in history:
        if message.get("tool_calls") and message["content"] == "":
            message = {**message, "content": None}
        previous = result[-1] if result else None
        if (
            previous is not None
            and message["role"] == previous["role"] == "assistant"
            and "tool_calls" not in previous
            and message.get("tool_calls")
            and message["content"] is None
        ):
            result[-1] = {**previous, "tool_calls": message["tool_calls"]}
        else:
            result.append(message)
    return result


@PROPERTY
@given(chat_histories())
def test_ours_to_items_and_back_is_identity_with_extras(history: list[dict[str, Any]]) -> None:
    """With keep_extras every field of our messages survives the items round trip."""
    assert from_responses_items(to_responses_items(history, keep_extras=True)) == history


@PROPERTY
@given(chat_histories(extensions=False, reasoning=False))
def test_ours_to_plain_items_keeps_what_items_can_say(history: list[dict[str, Any]]) -> None:
    """Without extras the round trip keeps all that items carry, and pairing stays intact."""
    back = from_responses_items(to_responses_items(history))
    assert back == as_items_carry(history)
    validate_messages(back)
    assert open_tool_calls(back) == set()


_OUTPUT_TEXT = TEXT.map(
    lambda t: {"type": "output_text", "text": t, "annotations": [], "logprobs": []}
)


@st.composite
def sdk_items(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Item lists shaped like the SDK's: easy inputs, output messages, paired calls, reasoning."""
    items: list[dict[str, Any]] = []
    for turn in range(draw(st.integers(0, 4))):
        items.append(
            {"content": draw(TEXT), "role": draw(st.sampled_from(["user", "system", "developer"]))}
        )
        if draw(st.booleans()):
            items.append(
                {"id": f"rs_{turn}", "type": "reasoning", "summary": [], "encrypted_content": "e"}
            )
        if draw(st.booleans()):
            items.append(
                {
                    "id": f"msg_{turn}",
                    "content": draw(st.lists(_OUTPUT_TEXT, min_size=1, max_size=2)),
                    "role": "assistant",
                    "status": "completed",
                    "type": "message",
                }
            )
        calls = [f"call_{turn}_{i}" for i in range(draw(st.integers(0, 2)))]
        items.extend(
            {"arguments": "{}", "call_id": c, "name": "add", "type": "function_call", "id": c}
            for c in calls
        )
        items.extend(
            {"call_id": c, "output": draw(TEXT), "type": "function_call_output"}
            for c in draw(st.permutations(calls))
        )
    return items


@PROPERTY
@given(sdk_items())
def test_sdk_shaped_items_round_trip_exactly(items: list[dict[str, Any]]) -> None:
    """Items shaped like the SDK's come back unchanged through our messages with extras."""
    ours = from_responses_items(items, keep_extras=True)
    assert to_responses_items(ours) == items
    plain = from_responses_items(items)
    validate_messages(plain)
    assert open_tool_calls(plain) == set()
