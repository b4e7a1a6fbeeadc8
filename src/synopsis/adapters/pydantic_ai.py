"""Pydantic AI: a history processor that compacts an agent's messages before each model request.

::

    from pydantic_ai import Agent
    from synopsis import AsyncCompactor
    from synopsis.adapters.pydantic_ai import compaction_capability

    compactor = AsyncCompactor(model="openai:gpt-4o-mini", trigger_tokens=100_000, keep_tail=8)
    agent = Agent("openai:gpt-4o", capabilities=[compaction_capability(compactor)])

:func:`history_processor` is the processor itself: Pydantic AI 1.x takes it as
``Agent(history_processors=[history_processor(compactor)])``; Pydantic AI 2 wraps processors
in its ``ProcessHistory`` capability, which :func:`compaction_capability` builds.

Pydantic AI runs the processor before every request of a run (tool-call rounds included) and
keeps what it returns as the run's history, so a compaction happens once, when the trigger
fires, and the next turn's ``message_history=result.all_messages()`` goes on from the summary.

The ``ModelMessage`` list is converted with :func:`synopsis.convert.from_pydantic_ai`: each
part becomes a message, tool calls keep their ids, and a response's ``usage`` is the token
counter's baseline. The compactor cuts only where no tool call is separated from its return.
Messages it keeps come back as the objects they were (timestamps, run ids, instructions), less
their ``usage``, which measured the longer history; the summary is a user prompt whose text
carries the ``<synopsis:summary>`` marker, so the next compaction folds it in as the previous
summary instead of quoting it as the user's words. Under the trigger the list is returned
untouched.

:func:`search_history_tool` gives the agent the compactor's archive as a ``search_history``
tool (``Agent(..., tools=[search_history_tool(compactor)])``); the summary's pointer to the
archive then names it. A bad call (an empty query) is sent back to the model to retry, as
Pydantic AI's ``ModelRetry`` does. Needs ``synopsis[pydantic-ai]``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, overload

from synopsis.adapters._carried import reattach, split_carried
from synopsis.compaction import AsyncCompactor, CompactionResult, Compactor
from synopsis.compaction.history import DESCRIPTION, SEARCH_HISTORY, history_tool
from synopsis.convert import from_pydantic_ai, to_pydantic_ai
from synopsis.errors import ConfigError, InvalidInput

if TYPE_CHECKING:
    from pydantic_ai import Tool
    from pydantic_ai.capabilities import ProcessHistory
    from pydantic_ai.messages import ModelMessage

__all__ = ["compaction_capability", "history_processor", "search_history_tool"]

SyncProcessor = Callable[[list["ModelMessage"]], list["ModelMessage"]]
AsyncProcessor = Callable[[list["ModelMessage"]], Awaitable[list["ModelMessage"]]]


@overload
def history_processor(compactor: Compactor) -> SyncProcessor: ...


@overload
def history_processor(compactor: AsyncCompactor) -> AsyncProcessor: ...


def history_processor(compactor: Compactor | AsyncCompactor) -> SyncProcessor | AsyncProcessor:
    """A processor for ``Agent(history_processors=[...])`` that compacts with ``compactor``.

    An :class:`AsyncCompactor` gives an async processor (awaited on the run's event loop); a
    :class:`Compactor` a plain function, which Pydantic AI runs in a worker thread.
    """
    if isinstance(compactor, AsyncCompactor):
        return _async_processor(compactor)
    if isinstance(compactor, Compactor):
        return _sync_processor(compactor)
    raise ConfigError(
        f"history_processor needs a Compactor or an AsyncCompactor, got {type(compactor).__name__}"
    )


def compaction_capability(compactor: Compactor | AsyncCompactor) -> ProcessHistory[Any]:
    """Pydantic AI 2's ``ProcessHistory`` capability running :func:`history_processor`."""
    try:
        from pydantic_ai.capabilities import ProcessHistory
    except ImportError as exc:  # Pydantic AI 1.x: no capabilities
        raise ConfigError(
            "this Pydantic AI has no capabilities: use "
            "Agent(history_processors=[history_processor(compactor)])"
        ) from exc
    return ProcessHistory(history_processor(compactor))


# The processors are annotated with ``list[Any]``: Pydantic AI reads their annotations at run
# time (to tell whether they take a RunContext), and ModelMessage is imported only for mypy.


def _sync_processor(compactor: Compactor) -> SyncProcessor:
    def compact_history(messages: list[Any]) -> list[Any]:
        ours = from_pydantic_ai(messages, keep_extras=True)
        plain, carried = split_carried(ours)
        result = compactor.compact(plain, force=False)
        return _framework_history(messages, result, plain, carried)

    return compact_history


def _async_processor(compactor: AsyncCompactor) -> AsyncProcessor:
    async def compact_history(messages: list[Any]) -> list[Any]:
        ours = from_pydantic_ai(messages, keep_extras=True)
        plain, carried = split_carried(ours)
        result = await compactor.compact(plain, force=False)
        return _framework_history(messages, result, plain, carried)

    return compact_history


def _framework_history(
    messages: list[Any],
    result: CompactionResult,
    plain: Sequence[dict[str, Any]],
    carried: Sequence[Any],
) -> list[Any]:
    """The history to send: the very list when nothing was compacted, else the new one."""
    if not result.compacted:
        return messages
    return to_pydantic_ai(reattach(result.messages, plain, carried))


def search_history_tool(
    compactor: Compactor | AsyncCompactor,
    *,
    name: str = SEARCH_HISTORY,
    description: str = DESCRIPTION,
    max_chars: int = 6_000,
) -> Tool[Any]:
    """A Pydantic AI tool searching what ``compactor`` archived of its session.

    The compactor's summaries name the tool from then on (see
    :func:`synopsis.compaction.history.history_tool`); its archive must be searchable.
    """
    from pydantic_ai import ModelRetry, Tool

    found = history_tool(compactor, name=name, description=description, max_chars=max_chars)

    async def search_history(query: str, limit: int | None = None) -> str:
        """Search the compacted-away part of the conversation.

        Args:
            query: A few distinctive keywords to look for in the archived messages.
            limit: How many messages to return (default 5, at most 100).
        """
        try:
            return await found.arun(query, limit)
        except InvalidInput as exc:
            raise ModelRetry(str(exc)) from exc

    return Tool(search_history, name=found.name, description=found.description, takes_ctx=False)
