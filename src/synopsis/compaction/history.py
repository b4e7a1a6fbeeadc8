"""``search_history``: the archive of a session as a tool the agent can call.

What compaction replaced is archived (:mod:`.archive`); :class:`HistoryTool` lets the agent
search it. It is framework-neutral: a name, a description written for a model, a JSON schema
of its arguments, and ``run`` / ``arun`` returning the answer as text, bounded in size. The
adapters wrap it in their framework's tool type (``search_history_tool`` in
:mod:`synopsis.adapters.langchain`, ``.langgraph``, ``.pydantic_ai`` and ``.openai_agents``);
:meth:`HistoryTool.openai_tool` and :meth:`HistoryTool.answer` serve a hand-written loop over
chat-completions tool calls (as with :class:`~synopsis.CompactingModel`).

:func:`history_tool` builds it from a compactor: the compactor's archive (which must be
searchable) and session, and it makes the compactor's summaries name the tool, so the agent
is told, where the summary points to the archive, that it can search it.

The answer lists the hits best first, each as ``[n] role (message #position, dated D): text``
(the dated heading in force where it was archived, when there was one) and the
``neighbours`` archived messages either side of it (``just before`` / ``just after``), every
message clipped to ``message_chars`` and the whole answer to ``max_chars`` characters, so a
search can never flood the context it was meant to spare. Pure but for the archive call.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from synopsis.compaction.archive import (
    MAX_NEIGHBOURS,
    MAX_SEARCH_LIMIT,
    ArchiveHit,
    AsyncSearchableArchive,
    SearchableArchive,
    check_search,
)
from synopsis.errors import ConfigError, InvalidInput
from synopsis.messages import text_of

if TYPE_CHECKING:
    from synopsis.compaction.compactor import AsyncCompactor, Compactor

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_NEIGHBOURS",
    "DESCRIPTION",
    "SEARCH_HISTORY",
    "HistoryTool",
    "format_hits",
    "history_tool",
]

#: The tool's default name.
SEARCH_HISTORY: Final = "search_history"
#: How many messages a call returns when the model does not say.
DEFAULT_LIMIT: Final = 5
#: Archived messages shown either side of each hit (when the archive can give them): a turn
#: is read with the question it answers. Chosen on LoCoMo half A (docs/results/recall.md).
DEFAULT_NEIGHBOURS: Final = 1
DESCRIPTION: Final = (
    "Search the earlier part of this conversation that was compacted away (replaced by a "
    "summary to save space). Use it whenever you need an exact detail the summary does not "
    "give: a name, number, date, file path, command, error message, or what someone said. "
    "Pass a few distinctive keywords rather than a whole question (for example "
    "'flight number Lisbon', not 'what was the flight number?'); words in any language work. "
    "It returns the best-matching archived messages, best first, each with its role and its "
    "position in the archive. If nothing useful comes back, search again with other words."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryTool:
    """A session's archive as a tool (see the module docstring)."""

    archive: SearchableArchive | AsyncSearchableArchive
    session_id: str | None
    name: str = SEARCH_HISTORY
    description: str = DESCRIPTION
    #: Messages returned when a call gives no ``limit``.
    default_limit: int = DEFAULT_LIMIT
    #: The most characters of one message an answer quotes.
    message_chars: int = 1_000
    #: The most characters of one answer.
    max_chars: int = 6_000
    #: Archived messages shown either side of each hit (0: the hits alone); an archive whose
    #: ``search`` takes no ``neighbours`` shows the hits alone.
    neighbours: int = DEFAULT_NEIGHBOURS

    def __post_init__(self) -> None:
        if not callable(getattr(self.archive, "search", None)):
            raise ConfigError(
                f"a {type(self.archive).__name__} cannot be searched: give the compactor a "
                "JsonlArchive, a MemoryArchive or a StoreArchive"
            )
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError("the tool needs a name")
        if isinstance(self.neighbours, bool) or self.neighbours not in range(MAX_NEIGHBOURS + 1):
            raise ConfigError(f"neighbours must be an integer from 0 to {MAX_NEIGHBOURS}")
        for option in ("default_limit", "message_chars", "max_chars"):
            value = getattr(self, option)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{option} must be a positive integer, got {value!r}")
        if self.default_limit > MAX_SEARCH_LIMIT:
            raise ConfigError(f"default_limit must be at most {MAX_SEARCH_LIMIT}")

    @property
    def is_async(self) -> bool:
        """Whether the archive is searched with await (then only :meth:`arun` works)."""
        return inspect.iscoroutinefunction(self.archive.search)

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments."""
        return {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "A few distinctive keywords to look for in the archived "
                    "messages, e.g. 'invoice number March' or '断桥 门票'.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_SEARCH_LIMIT,
                    "description": f"How many messages to return (default {self.default_limit}).",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        }

    def openai_tool(self) -> dict[str, Any]:
        """The tool in the chat-completions ``tools`` format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def run(self, query: str, limit: int | None = None) -> str:
        """Search the archive; the answer as text. Bad arguments raise InvalidInput."""
        if self.is_async:
            raise ConfigError(
                f"the {type(self.archive).__name__} is searched with await: call arun()"
            )
        query, limit = check_search(query, self.default_limit if limit is None else limit)
        archive: Any = self.archive
        hits = archive.search(query, session_id=self.session_id, limit=limit, **self._around())
        return self._answer(query, hits)

    async def arun(self, query: str, limit: int | None = None) -> str:
        """The async twin of :meth:`run` (a sync archive is searched in a worker thread)."""
        query, limit = check_search(query, self.default_limit if limit is None else limit)
        archive: Any = self.archive
        around = self._around()
        if self.is_async:
            hits = await archive.search(query, session_id=self.session_id, limit=limit, **around)
        else:
            hits = await asyncio.to_thread(
                archive.search, query, session_id=self.session_id, limit=limit, **around
            )
        return self._answer(query, hits)

    def answer(self, call: Mapping[str, Any]) -> dict[str, Any]:
        """The tool message answering a chat-completions tool call of this tool.

        Arguments that are not valid give an answer saying what is wrong (``Error: ...``),
        for the model to correct its call, rather than an exception.
        """
        try:
            query, limit = self.arguments(call)
            content = self.run(query, limit)
        except InvalidInput as exc:
            content = f"Error: {exc}"
        return {"role": "tool", "tool_call_id": str(call.get("id", "")), "content": content}

    async def aanswer(self, call: Mapping[str, Any]) -> dict[str, Any]:
        """The async twin of :meth:`answer`."""
        try:
            query, limit = self.arguments(call)
            content = await self.arun(query, limit)
        except InvalidInput as exc:
            content = f"Error: {exc}"
        return {"role": "tool", "tool_call_id": str(call.get("id", "")), "content": content}

    def arguments(self, call: Mapping[str, Any]) -> tuple[str, int | None]:
        """``(query, limit)`` of a chat-completions tool call, or InvalidInput."""
        function = call.get("function")
        raw = function.get("arguments") if isinstance(function, Mapping) else None
        try:
            values = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"the arguments are not JSON ({exc.msg})") from None
        if not isinstance(values, Mapping):
            raise InvalidInput('the arguments must be an object such as {"query": "..."}')
        unknown = sorted(set(values) - {"query", "limit"})
        if unknown:
            raise InvalidInput(f"unknown argument {unknown[0]!r}: give query (and limit)")
        limit = values.get("limit")
        query, _ = check_search(values.get("query"), self.default_limit if limit is None else limit)
        return query, limit

    def _around(self) -> dict[str, int]:
        """``{"neighbours": N}`` when there are any to ask for and the archive takes them."""
        if not self.neighbours:
            return {}
        try:
            takes = "neighbours" in inspect.signature(self.archive.search).parameters
        except (TypeError, ValueError):
            takes = False
        return {"neighbours": self.neighbours} if takes else {}

    def _answer(self, query: str, hits: Sequence[ArchiveHit]) -> str:
        return format_hits(query, hits, message_chars=self.message_chars, max_chars=self.max_chars)


