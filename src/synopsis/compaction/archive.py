"""Archives: where compaction puts the messages it replaces, so nothing is lost.

An archive is any object with ``write(messages, *, session_id) -> str`` returning where the
messages went (a path or URI that the summary then points to). The default appends them to a
JSONL transcript per session, which :func:`synopsis.transcripts.load_transcript` reads back.

A :class:`SearchableArchive` can also be searched: ``search(query, *, session_id, limit=10)``
gives the session's archived messages that match, best first, as :class:`ArchiveHit` values.
The ranking is the memory engine's (:mod:`synopsis.memory.ranking`): BM25 over CJK-aware
terms, each message indexed with its neighbours (``CONTEXT_WINDOW`` messages either side) as
its context, and hybrid (keyword fused with vectors) when the archive has an embedder. The
two archives here index a session's messages in an in-memory store the first time it is
searched and add only what was written since on later searches; the archive over a memory
store (:mod:`synopsis.compaction.store_archive`) keeps them in the store itself.

An archive that also has ``path_for(session_id)`` (:class:`LocatedArchive`) says where a write
would go without writing, which a dry run shows (and quotes in its stand-in summary).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from synopsis.errors import CompactionError, InvalidInput
from synopsis.messages import text_of
from synopsis.transcripts import json_line, split_json_lines

if TYPE_CHECKING:
    # The search index loads the memory engine on first search, not with the compactor.
    from synopsis.memory import Embedder, InMemoryStore, SearchHit, SearchMode

__all__ = [
    "MAX_NEIGHBOURS",
    "MAX_SEARCH_LIMIT",
    "Archive",
    "ArchiveHit",
    "AsyncSearchableArchive",
    "JsonlArchive",
    "LocatedArchive",
    "MemoryArchive",
    "SearchableArchive",
    "archived_text",
    "check_neighbours",
    "check_search",
    "dated_headings",
    "search_messages",
]

#: The most messages one archive search returns.
MAX_SEARCH_LIMIT: Final = 100
#: The most archived messages either side of a hit a search may return with it.
MAX_NEIGHBOURS: Final = 5
#: A message that opens with a dated heading: a bracketed stamp (``[1:56 pm on 8 May, 2023]``)
#: or a short first line that is little more than a date (``Session 3 took place on 25 May,
#: 2023.``, ``2024-03-17``). What such a heading says dates the messages archived after it.
_STAMPED: Final = re.compile(r"\s*\[([^\]\n]{0,60}\b(?:19|20)\d\d\b[^\]\n]{0,20})\]")
_DAY_DATE: Final = re.compile(
    r"\b(?:\d{1,2}\s+[A-Z][a-z]{2,8}\.?,?\s+|[A-Z][a-z]{2,8}\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+)"
    r"(?:19|20)\d\d\b|\b(?:19|20)\d\d-[01]\d-[0-3]\d\b"
)
#: The most other words a dated heading has (a sentence that mentions a date is no heading).
_HEADING_WORDS: Final = 6
_PERSONAL: Final = frozenset({"I", "me", "my", "we", "our", "us", "you", "your"})
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# Appending only (O_APPEND), never through a symlink (O_NOFOLLOW), not inherited by children.
_APPEND: Final = (
    os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)


@runtime_checkable
class Archive(Protocol):
    def write(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None) -> str: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchiveHit:
    """One archived message a search found."""

    message: dict[str, Any]
    #: Higher is better (BM25 for keyword search, the fused score for hybrid).
    score: float
    #: The message's place among the session's archived messages (0 = archived first), when
    #: the archive knows it.
    position: int | None = None
    #: The dated heading in force where the message was archived (the date a session or log
    #: it belongs to opened with, see :func:`dated_headings`), when the archive saw one.
    dated: str | None = None
    #: With ``neighbours=N``: the archived messages just before and after it (at most N each,
    #: in order), so a turn is read with the ones that say what it answers.
    before: tuple[dict[str, Any], ...] = ()
    after: tuple[dict[str, Any], ...] = ()


@runtime_checkable
class SearchableArchive(Archive, Protocol):
    """An archive that can be searched (see the module docstring)."""

    def search(
        self, query: str, *, session_id: str | None, limit: int = 10
    ) -> list[ArchiveHit]: ...


@runtime_checkable
class AsyncSearchableArchive(Protocol):
    """The async twin of :class:`SearchableArchive`: ``write`` and ``search`` are awaited."""

    async def write(
        self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None
    ) -> str: ...

    async def search(
        self, query: str, *, session_id: str | None, limit: int = 10
    ) -> list[ArchiveHit]: ...


def check_search(query: object, limit: object) -> tuple[str, int]:
    """``(query, limit)`` if they make a search, else InvalidInput saying what is wrong."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("query must be a non-empty string of words to look for")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_SEARCH_LIMIT}")
    return query, limit


