"""Reading and writing transcripts: a JSON array, JSONL, or ``{"messages": [...]}``.

Loading validates every message (see :func:`synopsis.validation.validate_messages`) and reports
the first problem with its line or index. Dumping writes the same format that was read, so
``synopsis compact`` returns a file of the shape it was given.

JSON Lines are split on ``\\n`` only (a trailing ``\\r`` is dropped), and :func:`json_line`
escapes U+2028, U+2029 and U+0085: ``str.splitlines`` and many other readers break lines at
those characters, which ``json.dumps(..., ensure_ascii=False)`` leaves raw inside strings.
:func:`write_atomically` writes a file through a temporary file in the same directory, so a
failure never leaves it truncated.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from synopsis.errors import InvalidInput
from synopsis.validation import validate_messages

__all__ = [
    "Transcript",
    "TranscriptFormat",
    "dump_transcript",
    "json_line",
    "load_transcript",
    "parse_transcript",
    "split_json_lines",
    "write_atomically",
]

TranscriptFormat = Literal["json", "jsonl", "object"]

# Characters that end a line for str.splitlines (and JavaScript) but that JSON allows raw
# inside strings; every other such character is a control character json.dumps escapes.
_LINE_BREAKS_IN_STRINGS: Final = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"}


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
            value = _loads(text, source)
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


def _loads(text: str, where: str) -> Any:
    """``json.loads``; input nested too deeply or numbers too long for Python are InvalidInput.

    Malformed JSON still raises ``json.JSONDecodeError``, for the caller to word.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise InvalidInput(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        reason = str(exc).split(";")[0]
        raise InvalidInput(f"{where}: unreadable JSON value: {reason}") from None


def _load_json(text: str, source: str) -> Any:
    try:
        return _loads(text, source)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{source}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None


def split_json_lines(text: str) -> list[str]:
    """The lines of JSON Lines ``text``: split at ``\\n`` only, one trailing ``\\r`` dropped.

    Not ``str.splitlines``, which also breaks at U+2028, U+2029, U+0085 and other characters
    that JSON strings may hold raw.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _load_jsonl(text: str, source: str) -> list[Any]:
    messages: list[Any] = []
    for number, line in enumerate(split_json_lines(text), start=1):
        if not line.strip():
            continue
        where = f"{source}: line {number}"
        try:
            messages.append(_loads(line, where))
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{where}: malformed JSON: {exc.msg}") from None
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
        return "".join(json_line(m) + "\n" for m in messages)
    if fmt == "object":
        return (
            json.dumps({**(extra or {}), "messages": list(messages)}, ensure_ascii=False, indent=2)
            + "\n"
        )
    return json.dumps(list(messages), ensure_ascii=False, indent=2) + "\n"


def json_line(value: Any) -> str:
    """``value`` as one line of JSON Lines: non-ASCII kept, line-breaking characters escaped."""
    text = json.dumps(value, ensure_ascii=False)
    for raw, escaped in _LINE_BREAKS_IN_STRINGS.items():
        text = text.replace(raw, escaped)
    return text


def write_atomically(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` so that it holds either the old or the new content.

    The text goes to a temporary file in the same directory, is flushed to disk and then
    renamed over ``path``; on any failure the temporary file is removed and ``path`` is left
    as it was. A symlink is followed (its target is replaced, the link stays), an existing
    file keeps its permissions, and a device or pipe (``/dev/stdout``) is written directly,
    as renaming over it would replace the device itself.
    """
    data = text.encode("utf-8")  # fails before anything is touched
    target = os.path.realpath(path)
    try:
        existing: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        existing = None
    if existing is not None and (stat.S_ISCHR(existing.st_mode) or stat.S_ISFIFO(existing.st_mode)):
        with open(target, "wb") as handle:
            handle.write(data)
        return
    try:
        temporary, descriptor = _create_beside(target)
    except OSError as exc:  # name the file asked for, not the temporary one
        raise OSError(exc.errno, f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(descriptor, "wb") as handle:
            if existing is not None:
                os.chmod(handle.fileno(), stat.S_IMODE(existing.st_mode))
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _create_beside(target: str) -> tuple[str, int]:
    """A new, empty file next to ``target`` (created with the usual umask-based mode)."""
    directory, name = os.path.split(target)
    while True:
        temporary = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
            return temporary, os.open(temporary, flags, 0o666)
        except FileExistsError:
            continue
