"""The archive a bench strategy writes to, and the ``search_history`` an agent would call over it.

``BenchArchive`` keeps every message a strategy takes out of the context (tier 1's cleared
originals and the summarized part alike), in order. ``search(query, limit=10)`` returns the
archived messages that match, best first, ranked by synopsis's memory engine:

- when the library's ``MemoryArchive`` has a ``search`` (issue 23, item 4), the bench writes to
  one and asks it, so the figures are those of the shipped capability;
- until then the bench computes the same thing itself: each archived message is a memory of
  an in-memory store (its text, then each tool call's name and arguments), with the messages
  around it as its context (``ranking.neighbour_contexts``, as the stores do for turns), and
  a keyword search returns the messages of the top hits. The report says which one ran.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from synopsis.compaction.archive import MemoryArchive
from synopsis.memory import InMemoryStore, NewMemory
from synopsis.memory.ranking import neighbour_contexts
from synopsis.messages import is_internal, text_of

TENANT = "bench"
NAMESPACE = ("archive",)
LIBRARY_SEARCH = callable(getattr(MemoryArchive, "search", None))
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

    def search(self, query: str, *, limit: int = 10) -> list[dict[str, Any]]:
        if not self.messages or not query.strip():
            return []
        if self._library is not None:
            hits = self._library.search(query, session_id=None, limit=limit)
            return [dict(hit.message) for hit in hits]
        if self._store is None or self._indexed != len(self.messages):
            self._index()
        assert self._store is not None
        hits = self._store.search(TENANT, NAMESPACE, query=query, limit=limit)
        return [self.messages[int(hit.item.key)] for hit in hits]

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