def check_neighbours(neighbours: object) -> int:
    """``neighbours`` if it is a valid count of messages either side of a hit, else InvalidInput."""
    if isinstance(neighbours, bool) or not isinstance(neighbours, int):
        raise InvalidInput(f"neighbours must be an integer from 0 to {MAX_NEIGHBOURS}")
    if not 0 <= neighbours <= MAX_NEIGHBOURS:
        raise InvalidInput(f"neighbours must be an integer from 0 to {MAX_NEIGHBOURS}")
    return neighbours


def archived_text(message: Mapping[str, Any]) -> str:
    """The text a message is found by: its text, then each tool call's name and arguments."""
    parts = [text_of(message)]
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            parts.append(f"{function.get('name', '')}({function.get('arguments', '')})")
    return "\n".join(part for part in parts if part)


def _heading(text: str) -> str | None:
    """The date ``text`` opens with, if it opens with a dated heading (see ``_STAMPED``)."""
    stamp = _STAMPED.match(text)
    if stamp:
        return stamp.group(1).strip()
    first = text.lstrip().split("\n", 1)[0].strip()
    found = _DAY_DATE.search(first) if len(first) <= 80 else None
    if found is None:
        return None
    others = re.findall(r"[^\W\d_]+", first[: found.start()] + " " + first[found.end() :])
    # A name or someone speaking makes it a sentence that mentions a date, not a heading.
    said = any(word[0].isupper() for word in others[1:]) or _PERSONAL & set(others)
    return first.rstrip(".") if len(others) <= _HEADING_WORDS and not said else None


def dated_headings(texts: Sequence[str], carried: str | None = None) -> list[str | None]:
    """For each archived text in order, the dated heading in force there: its own, else the
    last one before it (``carried``: the one in force before the first text)."""
    current = carried
    dated: list[str | None] = []
    for text in texts:
        current = _heading(text) or current
        dated.append(current)
    return dated


class _Index:
    """A session's archived messages in an in-memory store, ranked by the memory engine.

    ``extend`` adds messages archived after the ones already indexed; the last
    ``CONTEXT_WINDOW`` of those are indexed again, since their neighbours changed.
    """

    _TENANT: Final = "archive"
    _NAMESPACE: Final = ("archive",)

    def __init__(self, embedder: Embedder | None) -> None:
        from synopsis.memory import InMemoryStore

        self.store: InMemoryStore = InMemoryStore(embedder=embedder)
        self.mode: SearchMode = "keyword" if embedder is None else "hybrid"
        self.messages: list[dict[str, Any]] = []
        self.texts: list[str] = []
        self.dated: list[str | None] = []

    def extend(self, messages: Sequence[Mapping[str, Any]]) -> None:
        if not messages:
            return
        from synopsis.memory import NewMemory
        from synopsis.memory.ranking import CONTEXT_WINDOW, neighbour_contexts

        start = max(0, len(self.messages) - CONTEXT_WINDOW)
        self.messages.extend(dict(m) for m in messages)
        texts = [archived_text(m) for m in messages]
        self.texts.extend(texts)
        self.dated.extend(dated_headings(texts, self.dated[-1] if self.dated else None))
        window = self.texts[max(0, start - CONTEXT_WINDOW) :]
        contexts = neighbour_contexts(window)[start - max(0, start - CONTEXT_WINDOW) :]
        self.store.put_many(
            self._TENANT,
            [
                NewMemory(self._NAMESPACE, _key(position), self.texts[position], context=context)
                for position, context in enumerate(contexts, start=start)
            ],
        )

    def search(self, query: str, limit: int, neighbours: int = 0) -> list[ArchiveHit]:
        query, limit = check_search(query, limit)
        neighbours = check_neighbours(neighbours)
        hits = self.store.search(
            self._TENANT, self._NAMESPACE, query=query, limit=limit, mode=self.mode
        )
        return [self._hit(hit, neighbours) for hit in hits]

    def _hit(self, hit: SearchHit, neighbours: int) -> ArchiveHit:
        position = int(hit.item.key)
        return ArchiveHit(
            message=dict(self.messages[position]),
            score=hit.score or 0.0,
            position=position,
            dated=self.dated[position],
            before=tuple(dict(m) for m in self.messages[max(0, position - neighbours) : position]),
            after=tuple(dict(m) for m in self.messages[position + 1 : position + 1 + neighbours]),
        )