def format_hits(
    query: str, hits: Sequence[ArchiveHit], *, message_chars: int, max_chars: int
) -> str:
    """The tool's answer for ``hits``: one entry per message, clipped, within ``max_chars``."""
    if not hits:
        return (
            f"No archived message matches {_clip(query, 100)!r}. Try other or fewer keywords; "
            "only the compacted-away part of the conversation is searched."
        )
    lines = [f"Archived messages matching {_clip(query, 100)!r}, best first:"]
    budget = max(max_chars - _NOTE_CHARS, 0)
    used = len(lines[0])
    shown = 0
    # Positions already quoted: a neighbour that is a hit itself, or was shown, is not repeated.
    taken = {hit.position for hit in hits if hit.position is not None}
    for hit in hits:
        entry = _entry(shown + 1, hit, message_chars, taken)
        if used + 1 + len(entry) > budget:
            if shown == 0:
                lines.append(_clip(entry, max(budget - used - 1, 1)))
                shown = 1
            break
        lines.append(entry)
        used += 1 + len(entry)
        shown += 1
    if shown < len(hits):
        lines.append(f"({len(hits) - shown} more left out to keep this short; narrow the keywords)")
    return "\n".join(lines)


#: Room kept in an answer for the note saying how many hits were left out.
_NOTE_CHARS: Final = 70


