"""Reading and writing transcripts: a JSON array, JSONL, or ``{"messages": [...]}``.

Loading validates every message (see :func:`synopsis.messages.validate_messages`) and reports
the first problem with its line or index. Dumping writes the same format that was read, so
``synopsis compact`` returns a file of the shape it was given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from synopsis.errors import InvalidInput
from synopsis.messages import validate_messages

__all__ = [
    "Transcript",
    "TranscriptFormat",
    "dump_transcript",
    "load_transcript",
    "parse_transcript",
]

TranscriptFormat = Literal["json", "jsonl", "object"]


@dataclass(frozen=True, slots=True)
class Transcript:
    """Messages read from a transcript, with the format they came in."""

    messages: list[dict[str, Any]]
    format: TranscriptFormat
    #: For the object form: every key besides ``messages``, written back unchanged.
    extra: Mapping[str, Any] = field(default_factory=dict)


def load_transcript(path: str | Path) -> Transcript:
    """Read and validate a transcript file."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_transcript(data, source=str(path))


def _decode(data: bytes | str, source: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{source}: not valid UTF-8 (bad byte at offset {exc.start})") from None


def parse_transcript(data: bytes | str, *, source: str = "transcript") -> Transcript:
    """Parse transcript text in any of the three formats and validate its messages."""
    text = _decode(data, source).strip()
    if not text:
        raise InvalidInput(
            f"{source}: empty transcript (expected a JSON array, JSONL or an object)"
        )
    if text.startswith("["):
        return Transcript(_validated(_load_json(text, source), source), "json")
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return Transcript(_validated(_load_jsonl(text, source), source), "jsonl")
        if isinstance(value, dict) and "messages" in value and "role" not in value:
            extra = {k: v for k, v in value.items() if k != "messages"}
            return Transcript(_validated(value["messages"], source), "object", extra)
        return Transcript(_validated([value], source), "jsonl")
    raise InvalidInput(
        f"{source}: expected a JSON array, JSONL (one message per line) or an object with "
        "'messages'"
    )


def _load_json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{source}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None


def _load_jsonl(text: str, source: str) -> list[Any]:
    messages: list[Any] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            messages.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{source}: line {number}: malformed JSON: {exc.msg}") from None
    return messages


def _validated(messages: Any, source: str) -> list[dict[str, Any]]:
    if not isinstance(messages, list):
        raise InvalidInput(f"{source}: 'messages' must be a list")
    try:
        return validate_messages(messages)
    except InvalidInput as exc:
        raise InvalidInput(f"{source}: {exc}") from None


def dump_transcript(
    messages: Sequence[Mapping[str, Any]],
    fmt: TranscriptFormat = "json",
    *,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Serialize ``messages`` in the given format (UTF-8 text, non-ASCII kept as is)."""
    if fmt == "jsonl":
        return "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages)
    if fmt == "object":
        return (
            json.dumps({**(extra or {}), "messages": list(messages)}, ensure_ascii=False, indent=2)
            + "\n"
        )
    return json.dumps(list(messages), ensure_ascii=False, indent=2) + "\n"
