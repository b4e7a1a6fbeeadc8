"""to_langchain / from_langchain: shapes, lossless round trips both ways, edits beat carries."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
)

from synopsis.convert import CARRY_KEY, from_langchain, to_langchain
from synopsis.errors import InvalidMessage
from synopsis.messages import open_tool_calls
from synopsis.validation import validate_messages
from tests.convert_histories import SUMMARY_MARKER, TEXT, chat_histories

MESSAGE_KEYS = {"role", "content", "tool_calls", "tool_call_id", "name", "usage", "meta"}
MESSAGE_KEYS |= {"refusal", "reasoning_content", "audio", "function_call"}
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TOOL_TURN: list[dict[str, Any]] = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "读两个文件"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read", "arguments": '{"p":1}'}},
            {"id": "b", "type": "function", "function": {"name": "read", "arguments": "oops{"}},
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    },
    {"role": "tool", "tool_call_id": "a", "content": "one", "meta": {"is_error": True}},
    {"role": "tool", "tool_call_id": "b", "content": "two", "name": "read"},
    {"role": "user", "content": SUMMARY_MARKER + "摘要", "meta": {"content_type": "summary"}},
]


def test_roles_map_to_message_classes() -> None:
    """system/user/assistant/tool become SystemMessage/HumanMessage/AIMessage/ToolMessage."""
    converted = to_langchain(TOOL_TURN)
    assert [type(m) for m in converted] == [
        SystemMessage,
        HumanMessage,
        AIMessage,
        ToolMessage,
        ToolMessage,
        HumanMessage,
    ]


def test_tool_calls_usage_and_status_use_langchain_fields() -> None:
    """Arguments become args dicts (invalid JSON an invalid tool call); usage usage_metadata."""
    _, _, assistant, failed, named, _ = to_langchain(TOOL_TURN)
    assert isinstance(assistant, AIMessage)
    assert assistant.tool_calls == [
        {"name": "read", "args": {"p": 1}, "id": "a", "type": "tool_call"}
    ]
    assert assistant.invalid_tool_calls == [
        {"name": "read", "args": "oops{", "id": "b", "error": None, "type": "invalid_tool_call"}
    ]
    assert assistant.usage_metadata == {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}
    assert assistant.content == ""
    assert isinstance(failed, ToolMessage) and failed.status == "error"
    assert isinstance(named, ToolMessage) and named.name == "read" and named.tool_call_id == "b"


def test_round_trip_restores_everything() -> None:
    """None content, exact argument text and meta come back from additional_kwargs."""
    assert from_langchain(to_langchain(TOOL_TURN)) == TOOL_TURN


def test_without_extras_only_langchain_fields_are_set() -> None:
    """keep_extras=False leaves additional_kwargs empty; meta and None content are lost."""
    converted = to_langchain(TOOL_TURN, keep_extras=False)
    assert all(CARRY_KEY not in m.additional_kwargs for m in converted)
    back = from_langchain(converted)
    assert back[2]["content"] == ""
    assert back[2]["tool_calls"][0]["function"]["arguments"] == '{"p": 1}'
    assert "meta" not in back[5]
    assert back[3]["meta"] == {"is_error": True}  # status="error" is a LangChain field


def test_summary_marker_survives_byte_for_byte() -> None:
    """A summary-like user message keeps its exact content through both directions."""
    summary = {"role": "user", "content": SUMMARY_MARKER + "用户要求…\r\n\t end "}
    (converted,) = to_langchain([summary])
    assert converted.content == summary["content"]
    assert from_langchain([converted])[0]["content"].encode() == summary["content"].encode()


def test_developer_role_uses_langchains_openai_role_convention() -> None:
    """developer <-> SystemMessage with additional_kwargs['__openai_role__'] = 'developer'."""
    (converted,) = to_langchain([{"role": "developer", "content": "be terse"}], keep_extras=False)
    assert isinstance(converted, SystemMessage)
    assert converted.additional_kwargs == {"__openai_role__": "developer"}
    assert convert_to_openai_messages([converted])[0]["role"] == "developer"
    assert from_langchain([converted]) == [{"role": "developer", "content": "be terse"}]


def test_content_blocks_become_openai_parts() -> None:
    """Text, LangChain image and Anthropic image blocks become text and image_url parts."""
    message = HumanMessage(
        content=[
            "plain",
            {"type": "text", "text": "看这张图", "id": "blk"},
            {"type": "image", "url": "https://x.test/a.png"},
            {"type": "image", "base64": "AAAA", "mime_type": "image/jpeg"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "BB"},
            },
            {"type": "image_url", "image_url": "https://x.test/b.png"},
            {"type": "video", "url": "https://x.test/v.mp4"},
        ]
    )
    assert from_langchain([message])[0]["content"] == [
        {"type": "text", "text": "plain"},
        {"type": "text", "text": "看这张图"},
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,BB"}},
        {"type": "image_url", "image_url": {"url": "https://x.test/b.png"}},
        {"type": "video", "url": "https://x.test/v.mp4"},
    ]
    assert to_langchain(from_langchain([message], keep_extras=True)) == [message]


def test_tool_use_blocks_repeating_tool_calls_leave_the_content() -> None:
    """Anthropic-style content holding the tool_use block of a tool call keeps only the text."""
    message = AIMessage(
        content=[
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {"dir": "/"}},
        ],
        tool_calls=[{"name": "ls", "args": {"dir": "/"}, "id": "t1"}],
    )
    (converted,) = from_langchain([message])
    assert converted["content"] == [{"type": "text", "text": "reading"}]
    assert converted["tool_calls"][0]["id"] == "t1"
    assert to_langchain(from_langchain([message], keep_extras=True)) == [message]


def test_usage_details_map_to_openai_details() -> None:
    """Cache reads and reasoning tokens <-> prompt_tokens_details / completion_tokens_details."""
    message = AIMessage(
        content="ok",
        usage_metadata={
            "input_tokens": 10,
            "output_tokens": 4,
            "total_tokens": 14,
            "input_token_details": {"cache_read": 6, "cache_creation": 2},
            "output_token_details": {"reasoning": 3},
        },
    )
    (converted,) = from_langchain([message])
    assert converted["usage"] == {
        "prompt_tokens": 10,
        "completion_tokens": 4,
        "total_tokens": 14,
        "prompt_tokens_details": {"cached_tokens": 6},
        "completion_tokens_details": {"reasoning_tokens": 3},
    }
    assert to_langchain(from_langchain([message], keep_extras=True)) == [message]


def test_default_output_holds_only_message_fields() -> None:
    """Without keep_extras, ids, metadata and artifacts stay behind; nothing under CARRY_KEY."""
    messages = [
        AIMessage(
            content="hi",
            id="run-1",
            response_metadata={"model_name": "gpt", "finish_reason": "stop"},
            additional_kwargs={"refusal": None, "custom": 1},
        ),
        ToolMessage("result", tool_call_id="c", artifact={"rows": [1, 2]}, id="t"),
    ]
    converted = from_langchain(messages)
    assert converted == [
        {"role": "assistant", "content": "hi"},
        {"role": "tool", "content": "result", "tool_call_id": "c"},
    ]
    assert CARRY_KEY not in json.dumps(converted)


def test_chunks_convert_like_messages_and_come_back_as_chunks() -> None:
    """AIMessageChunk and HumanMessageChunk convert by role; with extras they round trip."""
    chunks: list[BaseMessage] = [
        HumanMessageChunk(content="hi"),
        AIMessageChunk(content="yo", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]),
    ]
    converted = from_langchain(chunks)
    assert [m["role"] for m in converted] == ["user", "assistant"]
    assert converted[1]["tool_calls"][0]["function"] == {"name": "f", "arguments": "{}"}
    back = to_langchain(from_langchain(chunks, keep_extras=True))
    assert back == chunks and [type(m) for m in back] == [HumanMessageChunk, AIMessageChunk]


def test_chat_message_roles_convert() -> None:
    """A ChatMessage converts by its role and comes back as a ChatMessage with extras."""
    message = ChatMessage(content="x", role="assistant")
    assert from_langchain([message]) == [{"role": "assistant", "content": "x"}]
    assert to_langchain(from_langchain([message], keep_extras=True)) == [message]


def test_unconvertible_objects_are_rejected_with_their_index() -> None:
    """FunctionMessage (legacy) and non-messages raise InvalidMessage naming the index."""
    with pytest.raises(InvalidMessage, match="message 1: cannot convert a FunctionMessage"):
        from_langchain([HumanMessage("x"), FunctionMessage(content="r", name="f")])
    with pytest.raises(InvalidMessage, match="message 0"):
        from_langchain([{"role": "user", "content": "x"}])  # type: ignore[list-item]
    with pytest.raises(InvalidMessage, match="message 0: cannot convert role 'critic'"):
        to_langchain([{"role": "critic", "content": "x"}])


def test_edits_win_over_carried_data_and_ids_survive_them() -> None:
    """Carried content yields to an edit (e.g. redaction); the message id still comes back."""
    original = HumanMessage(content=[{"type": "text", "text": "key=SECRET", "id": "b1"}], id="m1")
    (ours,) = from_langchain([original], keep_extras=True)
    ours["content"] = [{"type": "text", "text": "key=[REDACTED]"}]
    (back,) = to_langchain([ours])
    assert back.content == [{"type": "text", "text": "key=[REDACTED]"}]
    assert back.id == "m1"


def test_stale_meta_carry_yields_to_a_langchain_side_edit() -> None:
    """A None content carried in additional_kwargs is not restored once LangChain set text."""
    (converted,) = to_langchain([{"role": "assistant", "content": None}])
    edited = converted.model_copy(update={"content": "now with text"})
    assert from_langchain([edited]) == [{"role": "assistant", "content": "now with text"}]


def test_what_convert_to_openai_messages_loses() -> None:
    """LangChain's own converter drops usage, meta, None content, exact arguments and ids."""
    history = [
        {"role": "user", "content": "hi", "meta": {"content_type": "summary"}},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        },
        {"role": "tool", "tool_call_id": "a", "content": "done"},
    ]
    theirs = convert_to_openai_messages(convert_to_messages(history))
    assert theirs == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "tool_calls": [
                {"type": "function", "id": "a", "function": {"name": "f", "arguments": '{"x": 1}'}}
            ],
            "content": "",
        },
        {"role": "tool", "tool_call_id": "a", "content": "done"},
    ]
    assert from_langchain(to_langchain(history)) == history
    lc_ids = [AIMessage(content="a", id="run-7")]
    assert "id" not in convert_to_openai_messages(lc_ids)[0]
    assert to_langchain(from_langchain(lc_ids, keep_extras=True))[0].id == "run-7"