def _entry(number: int, hit: ArchiveHit, message_chars: int, taken: set[int]) -> str:
    message = hit.message
    role = str(message.get("role", "message"))
    facts = [f"message #{hit.position}"] if hit.position is not None else []
    facts += [f"dated {hit.dated}"] if hit.dated else []
    where = f" ({', '.join(facts)})" if facts else ""
    text = " ".join(_message_text(message).split())
    lines = [f"[{number}] {role}{where}: {_clip(text, message_chars)}"]
    at = hit.position
    sides = (
        ("just before", hit.before, None if at is None else at - len(hit.before)),
        ("just after", hit.after, None if at is None else at + 1),
    )
    for side, around, first in sides:
        for offset, neighbour in enumerate(around):
            if first is not None:
                if first + offset in taken:
                    continue
                taken.add(first + offset)
            said = " ".join(_message_text(neighbour).split())
            who = str(neighbour.get("role", "message"))
            lines.append(f"    {side}, {who}: {_clip(said, message_chars // 2)}")
    return "\n".join(lines)


def _message_text(message: Mapping[str, Any]) -> str:
    parts = [text_of(message)]
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            parts.append(f"called {function.get('name', '')}({function.get('arguments', '')})")
    return " ".join(part for part in parts if part) or "(no text)"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def history_tool(
    compactor: Compactor | AsyncCompactor,
    *,
    name: str = SEARCH_HISTORY,
    description: str = DESCRIPTION,
    default_limit: int = DEFAULT_LIMIT,
    max_chars: int = 6_000,
) -> HistoryTool:
    """The compactor's archive as a tool, for the compactor's session.

    The compactor's summaries name the tool from now on (its options get
    ``history_tool=name``). A compactor without a searchable archive is a ConfigError.
    """
    archive = compactor.archive
    if archive is None:
        raise ConfigError(
            "the compactor has no archive to search: give it archive=... (a directory, a "
            "MemoryArchive or a StoreArchive)"
        )
    if not callable(getattr(archive, "search", None)):
        raise ConfigError(f"the compactor's {type(archive).__name__} cannot be searched")
    tool = HistoryTool(
        archive=archive,  # type: ignore[arg-type]  # checked just above
        session_id=compactor.session_id,
        name=name,
        description=description,
        default_limit=default_limit,
        max_chars=max_chars,
    )
    compactor.options = replace(compactor.options, history_tool=name)
    return tool
