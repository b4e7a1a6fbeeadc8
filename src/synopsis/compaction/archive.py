"""Archives: where compaction puts the messages it replaces, so nothing is lost.

An archive is any object with ``write(messages, *, session_id) -> str`` returning where the
messages went (a path or URI that the summary then points to). The default appends them to a
JSONL transcript per session, which :func:`synopsis.transcripts.load_transcript` reads back.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from synopsis.errors import CompactionError

__all__ = ["Archive", "JsonlArchive", "MemoryArchive"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@runtime_checkable
class Archive(Protocol):
    def write(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None) -> str: ...


class JsonlArchive:
    """Appends replaced messages to ``<directory>/<session_id>.jsonl`` (fsynced)."""

    def __init__(self, directory: str | Path = ".synopsis/archive") -> None:
        self.directory = Path(directory)

    def path_for(self, session_id: str | None) -> Path:
        name = _UNSAFE.sub("_", session_id or "session").strip("._") or "session"
        return self.directory / f"{name}.jsonl"

    def write(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None) -> str:
        path = self.path_for(session_id)
        lines = "".join(json.dumps(dict(m), ensure_ascii=False) + "\n" for m in messages)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as handle:
                handle.write(lines)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise CompactionError(f"cannot archive replaced messages to {path}: {exc}") from exc
        return str(path)


class MemoryArchive:
    """Keeps archived batches in memory (for tests and short-lived processes)."""

    def __init__(self) -> None:
        self.batches: list[tuple[str | None, list[dict[str, Any]]]] = []

    def write(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None) -> str:
        self.batches.append((session_id, [dict(m) for m in messages]))
        return f"memory://archive/{session_id or 'session'}/{len(self.batches)}"
