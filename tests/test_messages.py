"""Message validation and the pure helpers of synopsis.messages."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given

from synopsis import validation as messages_module
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
    with_meta,
    without_meta,
)
from synopsis.validation import validate_messages
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
        ([{"foo": 1}], "field 'role': missing the 'role' key (one of assistant, "),
        ([{"role": None, "content": "x"}], "unknown role None"),
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


def _tool_turn(**function: object) -> list[dict[str, Any]]:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": "{}", **function},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]


class _Odd:
    pass


@pytest.mark.parametrize(
    ("history", "index", "field"),
    [
        (_tool_turn(name="\ud800"), 0, "tool_calls[0].function.name"),
        (_tool_turn(arguments='{"a": "\udcff"}'), 0, "tool_calls[0].function.arguments"),
        ([{"role": "user", "content": "x", "name": "n\ud800"}], 0, "name"),
        ([{"role": "user", "content": "x", "extra": "\ud800"}], 0, "extra"),
        ([{"role": "user", "content": "x", "meta": {"tags": ["a", "\udc80"]}}], 0, "meta.tags[1]"),
        ([{"role": "user", "content": "x", "meta": {"odd key": "\ud800"}}], 0, 'meta["odd key"]'),
        ([{"role": "user", "content": "x", "meta": {"\ud800": 1}}], 0, 'meta["\\ud800"]'),
        ([{"role": "user", "content": "x", "meta": {1: "one"}}], 0, "meta"),
        ([{"role": "user", "content": "x", "extra": {1, 2}}], 0, "extra"),
        ([{"role": "user", "content": "x", "extra": b"raw"}], 0, "extra"),
        ([{"role": "user", "content": "x", "meta": {"when": _Odd()}}], 0, "meta.when"),
        ([{"role": "user", "content": "x", "meta": {"n": 10**5000}}], 0, "meta.n"),
        (
            [
                {"role": "user", "content": "x"},
                {"role": "user", "content": [{"type": "text", "text": "t", "x": {1}}]},
            ],
            1,
            "content[0].x",
        ),
    ],
    ids=[
        "function-name-surrogate",
        "arguments-surrogate",
        "name-surrogate",
        "extra-key-surrogate",
        "nested-list-surrogate",
        "odd-key-path",
        "surrogate-in-key",
        "non-string-key",
        "set",
        "bytes",
        "object",
        "integer-too-long-for-text",
        "extra-part-key",
    ],
)
def test_every_field_is_checked_and_named(
    history: list[dict[str, Any]], index: int, field: str
) -> None:
    """Fields validation did not look at before are checked too, the path naming the culprit."""
    with pytest.raises(InvalidMessage) as info:
        validate_messages(history)
    assert (info.value.index, info.value.field) == (index, field)
    str(info.value).encode("ascii")  # printable on any terminal, even with a surrogate key


def test_nesting_is_bounded_without_exhausting_the_stack() -> None:
    """Nesting beyond MAX_NESTING is an InvalidMessage; checking it never recurses."""
    deep: Any = "leaf"
    for _ in range(50_000):
        deep = {"a": deep}
    with pytest.raises(
        InvalidMessage, match=f"nested more than {messages_module.MAX_NESTING} levels"
    ) as info:
        validate_messages([{"role": "user", "content": "x", "meta": deep}])
    assert info.value.field is not None and len(info.value.field) <= 80
    shallow: Any = "leaf"
    for _ in range(messages_module.MAX_NESTING - 2):
        shallow = [shallow]
    validate_messages([{"role": "user", "content": "x", "meta": {"deep": shallow}}])


@pytest.mark.parametrize("role", [["user"], {"r": 1}, 3, None])
def test_a_role_of_the_wrong_type_is_an_invalid_message(role: object) -> None:
    with pytest.raises(InvalidMessage) as info:
        validate_messages([{"role": role, "content": "x"}])
    assert info.value.field == "role"


def test_json_values_of_every_kind_are_accepted() -> None:
    """NaN and infinities, tuples, booleans, null and large (but printable) integers pass."""
    meta = {"nan": float("nan"), "inf": float("-inf"), "pair": (1, "b"), "ok": True, "no": None}
    history = [{"role": "user", "content": "x", "meta": {**meta, "big": 10**600}}]
    assert validate_messages(history) == history


def test_usage_with_a_non_string_key_is_an_invalid_message() -> None:
    with pytest.raises(InvalidMessage) as info:
        validate_messages([{"role": "assistant", "content": "x", "usage": {1: 2}}])
    assert info.value.field == "usage"


def test_strip_extensions_drops_carried_data_on_messages_and_parts() -> None:
    """Data a converter carries (``_synopsis``) is ours: a provider never sees it."""
    from synopsis.messages import CARRY_KEY

    part = {"type": "text", "text": "hi", CARRY_KEY: {"cache_control": {"type": "ephemeral"}}}
    message = {"role": "user", "content": [part, {"type": "text", "text": "x"}], CARRY_KEY: {}}
    assert strip_extensions(message) == {
        "role": "user",
        "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "x"}],
    }
    assert CARRY_KEY in message and CARRY_KEY in part  # the caller's data is not mutated


def test_media_parts_ignores_malformed_part_types() -> None:
    """Token counting runs before validation (the proxy's trigger check): a part whose type is
    a list or an object is not media, and must not raise TypeError (a 500 in the service)."""
    from synopsis.messages import media_parts

    image = {"type": "image_url", "image_url": {"url": "data:,"}}
    content = [{"type": ["image_url"]}, {"type": {"a": 1}}, image, "text", {"type": None}]
    assert media_parts({"role": "user", "content": content}) == [image]


@pytest.mark.parametrize("bad", [["text"], {"a": 1}])
def test_reading_a_message_before_validation_never_raises_on_unhashable_values(bad: Any) -> None:
    """Text and token counts are read before validation (the proxy's trigger check, the
    converters' detection): a list or object where a type or role string belongs is no text
    part and no system role, not a TypeError (a 500 in the service)."""
    from synopsis.messages import is_system, text_of
    from synopsis.tokens import message_text

    message = {
        "role": bad,
        "content": [{"type": bad, "text": "hidden"}, {"type": "text", "text": "hi"}],
    }
    assert message_text(message) == "hi" and text_of(message) == "hi"
    assert not is_system(message)
