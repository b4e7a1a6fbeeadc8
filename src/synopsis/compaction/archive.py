"""Archives: where compaction puts the messages it replaces, so nothing is lost.

An archive is any object with ``write(messages, *, session_id) -> str`` returning where the
messages went (a path or URI that the summary then points to). The default appends them to a
JSONL transcript per session, which :func:`synopsis.transcripts.load_transcript` reads back.
An archive that also has ``path_for(session_id)`` (:class:`LocatedArchive`) says where a write
would go without writing, which a dry run shows (and quotes in its stand-in summary).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

from synopsis.errors import CompactionError
from synopsis.transcripts import json_line

__all__ = ["Archive", "JsonlArchive", "LocatedArchive", "MemoryArchive"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# Appending only (O_APPEND), never through a symlink (O_NOFOLLOW), not inherited by children.
_APPEND: Final = (
    os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)


@runtime_checkable
class Archive(Protocol):
    def write(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None) -> str: ...


@runtime_checkable
class LocatedArchive(Archive, Protocol):
    """An archive that knows, before writing, the path its ``write`` returns."""

    def path_for(self, session_id: str | None) -> Path: ...


class JsonlArchive:
    """Appends replaced messages to ``<directory>/<session_id>.jsonl`` (fsynced).

    A batch is appended whole or not at all: every message is serialized before the file is
    opened, and a failed write is rolled back (a file this write created is removed). An
    archive file that is a symbolic link is refused, so messages never land in a file the
    link was pointed at. Any failure is a :class:`~synopsis.errors.CompactionError`.
    """

    def __init__(self, directory: str | Path = ".synopsis/archive") -> None:
        self.directory = Path(directory)

    def path_for(self, session_id: str | None) -> Path:
        name = _UNSAFE.sub("_", session_id or "session").strip("._") or "session"
        return self.directory / f"{name}.jsonl"

    def write(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None) -> str:
        path = self.path_for(session_id)
        data = _encode(messages, path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _append(path, data)
        except OSError as exc:
            if path.is_symlink():
                raise CompactionError(
                    f"refusing to archive replaced messages to {path}: it is a symbolic link"
                ) from exc
            raise CompactionError(f"cannot archive replaced messages to {path}: {exc}") from exc
        return str(path)


def _encode(messages: Sequence[Mapping[str, Any]], path: Path) -> bytes:
    """All lines of the batch as UTF-8, or a CompactionError naming the message that failed."""
    lines = []
    for index, message in enumerate(messages):
        try:
            lines.append((json_line(dict(message)) + "\n").encode("utf-8"))
        except (TypeError, ValueError, RecursionError) as exc:
            raise CompactionError(
                f"cannot archive replaced message {index} to {path}: {exc}"
            ) from exc
    return b"".join(lines)


def _append(path: Path, data: bytes) -> None:
    descriptor, created = _open_for_append(path)
    try:
        size = os.fstat(descriptor).st_size
        try:
            _write_all(descriptor, data)
            os.fsync(descriptor)
        except BaseException:
            with contextlib.suppress(OSError):
                if created:
                    os.unlink(path)
                else:
                    os.ftruncate(descriptor, size)
            raise
    finally:
        os.close(descriptor)


def _open_for_append(path: Path) -> tuple[int, bool]:
    """An append-only descriptor of ``path``, and whether this call created the file."""
    try:
        return os.open(path, _APPEND | os.O_CREAT | os.O_EXCL, 0o666), True
    except FileExistsError:  # also for a symlink, which the O_NOFOLLOW open then refuses
        return os.open(path, _APPEND), False


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(descriptor, view)
        view = view[written:]


class MemoryArchive:
    """Keeps archived batches in memory (for tests and short-lived processes)."""

    def __init__(self) -> None:
        self.batches: list[tuple[str | None, list[dict[str, Any]]]] = []

    def write(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None) -> str:
        self.batches.append((session_id, [dict(m) for m in messages]))
        return f"memory://archive/{session_id or 'session'}/{len(self.batches)}"
