"""The marker grammar (synopsis._markers): wrapping, reading, escaping, nested elements."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synopsis._markers import (
    Marker,
    escape_markers,
    mark,
    marked_elements,
    parse_marked,
    unescape_markers,
)

#: Text rich in everything that could confuse the grammar.
TRICKY = st.lists(
    st.sampled_from(["<", "/", "&", "amp;", "lt;", "synopsis:", "summary", ">", "\n", "a"]),
    max_size=40,
).map("".join)


@given(st.text() | TRICKY)
def test_escaping_round_trips_and_leaves_no_marker_text(text: str) -> None:
    """Escaping is reversible, and escaped text can neither open nor close a marker."""
    escaped = escape_markers(text)
    assert unescape_markers(escaped) == text
    assert "<synopsis:" not in escaped and "</synopsis:" not in escaped


def test_an_escaped_marker_typed_by_a_person_survives() -> None:
    """'&lt;synopsis:' is escaped too, so unescaping cannot turn it into a real tag."""
    text = "see &lt;synopsis:summary> and &amp;lt;synopsis:x"
    assert unescape_markers(escape_markers(text)) == text


@given(st.text() | TRICKY, st.integers(0, 10**6))
def test_mark_then_parse_gives_back_kind_attributes_and_body(body: str, tokens: int) -> None:
    """Whatever the body holds, the marker reads back whole, with its attributes."""
    text = mark("summary", body, {"version": 3, "tokens_after": tokens, "model": None})
    marker, raw = parse_marked(text) or (None, "")
    assert marker == Marker("summary", {"version": "3", "tokens_after": str(tokens)})
    assert unescape_markers(raw) == body


def test_attribute_values_are_quoted_safely() -> None:
    """Quotes and angle brackets in a value cannot end the tag early."""
    text = mark("skill", "x", {"name": 'a"b<synopsis:c>'})
    found = parse_marked(text)
    assert found is not None and found[0].attributes == {"name": 'a"b<synopsis:c>'}


@pytest.mark.parametrize(
    "text",
    [
        "hello",
        "<synopsis:summary>\nno closing tag",
        "<synopsis:summary>\nbody\n</synopsis:skills>",
        "before <synopsis:summary>\nbody\n</synopsis:summary>",
        "<synopsis:summary>\nbody\n</synopsis:summary> after",
        "<Synopsis:summary>\nbody\n</Synopsis:summary>",
    ],
)
def test_only_a_marker_around_the_whole_text_counts(text: str) -> None:
    """A tag somewhere inside, a wrong closing tag or other case: not a marked text."""
    assert parse_marked(text) is None


def test_blank_space_around_a_marker_is_allowed() -> None:
    """A framework that pads the text with blank lines does not unmark it."""
    found = parse_marked("\n  " + mark("notice", "body") + "\n\n")
    assert found == (Marker("notice"), "body")


def test_names_must_be_lowercase_words() -> None:
    """Kinds and attribute names are checked, so a tag always parses back."""
    with pytest.raises(ValueError, match="marker names"):
        mark("Summary", "x")
    with pytest.raises(ValueError, match="marker names"):
        mark("summary", "x", {"tokens-after": 1})


def test_nested_elements_read_back_exactly() -> None:
    """Elements in a raw body come back in order, unescaped, empty ones included."""
    inner = [mark("skill", "A\n</synopsis:skill>", {"name": "a"}), mark("skill", "", {"name": "b"})]
    body = escape_markers("heading <synopsis:skill>") + "\n" + "\n\n".join(inner)
    found = list(marked_elements(body, "skill"))
    assert found == [
        (Marker("skill", {"name": "a"}), "A\n</synopsis:skill>"),
        (Marker("skill", {"name": "b"}), ""),
    ]


def test_integer_attributes() -> None:
    """Only plain non-negative decimal numbers read as integers."""
    marker = Marker("summary", {"a": "12", "b": "-1", "c": "²", "d": "9" * 30})
    assert [marker.integer(n) for n in "abcde"] == [12, None, None, None, None]