def test_convert_to_messages_cannot_read_invalid_arguments() -> None:
    """LangChain's own dict reader fails on argument text that is not JSON; ours keeps it."""
    history = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{"}}
            ],
        }
    ]
    with pytest.raises(ValueError, match="Expecting"):
        convert_to_messages(history)
    assert from_langchain(to_langchain(history)) == history


# ---------------------------------------------------------------------------------------------
# Properties


@PROPERTY
@given(chat_histories())
def test_ours_to_langchain_and_back_is_identity(history: list[dict[str, Any]]) -> None:
    """Every field of our messages survives a LangChain round trip (extras kept by default)."""
    assert from_langchain(to_langchain(history)) == history


@PROPERTY
@given(chat_histories())
def test_pairing_survives_without_extras(history: list[dict[str, Any]]) -> None:
    """Even in strict mode every tool result keeps its call: valid, nothing left open."""
    back = from_langchain(to_langchain(history, keep_extras=False))
    validate_messages(back)
    assert open_tool_calls(back) == set()
    assert [m["role"] for m in back] == [m["role"] for m in history]
    assert all(set(m) <= MESSAGE_KEYS for m in back)


_IDS = st.none() | st.sampled_from(["run-1", "msg_中"])
_BLOCKS = st.lists(
    st.one_of(
        TEXT,
        TEXT.map(lambda t: {"type": "text", "text": t}),
        st.just({"type": "image_url", "image_url": {"url": "https://x.test/i.png"}}),
        st.just({"type": "image", "base64": "AAAA", "mime_type": "image/png"}),
        st.just({"type": "reasoning", "reasoning": "因为"}),
    ),
    max_size=3,
)
_CONTENT = TEXT | _BLOCKS


