"""to_pydantic_ai / from_pydantic_ai: shapes, real Agent runs, lossless round trips both ways."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic_ai import Agent, ModelRetry
from pydantic_ai._warnings import PydanticAIDeprecationWarning
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    RetryFeedbackPart,
    RetryInfo,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel as FakeAgentModel  # not collected as a test
from pydantic_ai.usage import RequestUsage

from synopsis.convert import CARRY_KEY, from_pydantic_ai, to_pydantic_ai
from synopsis.errors import InvalidMessage
from synopsis.messages import open_tool_calls
from synopsis.validation import validate_messages
from tests.convert_histories import SUMMARY_MARKER, chat_histories

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MESSAGE_KEYS = {"role", "content", "tool_calls", "tool_call_id", "name", "usage", "meta"}
MESSAGE_KEYS |= {"reasoning_content"}


def dumped(messages: list[ModelMessage]) -> Any:
    """Messages as Pydantic AI serializes them (its own notion of equal histories)."""
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


async def run_with_test_model() -> list[ModelMessage]:
    """A real run with TestModel: system prompt, instructions, a tool call and its return."""
    agent = Agent(FakeAgentModel(), instructions="Be brief.", system_prompt="你是助手")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    # agent.run, not run_sync: run_sync leaves a default event loop open behind the tests.
    return (await agent.run("1 加 2")).all_messages()


async def run_with_function_model() -> list[ModelMessage]:
    """A run with thinking, text next to two calls, a dict tool return, a retry, two texts."""
    replies = iter(
        [
            ModelResponse(
                parts=[
                    ThinkingPart("想一想", signature="sig", provider_name="function"),
                    TextPart("先查"),
                    ToolCallPart("lookup", '{"q": "猫"}', "call_1"),
                    ToolCallPart("lookup", {"q": "dog"}, "call_2"),
                ],
                usage=RequestUsage(input_tokens=20, output_tokens=5, cache_read_tokens=7),
            ),
            ModelResponse(parts=[ToolCallPart("flaky", {}, "call_3")]),
            ModelResponse(parts=[TextPart("答案"), TextPart("second")]),
        ]
    )

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return next(replies)

    agent = Agent(FunctionModel(reply), instructions="Answer in Chinese.")
    attempts = []

    @agent.tool_plain
    def lookup(q: str) -> dict[str, Any]:
        """Look something up."""
        return {"q": q, "hits": [1, 2]}

    @agent.tool_plain
    def flaky() -> str:
        """Fail once."""
        attempts.append(1)
        if len(attempts) == 1:
            raise ModelRetry("try again please")
        return "ok"

    return (await agent.run(["question", ImageUrl("https://x.test/a.png")])).all_messages()


# ---------------------------------------------------------------------------------------------
# Shapes


async def test_agent_run_converts_to_chat_messages() -> None:
    """System prompt, user prompt, the tool call with its id, its return, the final text."""
    ours = from_pydantic_ai(await run_with_test_model())
    assert [m["role"] for m in ours] == ["system", "user", "assistant", "tool", "assistant"]
    assert ours[0] == {"role": "system", "content": "你是助手"}
    call = ours[2]["tool_calls"][0]
    assert call["function"] == {"name": "add", "arguments": '{"a": 0, "b": 0}'}
    assert ours[3] == {"role": "tool", "tool_call_id": call["id"], "content": "0"}
    assert ours[2]["usage"]["total_tokens"] == ours[2]["usage"]["prompt_tokens"] + 6


async def test_function_model_parts_map_to_fields() -> None:
    """Thinking -> reasoning_content, text next to calls -> content, retried return -> error."""
    ours = from_pydantic_ai(await run_with_function_model())
    user, first, return_1, _, _, retried, final = ours
    assert user["content"] == [
        {"type": "text", "text": "question"},
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
    ]
    assert first["content"] == "先查" and first["reasoning_content"] == "想一想"
    assert [c["function"]["arguments"] for c in first["tool_calls"]] == [
        '{"q": "猫"}',
        '{"q": "dog"}',
    ]
    assert first["usage"] == {
        "prompt_tokens": 20,
        "completion_tokens": 5,
        "total_tokens": 25,
        "prompt_tokens_details": {"cached_tokens": 7},
    }
    assert json.loads(return_1["content"]) == {"q": "猫", "hits": [1, 2]}
    assert retried == {
        "role": "tool",
        "tool_call_id": "call_3",
        "content": "try again please",
        "meta": {"is_error": True},
    }
    assert final["content"] == [
        {"type": "text", "text": "答案"},
        {"type": "text", "text": "second"},
    ]


def test_consecutive_messages_share_one_request() -> None:
    """System, user and tool messages between two responses form one ModelRequest."""
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "r"},
        {"role": "user", "content": "next"},
    ]
    request, response, results = to_pydantic_ai(history, keep_extras=False)
    assert isinstance(request, ModelRequest) and isinstance(results, ModelRequest)
    assert [type(p) for p in request.parts] == [SystemPromptPart, UserPromptPart]
    assert isinstance(response, ModelResponse)
    assert response.parts == [ToolCallPart("f", {}, "c")]
    tool_return, user = results.parts
    assert isinstance(tool_return, ToolReturnPart) and isinstance(user, UserPromptPart)
    assert (tool_return.tool_name, tool_return.tool_call_id, tool_return.content) == ("f", "c", "r")
    assert from_pydantic_ai(to_pydantic_ai(history)) == history


async def test_converted_history_feeds_a_new_agent_run() -> None:
    """A strict round trip of a real run is a message_history Pydantic AI accepts."""
    history = to_pydantic_ai(from_pydantic_ai(await run_with_function_model()), keep_extras=False)
    result = await Agent(FakeAgentModel(call_tools=[])).run("continue", message_history=history)
    assert result.output
    assert dumped(result.all_messages()[: len(history)]) == dumped(history)
    assert from_pydantic_ai(result.new_messages())[0] == {"role": "user", "content": "continue"}


def test_images_and_binary_content_map_both_ways() -> None:
    """ImageUrl <-> https image_url; BinaryContent image <-> data URL; audio <-> input_audio."""
    request = ModelRequest(
        parts=[
            UserPromptPart(
                [
                    ImageUrl("https://x.test/i.png"),
                    BinaryContent(b"\x89PNG", media_type="image/png"),
                    BinaryContent(b"RIFF", media_type="audio/wav"),
                ]
            )
        ]
    )
    (ours,) = from_pydantic_ai([request])
    assert ours["content"] == [
        {"type": "image_url", "image_url": {"url": "https://x.test/i.png"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
    ]
    assert from_pydantic_ai(to_pydantic_ai([ours])) == [ours]
    assert dumped(to_pydantic_ai(from_pydantic_ai([request], keep_extras=True))) == dumped(
        [request]
    )


def test_retry_parts_become_what_the_model_reads() -> None:
    """RetryPromptPart (deprecated) and RetryFeedbackPart become tool and user messages."""
    with pytest.warns(PydanticAIDeprecationWarning):
        legacy = RetryPromptPart("bad args", tool_name="f", tool_call_id="c1")
    with pytest.warns(PydanticAIDeprecationWarning):
        loose = RetryPromptPart("no tool")
    feedback = RetryFeedbackPart("invalid output", retry=RetryInfo(cause="no_output"))
    calls = ModelResponse(parts=[ToolCallPart("f", {}, "c1")])
    ours = from_pydantic_ai([calls, ModelRequest(parts=[legacy, loose, feedback])])
    assert ours[1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": legacy.model_response(),
        "meta": {"is_error": True},
    }
    assert ours[2] == {"role": "user", "content": loose.model_response()}
    assert ours[3] == {"role": "user", "content": feedback.model_response()}


def test_unmapped_parts_ride_along_only_with_extras() -> None:
    """A native tool call has no chat equivalent: dropped by default, restored with extras."""
    response = ModelResponse(
        parts=[
            NativeToolCallPart("web_search", {"q": "x"}, "n1", provider_name="openai"),
            TextPart("found"),
        ],
        model_name="gpt",
    )
    assert from_pydantic_ai([response]) == [{"role": "assistant", "content": "found"}]
    assert to_pydantic_ai(from_pydantic_ai([response], keep_extras=True)) == [response]


def test_tool_name_is_kept_only_where_it_differs_from_the_call() -> None:
    """tool_name comes from the answered call; a different name survives as our name."""
    history: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "r", "name": "g"},
    ]
    _, request = to_pydantic_ai(history, keep_extras=False)
    assert isinstance(request, ModelRequest)
    assert request.parts[0].tool_name == "g"  # type: ignore[union-attr]
    assert from_pydantic_ai(to_pydantic_ai(history, keep_extras=False)) == history


def test_summary_marker_survives_byte_for_byte() -> None:
    """A summary-like user message keeps its exact content through both directions."""
    summary = {"role": "user", "content": SUMMARY_MARKER + "要点…\r\n\t end "}
    (request,) = to_pydantic_ai([summary], keep_extras=False)
    assert isinstance(request, ModelRequest)
    assert request.parts[0].content == summary["content"]  # type: ignore[union-attr]
    (back,) = from_pydantic_ai([request])
    assert back["content"].encode() == summary["content"].encode()


def test_our_extras_ride_in_metadata_never_sent_to_a_model() -> None:
    """meta, name and developer live in ModelRequest.metadata under CARRY_KEY (or nowhere)."""
    history: list[dict[str, Any]] = [
        {"role": "developer", "content": "d"},
        {"role": "user", "content": "s", "meta": {"content_type": "summary"}, "name": "bob"},
    ]
    (request,) = to_pydantic_ai(history)
    assert isinstance(request, ModelRequest)
    assert request.metadata == {
        CARRY_KEY: {
            "0": {"role": "developer"},
            "1": {"meta": {"content_type": "summary"}, "name": "bob"},
        }
    }
    assert from_pydantic_ai([request]) == history
    (plain,) = to_pydantic_ai(history, keep_extras=False)
    assert isinstance(plain, ModelRequest) and plain.metadata is None


async def test_edits_win_over_carried_data() -> None:
    """A cleared tool output is not replaced by the carried original; its timestamp stays."""
    messages = await run_with_function_model()
    ours = from_pydantic_ai(messages, keep_extras=True)
    ours[2]["content"] = "[cleared]"
    rebuilt = to_pydantic_ai(ours)
    part = rebuilt[2].parts[0]
    original = messages[2].parts[0]
    assert isinstance(part, ToolReturnPart) and isinstance(original, ToolReturnPart)
    assert part.content == "[cleared]"
    assert part.timestamp == original.timestamp


def test_an_edited_part_loses_its_provider_id() -> None:
    """A text part with a provider item id comes back without it once its text changed."""
    response = ModelResponse(
        parts=[TextPart("secret", id="msg_1", provider_name="openai")],
        model_name="gpt",
        provider_name="openai",
    )
    (ours,) = from_pydantic_ai([response], keep_extras=True)
    ours["content"] = "[redacted]"
    (back,) = to_pydantic_ai([ours])
    assert isinstance(back, ModelResponse)
    assert back.parts == [TextPart("[redacted]")]
    assert (back.model_name, back.provider_name) == ("gpt", "openai")


def test_unknown_objects_are_rejected() -> None:
    """Something that is not a ModelRequest/ModelResponse raises InvalidMessage with its index."""
    with pytest.raises(InvalidMessage, match="message 0: expected a ModelRequest"):
        from_pydantic_ai([{"role": "user", "content": "x"}])  # type: ignore[list-item]
    with pytest.raises(InvalidMessage, match="cannot convert role 'critic'"):
        to_pydantic_ai([{"role": "critic", "content": "x"}])


# ---------------------------------------------------------------------------------------------
# Round trips


@pytest.mark.parametrize("run", [run_with_test_model, run_with_function_model])
async def test_agent_messages_round_trip_exactly(run: Any) -> None:
    """Messages of a real run come back equal (timestamps, model names, run ids included)."""
    messages = await run()
    back = to_pydantic_ai(from_pydantic_ai(messages, keep_extras=True))
    assert back == messages
    assert dumped(back) == dumped(messages)


@pytest.mark.parametrize("run", [run_with_test_model, run_with_function_model])
async def test_pairing_survives_both_directions(run: Any) -> None:
    """Every tool return answers a call before it, and every call is answered."""
    ours = from_pydantic_ai(await run())
    validate_messages(ours)
    calls = [c["id"] for m in ours for c in m.get("tool_calls", [])]
    assert sorted(calls) == sorted(m["tool_call_id"] for m in ours if m["role"] == "tool")
    back = to_pydantic_ai(ours, keep_extras=False)
    call_ids = [p.tool_call_id for m in back for p in m.parts if isinstance(p, ToolCallPart)]
    return_ids = [p.tool_call_id for m in back for p in m.parts if isinstance(p, ToolReturnPart)]
    assert sorted(call_ids) == sorted(return_ids)


@PROPERTY
@given(chat_histories())
def test_ours_to_pydantic_ai_and_back_is_identity(history: list[dict[str, Any]]) -> None:
    """Every field of our messages survives a Pydantic AI round trip (extras kept by default)."""
    assert from_pydantic_ai(to_pydantic_ai(history)) == history


@PROPERTY
@given(chat_histories())
def test_strict_round_trip_keeps_pairing_and_fields(history: list[dict[str, Any]]) -> None:
    """Without extras the result is valid, fully paired and holds only message fields."""
    back = from_pydantic_ai(to_pydantic_ai(history, keep_extras=False))
    validate_messages(back)
    assert open_tool_calls(back) == set()
    assert all(set(m) <= MESSAGE_KEYS for m in back)
    assert not any(CARRY_KEY in m for m in back)


@PROPERTY
@given(chat_histories())
def test_pydantic_ai_built_from_ours_round_trips(history: list[dict[str, Any]]) -> None:
    """Pydantic AI messages come back equal from a carried conversion, whatever built them."""
    messages = to_pydantic_ai(history, keep_extras=False)
    assert dumped(to_pydantic_ai(from_pydantic_ai(messages, keep_extras=True))) == dumped(messages)
