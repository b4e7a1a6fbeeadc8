"""Message validation and the pure helpers of synopsis.messages."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given

from synopsis.errors import InvalidMessage
from synopsis.messages import (
    Marker,
    content_type,
    is_internal,
    is_real_user_message,
    mark,
    marked_body,
    marker_of,
    open_tool_calls,
    safe_cut_points,
    split_leading_system,
    strip_extensions,
    text_of,
    total_tokens_of,
    validate_messages,
    with_meta,
    without_meta,
)
from tests.strategies import histories


def _call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def test_valid_history_passes_and_is_returned_as_list() -> None:
    """A well-formed history validates and comes back as a list."""
    history = (
        {"role": "system", "content": "s"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    )
    assert validate_messages(history) == list(history)


@pytest.mark.parametrize(
    ("history", "needle"),
    [
        ([{"role": "robot", "content": "x"}], "unknown role 'robot'"),
        ([{"role": "user", "content": 42}], "content must be a string"),
        ([{"role": "user"}], "content is required"),
        ([{"role": "tool", "tool_call_id": "c9", "content": "x"}], "no matching assistant"),
        ([{"role": "assistant", "tool_calls": [{"id": "c"}]}], "function.name"),
        ([{"role": "assistant", "tool_calls": "nope"}], "tool_calls must be a list"),
        ([{"role": "user", "content": "bad \ud800 text"}], "not valid UTF-8"),
        ([{"role": "assistant", "content": "x", "usage": {"total_tokens": -1}}], "non-negative"),
        ([{"role": "user", "content": "x", "meta": []}], "meta must be an object"),
        (["just a string"], "expected an object"),
        ([{"role": "user", "content": [{"type": "text"}]}], "needs a string 'text'"),
    ],
)
def test_invalid_messages_are_named(history: list, needle: str) -> None:
    """Each kind of malformed message is rejected with a message naming the problem."""
    with pytest.raises(InvalidMessage, match="message 0") as info:
        validate_messages(history)
    assert needle in str(info.value)


def test_orphaned_tool_result_reports_its_index_and_field() -> None:
    """A tool result without an earlier call names its index and the tool_call_id field."""
    history = [
        {"role": "user", "content": "x"},
        {"role": "tool", "tool_call_id": "z", "content": "r"},
    ]
    with pytest.raises(InvalidMessage) as info:
        validate_messages(history)
    assert info.value.index == 1
    assert info.value.field == "tool_call_id"


def test_non_list_input_is_rejected() -> None:
    """A dict where a list belongs is refused."""
    with pytest.raises(InvalidMessage, match="expected a list"):
        validate_messages({"role": "user"})


def test_text_of_joins_text_parts_and_ignores_media() -> None:
    """text_of joins the text parts with newlines and skips images."""
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "a"},
            {"type": "image_url", "image_url": {"url": "http://x"}},
            {"type": "text", "text": "b"},
        ],
    }
    assert text_of(message) == "a\nb"
    assert text_of({"role": "assistant", "content": None}) == ""


def test_internal_markers() -> None:
    """Summaries, skills and flagged messages are internal; plain user messages are real."""
    summary = {"role": "user", "content": "s", "meta": {"content_type": "summary"}}
    flagged = {"role": "user", "content": "r", "meta": {"internal": True}}
    plain = {"role": "user", "content": "hello"}
    assert is_internal(summary) and is_internal(flagged)
    assert not is_internal(plain)
    assert is_real_user_message(plain) and not is_real_user_message(summary)
    assert not is_real_user_message({"role": "tool", "tool_call_id": "c", "content": "x"})


def test_markers_are_read_from_the_text_alone() -> None:
    """A marked text makes a message internal, as a string or spread over text parts; a
    person who merely mentions a marker still wrote a real user message."""
    text = mark("summary", "the story so far", {"version": 2})
    as_string = {"role": "user", "content": text}
    opening, body, closing = text.split("\n")
    as_parts = {
        "role": "user",
        "content": [
            {"type": "text", "text": opening},
            {"type": "text", "text": body},
            {"type": "image_url", "image_url": {"url": "http://x"}},
            {"type": "text", "text": closing},
        ],
    }
    for message in (as_string, as_parts):
        assert content_type(message) == "summary" and is_internal(message)
        assert not is_real_user_message(message)
        assert marker_of(message) == Marker("summary", {"version": "2"})
        assert marked_body(message) == "the story so far"
    mention = {"role": "user", "content": f"what does this mean? {text}"}
    assert is_real_user_message(mention) and content_type(mention) is None


def test_legacy_meta_markers_are_still_read() -> None:
    """Histories saved by older versions keep working: their ``meta`` marker is read."""
    old = {"role": "user", "content": "S", "meta": {"content_type": "summary", "version": 4}}
    note = {"role": "user", "content": "n", "meta": {"content_type": "note"}}
    assert content_type(old) == "summary" and marker_of(old) == Marker("summary", {"version": "4"})
    assert content_type(note) is None and is_real_user_message(note)


def test_without_meta_moves_a_legacy_marker_into_the_text() -> None:
    """The output form of a legacy message: no ``meta``; an internal marker is kept, in the
    text; other ``meta`` content is dropped; the input is not touched."""
    old = {"role": "user", "content": "S", "meta": {"content_type": "summary", "version": 4}}
    parts = {"role": "user", "content": [{"type": "text", "text": "R"}], "meta": {"internal": True}}
    note = {"role": "user", "content": "n", "meta": {"content_type": "note"}, "name": "bob"}
    before = copy.deepcopy([old, parts, note])
    upgraded = [without_meta(m) for m in (old, parts, note)]
    assert [set(m) for m in upgraded] == [
        {"role", "content"},
        {"role", "content"},
        {"role", "content", "name"},
    ]
    assert marker_of(upgraded[0]) == Marker("summary", {"version": "4"})
    assert marked_body(upgraded[0]) == "S"
    assert content_type(upgraded[1]) == "internal" and marked_body(upgraded[1]) == "R"
    assert upgraded[2] == {"role": "user", "content": "n", "name": "bob"}
    assert [old, parts, note] == before
    plain = {"role": "user", "content": "hi"}
    assert without_meta(plain) is plain


def test_total_tokens_only_from_assistant_usage() -> None:
    """Only an assistant message's positive usage.total_tokens counts as a baseline."""
    assert total_tokens_of({"role": "assistant", "usage": {"total_tokens": 7}}) == 7
    assert total_tokens_of({"role": "user", "usage": {"total_tokens": 7}}) == 0
    assert total_tokens_of({"role": "assistant", "usage": {"total_tokens": 0}}) == 0
    assert total_tokens_of({"role": "assistant", "usage": {"total_tokens": True}}) == 0