@st.composite
def langchain_messages(draw: st.DrawFn) -> list[BaseMessage]:
    """Messages built by LangChain's own constructors, with the fields models fill in."""
    messages: list[BaseMessage] = []
    for kind in draw(
        st.lists(st.sampled_from(["system", "human", "ai", "chunk", "tool"]), max_size=6)
    ):
        content, message_id = draw(_CONTENT), draw(_IDS)
        if kind == "system":
            messages.append(SystemMessage(content=content, id=message_id))
        elif kind == "human":
            messages.append(
                HumanMessage(content=content, id=message_id, name=draw(st.none() | TEXT))
            )
        elif kind == "tool":
            messages.append(_tool_message(draw, content, message_id))
        else:
            cls = AIMessageChunk if kind == "chunk" else AIMessage
            messages.append(cls(content=content, id=message_id, **_ai_fields(draw)))
    return messages


def _tool_message(draw: st.DrawFn, content: Any, message_id: str | None) -> ToolMessage:
    return ToolMessage(
        content=content,
        tool_call_id=draw(st.sampled_from(["c1", "调用2"])),
        id=message_id,
        name=draw(st.none() | st.just("search")),
        artifact=draw(st.none() | st.just({"rows": [1, 2]})),
        status=draw(st.sampled_from(["success", "error"])),
    )


