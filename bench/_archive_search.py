"""The archive a bench strategy writes to, and the ``search_history`` an agent would call over it.

``BenchArchive`` keeps every message a strategy takes out of the context (tier 1's cleared
originals and the summarized part alike), in order. ``search(query, limit=10)`` returns the
archived messages that match, best first, ranked by synopsis's memory engine:

- when the library's ``MemoryArchive`` has a ``search`` (issue 23, item 4), the bench writes to
  one and asks it, so the figures are those of the shipped capability;
- each hit is shown with the dated heading in force where it was archived (``ArchiveHit.dated``,
  the date the session it belongs to opened with), as the tool's answer shows it: a line
  ``(dated ...)`` before the message's own lines (``SYNOPSIS_BENCH_UNDATED=1``: the message
  alone, as before, to compare); and with the ``NEIGHBOURS`` archived messages either side of
  it, as the tool shows them (``SYNOPSIS_BENCH_NEIGHBOURS=0``: the hits alone);
- until then the bench computes the same thing itself: each archived message is a memory of
  an in-memory store (its text, then each tool call's name and arguments), with the messages
  around it as its context (``ranking.neighbour_contexts``, as the stores do for turns), and
  a keyword search returns the messages of the top hits. The report says which one ran.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from synopsis.compaction.archive import MemoryArchive
from synopsis.compaction.history import DEFAULT_NEIGHBOURS
from synopsis.memory import InMemoryStore, NewMemory
from synopsis.memory.ranking import neighbour_contexts
from synopsis.messages import is_internal, text_of

TENANT = "bench"
NAMESPACE = ("archive",)
LIBRARY_SEARCH = callable(getattr(MemoryArchive, "search", None))
DATED = os.environ.get("SYNOPSIS_BENCH_UNDATED", "") != "1"
#: Archived messages either side of each hit, as the tool shows them (its default, unless
#: ``SYNOPSIS_BENCH_NEIGHBOURS=N``).
NEIGHBOURS = int(os.environ.get("SYNOPSIS_BENCH_NEIGHBOURS", DEFAULT_NEIGHBOURS))
SEARCH_SOURCE = (
    "synopsis MemoryArchive.search"
    if LIBRARY_SEARCH
    else "computed in the bench (memory engine over the archived messages, ±2 neighbours)"
)


def archived_text(message: Mapping[str, Any]) -> str:
    """The text a message is found by: its text, then each tool call's name and arguments."""
    parts = [text_of(message)]
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        parts.append(f"{function.get('name', '')}({function.get('arguments', '')})")
    return "\n".join(part for part in parts if part)


class BenchArchive:
    """Archived messages in order, searchable as an agent's ``search_history`` tool."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._library: Any = MemoryArchive() if LIBRARY_SEARCH else None
        self._store: InMemoryStore | None = None
        self._indexed = 0

    def write(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None) -> str:
        kept = [dict(m) for m in messages if not is_internal(m)]
        self.messages += kept
        if self._library is not None:
            return str(self._library.write(kept, session_id=session_id))
        return "memory://bench/archive"

    def search(self, query: str, *, session_id: str | None, limit: int = 10) -> list[Any]:
        """The library's archive search (the ``SearchableArchive`` protocol), for recall."""
        if self._library is None or not self.messages:
            return []
        return list(self._library.search(query, session_id=session_id, limit=limit))

    def found(self, query: str, *, limit: int = 10) -> list[dict[str, Any]]:
        """What the agent's ``search_history`` would show for ``query``: the hits' messages."""
        if not self.messages or not query.strip():
            return []
        if self._library is not None:
            hits = self._library.search(query, session_id=None, limit=limit, neighbours=NEIGHBOURS)
            shown: dict[int, dict[str, Any]] = {}  # by position: a message once, in order
            for hit in hits:
                at = hit.position
                around = [*hit.before, hit.message, *hit.after]
                for offset, message in enumerate(around, start=at - len(hit.before)):
                    shown.setdefault(offset, _shown(message, hit.dated))
            return list(shown.values())
        if self._store is None or self._indexed != len(self.messages):
            self._index()
        assert self._store is not None
        hits = self._store.search(TENANT, NAMESPACE, query=query, limit=limit)
        return [self.messages[int(hit.item.key)] for hit in hits]

    def mark(self) -> tuple[int, int]:
        """Where the archive stands now, to :meth:`rewind` to (a question's own call may
        compact and archive; the next question must not see that)."""
        batches = len(self._library.batches) if self._library is not None else 0
        return len(self.messages), batches

    def rewind(self, mark: tuple[int, int]) -> None:
        messages, batches = mark
        if len(self.messages) == messages:
            return
        del self.messages[messages:]
        if self._library is not None:  # a fresh archive of the batches kept (indexed anew)
            kept, self._library = self._library.batches[:batches], MemoryArchive()
            for session_id, batch in kept:
                self._library.write(batch, session_id=session_id)
        self._store = None

    def _index(self) -> None:
        texts = [archived_text(m) for m in self.messages]
        self._store = InMemoryStore()
        self._store.put_many(
            TENANT,
            [
                NewMemory(NAMESPACE, str(i), text, context=context)
                for i, (text, context) in enumerate(
                    zip(texts, neighbour_contexts(texts), strict=True)
                )
                if text.strip()
            ],
        )
        self._indexed = len(self.messages)


def _shown(message: Mapping[str, Any], dated: str | None) -> dict[str, Any]:
    """The hit as the tool's answer shows it: with its dated heading first, unless the
    message already says it."""
    shown = dict(message)
    text = text_of(message)
    if DATED and dated and dated not in text:
        shown["content"] = f"(dated {dated})\n{text}"
    return shown
