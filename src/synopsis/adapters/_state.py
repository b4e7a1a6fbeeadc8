"""Compaction of a LangGraph message state: shared by the LangChain middleware and the hook.

The state's messages go to the compactor as our message dicts
(:func:`synopsis.convert.from_langchain`: tool calls and their ids, ``usage_metadata`` as the
provider-reported ``usage`` the token counter takes as its baseline, content blocks as parts).
What comes back is matched against them in order:

- a message the compactor kept is the state's own object, so its id, class, tool ``status``,
  ``artifact`` and metadata survive untouched; only an AI message loses ``usage_metadata``,
  as the compactor's kept messages lose ``usage`` (that number measured the longer prompt, and
  the next count would take the old size for the new one);
- a message the compactor wrote (the summary, preserved skills, a truncation notice) is
  converted with :func:`synopsis.convert.to_langchain`; its marker is in its text, so it is
  recognized again on the next call.

The state update replaces the whole list (``RemoveMessage(REMOVE_ALL_MESSAGES)`` first), as
LangChain's own summarization middleware does. A sync :class:`~synopsis.Compactor` also
serves async runs (in a worker thread); an :class:`~synopsis.AsyncCompactor` serves only
async runs, since a sync run cannot await it without starting an event loop of its own.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from synopsis.convert import from_langchain, to_langchain
from synopsis.errors import ConfigError

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from synopsis.compaction.compactor import AsyncCompactor, CompactionResult, Compactor

__all__ = ["acompact_messages", "check_compactor", "compact_messages", "replace_all"]

#: What the compactor drops from the messages it keeps (see ``compaction._flow._kept``).
_DROPPED_WHEN_KEPT = frozenset({"meta", "usage"})


def check_compactor(compactor: object) -> None:
    """Fail at construction, not on the first model call, when ``compactor`` cannot compact."""
    if not callable(getattr(compactor, "compact", None)):
        raise ConfigError(
            f"expected a Compactor or an AsyncCompactor, got {type(compactor).__name__}"
        )


def is_async(compactor: Compactor | AsyncCompactor) -> bool:
    """Whether ``compactor.compact`` must be awaited."""
    return inspect.iscoroutinefunction(compactor.compact)


def compact_messages(
    compactor: Compactor | AsyncCompactor, messages: Sequence[BaseMessage]
) -> list[BaseMessage] | None:
    """The state's new message list if the trigger fired and a compaction happened, else None."""
    if is_async(compactor):
        raise ConfigError(
            "an AsyncCompactor needs the agent's async API (ainvoke, astream); "
            "give a Compactor to run the agent with invoke or stream"
        )
    history = from_langchain(messages)
    result = cast("Compactor", compactor).compact(history, force=False)
    return rebuilt(messages, history, result)


async def acompact_messages(
    compactor: Compactor | AsyncCompactor, messages: Sequence[BaseMessage]
) -> list[BaseMessage] | None:
    """The async twin of :func:`compact_messages`; a sync compactor runs in a worker thread."""
    history = from_langchain(messages)
    if is_async(compactor):
        result = await cast("AsyncCompactor", compactor).compact(history, force=False)
    else:
        compact = cast("Compactor", compactor).compact
        result = await asyncio.to_thread(compact, history, force=False)
    return rebuilt(messages, history, result)


def rebuilt(
    originals: Sequence[BaseMessage],
    history: Sequence[Mapping[str, Any]],
    result: CompactionResult,
) -> list[BaseMessage] | None:
    """LangChain messages for ``result.messages``: the originals where the compactor kept one.

    ``history`` is ``originals`` converted. The compactor keeps messages in order, so one
    forward walk finds each kept message; anything else it wrote is converted anew.
    """
    if not result.compacted:
        return None
    messages: list[BaseMessage] = []
    start = 0
    for message in result.messages:
        found = _find_kept(history, start, message)
        if found is None:
            messages.extend(to_langchain([message]))
        else:
            messages.append(_without_usage(originals[found]))
            start = found + 1
    return messages


def _find_kept(
    history: Sequence[Mapping[str, Any]], start: int, message: Mapping[str, Any]
) -> int | None:
    for index in range(start, len(history)):
        if _as_kept(history[index]) == message:
            return index
    return None


def _as_kept(message: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in _DROPPED_WHEN_KEPT}


def _without_usage(message: BaseMessage) -> BaseMessage:
    if getattr(message, "usage_metadata", None) is None:
        return message
    return message.model_copy(update={"usage_metadata": None})


def replace_all(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """The state update that replaces the whole message list with ``messages``."""
    from langchain_core.messages import RemoveMessage
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]}