def _ai_fields(draw: st.DrawFn) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "tool_calls": [
            {
                "name": "search",
                "args": draw(st.dictionaries(st.sampled_from(["q", "页"]), TEXT)),
                "id": i,
            }
            for i in draw(st.lists(st.sampled_from(["c1", "调用2", "c3"]), unique=True, max_size=2))
        ],
        "response_metadata": draw(
            st.sampled_from([{}, {"model_name": "m", "finish_reason": "stop"}])
        ),
        "additional_kwargs": draw(
            st.sampled_from([{}, {"refusal": None}, {"reasoning_content": "想"}])
        ),
    }
    if draw(st.booleans()):
        fields["invalid_tool_calls"] = [
            {
                "name": "bad",
                "args": "{",
                "id": "c9",
                "error": "Expecting value",
                "type": "invalid_tool_call",
            }
        ]
    if draw(st.booleans()):
        n = draw(st.integers(0, 500))
        fields["usage_metadata"] = {
            "input_tokens": n,
            "output_tokens": 3,
            "total_tokens": n + 3,
            "input_token_details": draw(
                st.sampled_from([{}, {"cache_read": 1}, {"cache_creation": 2}])
            ),
        }
    return fields


@PROPERTY
@given(langchain_messages())
def test_langchain_to_ours_and_back_is_identity(messages: list[BaseMessage]) -> None:
    """LangChain-built messages come back equal (class included) when extras are carried."""
    back = to_langchain(from_langchain(messages, keep_extras=True))
    assert back == messages
    assert [type(m) for m in back] == [type(m) for m in messages]


@PROPERTY
@given(langchain_messages())
def test_strict_output_is_valid_message_shaped(messages: list[BaseMessage]) -> None:
    """By default every converted message holds only message fields and no carried data."""
    converted = from_langchain(messages)
    assert all(set(m) <= MESSAGE_KEYS for m in converted)
    assert not any(CARRY_KEY in m for m in converted)