def test_strip_extensions_and_with_meta_do_not_mutate() -> None:
    """strip_extensions drops usage/meta; with_meta returns a copy with merged meta."""
    message = {"role": "assistant", "content": "x", "usage": {"total_tokens": 3}, "meta": {"a": 1}}
    before = copy.deepcopy(message)
    assert strip_extensions(message) == {"role": "assistant", "content": "x"}
    assert with_meta(message, b=2)["meta"] == {"a": 1, "b": 2}
    assert message == before


def test_split_leading_system_only_takes_the_leading_run() -> None:
    """A system message after the first non-system message is context, not system."""
    history = [
        {"role": "system", "content": "a"},
        {"role": "developer", "content": "b"},
        {"role": "user", "content": "u"},
        {"role": "system", "content": "late"},
    ]
    system, rest = split_leading_system(history)
    assert [m["content"] for m in system] == ["a", "b"]
    assert [m["content"] for m in rest] == ["u", "late"]


def test_safe_cut_points_never_inside_a_tool_group() -> None:
    """Cut points skip the positions between a tool call and its results."""
    history = [
        {"role": "user", "content": "u"},
        {"role": "assistant", "tool_calls": [_call("a"), _call("b")]},
        {"role": "tool", "tool_call_id": "b", "content": "1"},
        {"role": "tool", "tool_call_id": "a", "content": "2"},
        {"role": "assistant", "content": "done"},
    ]
    assert safe_cut_points(history) == [0, 1, 4, 5]


@given(histories())
def test_every_safe_cut_leaves_no_orphans(history: list) -> None:
    """For random histories, any safe cut leaves a tail without orphaned results."""
    validate_messages(history)
    for point in safe_cut_points(history):
        assert not open_tool_calls(history[:point])
        validate_messages(history[point:])
