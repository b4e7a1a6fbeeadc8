"""Loading and dumping transcripts in the three formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synopsis.errors import InvalidInput
from synopsis.transcripts import dump_transcript, load_transcript, parse_transcript

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "你好"}]


@pytest.mark.parametrize("fmt", ["json", "jsonl", "object"])
def test_round_trip_keeps_format_and_messages(fmt: str) -> None:
    """Dumping then parsing gives back the same messages and format."""
    text = dump_transcript(MESSAGES, fmt, extra={"id": "t1"})  # type: ignore[arg-type]
    transcript = parse_transcript(text)
    assert transcript.messages == MESSAGES
    assert transcript.format == fmt
    if fmt == "object":
        assert transcript.extra == {"id": "t1"}


def test_single_message_object_is_read_as_jsonl() -> None:
    """One message object on one line is a JSONL transcript of one message."""
    transcript = parse_transcript('{"role": "user", "content": "x"}')
    assert transcript.format == "jsonl"
    assert transcript.messages == [{"role": "user", "content": "x"}]


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"", "empty transcript"),
        (b'[{"role": "user", ', "malformed JSON at line 1"),
        (b'{"role": "user", "content": "a"}\n{oops}\n', "line 2: malformed JSON"),
        (b"\xff\xfe garbage", "not valid UTF-8"),
        (b"hello", "expected a JSON array"),
        (b'{"messages": 3}', "'messages' must be a list"),
        (b'[{"role": "wizard", "content": "x"}]', "unknown role"),
    ],
)
def test_bad_transcripts_get_clear_errors(data: bytes, needle: str) -> None:
    """Malformed files raise InvalidInput naming what is wrong and where."""
    with pytest.raises(InvalidInput) as info:
        parse_transcript(data, source="t.json")
    assert needle in str(info.value)
    assert str(info.value).startswith("t.json")


def test_load_transcript_reports_unreadable_files(tmp_path: Path) -> None:
    """A missing file is an InvalidInput, not an OSError."""
    with pytest.raises(InvalidInput, match="cannot read"):
        load_transcript(tmp_path / "missing.json")


def test_dump_keeps_non_ascii_readable() -> None:
    """Chinese text is written as UTF-8, not as escapes."""
    assert "你好" in dump_transcript(MESSAGES)
    assert json.loads(dump_transcript(MESSAGES)) == MESSAGES