def _key(position: int) -> str:
    return f"{position:012d}"


def search_messages(
    messages: Sequence[Mapping[str, Any]],
    query: str,
    *,
    limit: int = 10,
    embedder: Embedder | None = None,
) -> list[ArchiveHit]:
    """``messages`` that match ``query``, best first, ranked as an archive ranks its own.

    Indexes them afresh on each call (O(len(messages))): for a history held elsewhere, such
    as the part of a stored session its summary covers.
    """
    check_search(query, limit)
    index = _Index(embedder)
    index.extend(messages)
    return index.search(query, limit)


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

    def __init__(
        self, directory: str | Path = ".synopsis/archive", *, embedder: Embedder | None = None
    ) -> None:
        self.directory = Path(directory)
        self.embedder = embedder
        self._lock = threading.Lock()
        #: Per archive file: the index and how many bytes of the file it holds.
        self._indexes: dict[Path, tuple[_Index, int]] = {}

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

    def search(
        self, query: str, *, session_id: str | None, limit: int = 10, neighbours: int = 0
    ) -> list[ArchiveHit]:
        """The session's archived messages that match ``query``, best first (at most ``limit``),
        each with up to ``neighbours`` archived messages either side (``before``/``after``).

        Reads only what was appended to the session's file since the last search. A file
        that shrank (rewritten by hand) is read again from the start. A line that is not a
        JSON object is an InvalidInput naming the file and line.
        """
        check_search(query, limit)
        path = self.path_for(session_id)
        with self._lock:
            index = self._index(path)
            return index.search(query, limit, neighbours)

    def _index(self, path: Path) -> _Index:
        index, read = self._indexes.get(path, (None, 0))
        try:
            with path.open("rb") as file:
                size = os.fstat(file.fileno()).st_size
                if index is None or size < read:
                    index, read = _Index(self.embedder), 0
                file.seek(read)
                data = file.read(size - read)
        except FileNotFoundError:
            return _Index(self.embedder)
        except OSError as exc:
            raise CompactionError(f"cannot read the archive {path}: {exc}") from exc
        complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits
        index.extend(_decode_lines(complete, path, first_line=len(index.messages) + 1))
        self._indexes[path] = (index, read + len(complete))
        return index


def _decode_lines(data: bytes, path: Path, *, first_line: int) -> list[dict[str, Any]]:
    messages = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path}: not valid UTF-8 (bad byte at offset {exc.start})") from None
    for number, line in enumerate(split_json_lines(text), start=first_line):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{path}, line {number}: not JSON ({exc.msg})") from None
        if not isinstance(value, dict):
            raise InvalidInput(f"{path}, line {number}: not a message (a JSON object)")
        messages.append(value)
    return messages


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

    def __init__(self, *, embedder: Embedder | None = None) -> None:
        self.batches: list[tuple[str | None, list[dict[str, Any]]]] = []
        self.embedder = embedder
        self._lock = threading.Lock()
        #: Per session: the index and how many batches it holds.
        self._indexes: dict[str | None, tuple[_Index, int]] = {}

    def write(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None) -> str:
        with self._lock:
            self.batches.append((session_id, [dict(m) for m in messages]))
            return f"memory://archive/{session_id or 'session'}/{len(self.batches)}"

    def search(
        self, query: str, *, session_id: str | None, limit: int = 10, neighbours: int = 0
    ) -> list[ArchiveHit]:
        """The session's archived messages that match ``query``, best first (at most ``limit``),
        each with up to ``neighbours`` archived messages either side (``before``/``after``)."""
        check_search(query, limit)
        with self._lock:
            index, seen = self._indexes.get(session_id) or (_Index(self.embedder), 0)
            for batch_session, batch in self.batches[seen:]:
                if batch_session == session_id:
                    index.extend(batch)
            self._indexes[session_id] = (index, len(self.batches))
            return index.search(query, limit, neighbours)
