"""foreign_message_hint and to_openai_messages: recognizing frameworks' messages."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import Message as AnthropicMessage
from hypothesis import HealthCheck, given, settings
from langchain_core.messages import AIMessageChunk, HumanMessage
from openai.types.chat import ChatCompletionMessage
from openai.types.responses import ResponseFunctionToolCall
from pydantic_ai.messages import ModelRequest, UserPromptPart

from synopsis.convert import (
    foreign_message_hint,
    from_langchain,
    from_pydantic_ai,
    from_responses_items,
    to_langchain,
    to_openai_messages,
    to_pydantic_ai,
    to_responses_items,
)
from synopsis.errors import InvalidMessage
from tests.convert_histories import chat_histories

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def lookalike(module: str, name: str) -> object:
    """An instance of a class that only claims to live in ``module`` (nothing is imported)."""
    return type(name, (), {"__module__": module})()


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            HumanMessage("x"),
            "a langchain_core.messages.HumanMessage: convert with "
            "synopsis.convert.from_langchain(messages)",
        ),
        (AIMessageChunk(content="x"), "a langchain_core.messages.AIMessageChunk: convert with"),
        (
            ModelRequest(parts=[UserPromptPart("x")]),
            "a pydantic_ai.messages.ModelRequest: convert with "
            "synopsis.convert.from_pydantic_ai(messages)",
        ),
        (
            ResponseFunctionToolCall(arguments="{}", call_id="c", name="f", type="function_call"),
            "an openai.types.responses.ResponseFunctionToolCall: convert with "
            "synopsis.convert.from_responses_items([item.model_dump(exclude_unset=True)",
        ),
        (
            ChatCompletionMessage(role="assistant", content="x"),
            "an openai.types.chat.ChatCompletionMessage: pass message.model_dump("
            "exclude_none=True), it is already our shape",
        ),
        (
            lookalike("agents.items", "MessageOutputItem"),
            "an agents.items.MessageOutputItem: convert with "
            "synopsis.convert.from_responses_items(result.to_input_list())",
        ),
        (
            AnthropicMessage.model_construct(role="assistant", content=[]),
            "an anthropic.types.Message: convert with synopsis.convert.from_anthropic(",
        ),
        (
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            "a Responses API 'function_call' item: convert with "
            "synopsis.convert.from_responses_items(items)",
        ),
        ({"type": "web_search_call", "id": "ws"}, "a Responses API 'web_search_call' item"),
    ],
)
def test_hint_names_the_type_and_the_converter(obj: object, expected: str) -> None:
    """Known foreign messages get their public type name and the converter to call."""
    hint = foreign_message_hint(obj)
    assert hint is not None and hint.startswith(expected)


def test_hint_goes_by_module_name_alone() -> None:
    """A class merely declared in langchain_core.messages.human is recognized: no import."""
    hint = foreign_message_hint(lookalike("langchain_core.messages.human", "HumanMessage"))
    assert hint == (
        "a langchain_core.messages.HumanMessage: convert with "
        "synopsis.convert.from_langchain(messages)"
    )


@pytest.mark.parametrize(
    "obj",
    [
        object(),
        42,
        "hello",
        {"role": "user", "content": "x"},
        {"type": "text", "text": "a content part, not an item"},
        lookalike("langchain_core.prompts.chat", "ChatPromptTemplate"),
        lookalike("mylib.messages", "Message"),
    ],
)
def test_unknown_objects_get_no_hint(obj: object) -> None:
    """Our dicts, plain values and unrelated classes get None."""
    assert foreign_message_hint(obj) is None


def test_each_framework_goes_to_its_converter() -> None:
    """to_openai_messages reads LangChain, Pydantic AI and Responses lists like their converters."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "done"},
    ]
    langchain = to_langchain(history)
    assert to_openai_messages(langchain) == from_langchain(langchain) == history
    pydantic_ai = to_pydantic_ai(history)
    assert to_openai_messages(pydantic_ai) == from_pydantic_ai(pydantic_ai) == history
    items = to_responses_items(history)
    assert items[0] == {"role": "user", "content": "hi"}  # an easy message: either shape
    assert to_openai_messages(items) == from_responses_items(items) == history
    assert to_openai_messages(langchain, keep_extras=True) == from_langchain(
        langchain, keep_extras=True
    )


def test_our_own_dicts_come_back_as_copies() -> None:
    """A list of our messages is returned as new dicts; an empty list as an empty list."""
    history = [{"role": "user", "content": "hi"}]
    result = to_openai_messages(history)
    assert result == history and result[0] is not history[0]
    assert to_openai_messages([]) == []


def test_mixed_lists_are_rejected_at_the_first_odd_one() -> None:
    """LangChain next to dicts, or our tool messages next to Responses items, is an error."""
    with pytest.raises(InvalidMessage, match="message 1: a list mixing message types"):
        to_openai_messages([HumanMessage("x"), {"role": "user", "content": "y"}])
    with pytest.raises(InvalidMessage, match=r"message 1: .*Responses API items and chat"):
        to_openai_messages(
            [
                {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
                {"role": "tool", "tool_call_id": "a", "content": "r"},
            ]
        )


def test_unknown_objects_are_rejected_with_a_hint() -> None:
    """An object nobody converts raises InvalidMessage; a known one says how to convert it."""
    with pytest.raises(InvalidMessage, match="message 0: expected a chat message"):
        to_openai_messages([object()])
    message = ChatCompletionMessage(role="assistant", content="x")
    with pytest.raises(InvalidMessage, match="model_dump"):
        to_openai_messages([message])


@PROPERTY
@given(chat_histories())
def test_any_framework_list_reads_back_as_our_history(history: list[dict[str, Any]]) -> None:
    """Whatever framework shape a history was turned into, to_openai_messages reads it back."""
    assert to_openai_messages(to_langchain(history)) == history
    assert to_openai_messages(to_pydantic_ai(history)) == history


@PROPERTY
@given(chat_histories(extensions=False, reasoning=False))
def test_responses_lists_read_like_from_responses_items(history: list[dict[str, Any]]) -> None:
    """Responses items are recognized even when they begin with easy messages."""
    items = to_responses_items(history)
    assert to_openai_messages(items) == from_responses_items(items)


def test_the_compactor_names_the_converter_for_langchain_messages() -> None:
    """LangChain message objects given to the compactor: InvalidMessage naming type and fix."""
    from langchain_core.messages import HumanMessage

    from synopsis import Compactor, InvalidMessage

    with pytest.raises(InvalidMessage, match=r"HumanMessage.*synopsis\.convert\.from_langchain"):
        Compactor(trigger_messages=1).compact([HumanMessage("hi"), HumanMessage("there")])
