"""Loading and dumping transcripts in the three formats."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from synopsis import transcripts
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


# Characters str.splitlines breaks at, and which JSON strings may hold raw or escaped.
_BREAKS = "\u2028\u2029\u0085\r\n\x0b\x0c\x1c\x1d\x1e"
_ANY_TEXT = st.text(
    alphabet=st.one_of(st.sampled_from(_BREAKS), st.characters(blacklist_categories=("Cs",))),
    max_size=30,
)


@given(st.lists(_ANY_TEXT, min_size=1, max_size=6))
@example(["a\u2028b", "c\u2029d\u0085e"])
def test_jsonl_round_trips_any_text(texts: list[str]) -> None:
    """Line separators inside strings neither split a line on reading nor reach the file raw."""
    messages = [{"role": "user", "content": text} for text in texts]
    dumped = dump_transcript(messages, "jsonl")
    assert not any(char in dumped for char in "\u2028\u2029\u0085")
    assert dumped.count("\n") == len(messages)
    assert parse_transcript(dumped).messages == messages


def test_jsonl_written_with_raw_separators_is_still_read() -> None:
    """Files written before the escaping (raw U+2028 in a string) load; CRLF endings too."""
    text = '{"role": "user", "content": "a\u2028b\u0085c"}\r\n{"role": "user", "content": "d"}\r\n'
    assert [m["content"] for m in parse_transcript(text).messages] == ["a\u2028b\u0085c", "d"]


def test_split_json_lines_splits_at_newline_only() -> None:
    assert transcripts.split_json_lines("a\u2028b\r\nc\rd\n\ne\n") == ["a\u2028b", "c\rd", "", "e"]
    assert transcripts.json_line({"t": "x\u2029y"}) == '{"t": "x\\u2029y"}'


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ("[" * 5_000 + "]" * 5_000, "nested too deeply"),
        ('{"role": "user", "content": "x"}\n' + "[" * 5_000 + "]" * 5_000, "line 2"),
        ('[{"role": "user", "content": "x", "n": ' + "9" * 5_000 + "}]", "4300 digits"),
    ],
)
def test_json_too_deep_or_too_long_for_python_is_invalid_input(data: str, needle: str) -> None:
    with pytest.raises(InvalidInput, match=needle):
        parse_transcript(data, source="t.json")


def test_write_atomically_replaces_and_keeps_permissions(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    path.write_text("old", encoding="utf-8")
    path.chmod(0o640)
    transcripts.write_atomically(path, "新的")
    assert path.read_text(encoding="utf-8") == "新的"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_write_atomically_follows_a_symlink(tmp_path: Path) -> None:
    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text("old", encoding="utf-8")
    link.symlink_to(target)
    transcripts.write_atomically(link, "new")
    assert link.is_symlink() and target.read_text(encoding="utf-8") == "new"


def test_a_failed_write_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unencodable text or a failing rename: the old content stays, no temporary file remains."""
    path = tmp_path / "out.json"
    path.write_text("precious", encoding="utf-8")
    with pytest.raises(UnicodeEncodeError):
        transcripts.write_atomically(path, "bad \ud800")
    with pytest.raises(UnicodeEncodeError):
        transcripts.write_atomically(tmp_path / "new.json", "bad \ud800")

    def refuse(source: object, destination: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space"):
        transcripts.write_atomically(path, "new")
    monkeypatch.undo()
    assert path.read_text(encoding="utf-8") == "precious"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_write_atomically_writes_devices_in_place() -> None:
    """A character device (``/dev/null``, ``/dev/stdout``) is written, not renamed over."""
    transcripts.write_atomically(os.devnull, "text")
    assert Path(os.devnull).is_char_device()
