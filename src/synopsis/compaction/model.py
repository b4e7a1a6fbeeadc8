"""A model that compacts its input first, and once more when the provider says it is too long.

:class:`CompactingModel` and :class:`AsyncCompactingModel` satisfy the model protocol, so they
stack with retrying and failover models in any order. The policy is written once as a flow
(:func:`compacting_call`): run the compactor's before-model hook, call the model, and on
:class:`~synopsis.errors.ContextLengthExceeded` compact again (reason ``overflow``) and call
once more; when that compaction changes nothing the provider's error stands.

The wrapper remembers what it compacted (:class:`Conversation`): an agent loop appends turns to
its own, uncompacted list, and on the next call the compacted prefix stands in for the part it
already covers, so a conversation is summarized once per trigger crossing, not on every call.

:meth:`CompactingModel.search_history_tool` gives the agent loop the compactor's archive as a
``search_history`` tool: pass its :meth:`~synopsis.compaction.history.HistoryTool.openai_tool`
with the model's tools and answer the model's calls of it with
:meth:`~synopsis.compaction.history.HistoryTool.answer` (``aanswer`` for the async twin).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from synopsis._flow import Flow, adrive, drive
from synopsis.errors import ContextLengthExceeded
from synopsis.models import ModelResponse, ModelSettings

if TYPE_CHECKING:
    from synopsis.compaction.compactor import AsyncCompactor, Compactor
    from synopsis.compaction.history import HistoryTool

__all__ = [
    "AsyncCompactingModel",
    "CallModel",
    "CompactForModel",
    "CompactOverflow",
    "CompactingModel",
    "Conversation",
    "compacting_call",
]

Messages = Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class CompactForModel:
    """Run the compactor's before-model hook; the result is the history to send."""

    messages: Messages


@dataclass(frozen=True, slots=True)
class CompactOverflow:
    """Compact now because the provider refused the history; the result is a
    :class:`~synopsis.compaction.compactor.CompactionResult`."""

    messages: Messages


@dataclass(frozen=True, slots=True)
class CallModel:
    """Call the wrapped model; the result is its :class:`ModelResponse`."""

    messages: Messages
    settings: ModelSettings | None


ModelStep = CompactForModel | CompactOverflow | CallModel


def compacting_call(
    messages: Messages, settings: ModelSettings | None
) -> Flow[ModelStep, ModelResponse]:
    """Compact, call; on a context-length error compact again and call once more."""
    history = yield CompactForModel(messages)
    try:
        response: ModelResponse = yield CallModel(history, settings)
    except ContextLengthExceeded:
        result = yield CompactOverflow(history)
        if not result.compacted:
            raise
        response = yield CallModel(result.messages, settings)
    return response


@dataclass(frozen=True, slots=True)
class Conversation:
    """What a compacting model last compacted: the caller's messages (``original``) and the
    compacted history that stands in for them (``compacted``).

    Messages are compared by value, and a message is equal to itself: one the caller edits
    in place after a call is not noticed (append new messages instead, or ``reset()``).
    """

    original: tuple[Mapping[str, Any], ...] = ()
    compacted: tuple[dict[str, Any], ...] = ()

    def resume(self, messages: Messages) -> list[Mapping[str, Any]]:
        """The history to go on from: when ``messages`` extend ``original``, the compacted
        history plus only the new messages; otherwise ``messages`` as they are (a conversation
        this state does not cover, or one that already starts with the compacted history)."""
        size = len(self.original)
        if size and len(messages) >= size and list(messages[:size]) == list(self.original):
            return [*self.compacted, *messages[size:]]
        return list(messages)

    def after(self, messages: Messages, compacted: Sequence[Mapping[str, Any]]) -> Conversation:
        """The state once ``compacted`` stands in for the caller's ``messages``."""
        return Conversation(tuple(messages), tuple(dict(m) for m in compacted))


class _Wrapper:
    """What both wrappers share: the model, the compactor and the conversation so far."""

    model: Any
    _conversation: Conversation
    if TYPE_CHECKING:  # each twin declares its own, so get_type_hints reads only real names
        compactor: Compactor | AsyncCompactor

    def search_history_tool(self, **options: Any) -> HistoryTool:
        """The compactor's archive as a ``search_history`` tool (``options``: those of
        :func:`~synopsis.compaction.history.history_tool`); summaries name it from then on."""
        from synopsis.compaction.history import history_tool

        return history_tool(self.compactor, **options)

    @property
    def name(self) -> str:
        return str(getattr(self.model, "name", "model"))

    @property
    def history(self) -> list[dict[str, Any]]:
        """The conversation as it was last sent: compacted, and without the model's answer."""
        return [dict(m) for m in self._conversation.compacted]

    def reset(self) -> None:
        """Forget the conversation: the next call starts from the messages it is given."""
        self._conversation = Conversation()

    def _remember(self, caller: Messages, history: Sequence[Mapping[str, Any]]) -> None:
        self._conversation = self._conversation.after(caller, history)


class CompactingModel(_Wrapper):
    """A model that compacts its input first, and once more if the provider still answers
    "context length exceeded". It satisfies the Model protocol, so it stacks with others.

    ``history`` is the conversation as last sent (compacted); pass the agent's own growing
    list to every call and only the new messages are added to it. ``reset()`` forgets it.
    One instance serves one conversation at a time: a call whose messages do not extend the
    remembered ones starts over from them.
    """

    def __init__(self, model: Any, compactor: Compactor) -> None:
        self.model = model
        self.compactor: Compactor = compactor
        self._conversation = Conversation()

    def complete(
        self, messages: Messages, *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        history = self._conversation.resume(messages)
        return drive(compacting_call(history, settings), partial(self._perform, messages))

    def _perform(self, caller: Messages, step: ModelStep) -> Any:
        match step:
            case CompactForModel(messages):
                history = self.compactor(messages)
                self._remember(caller, history)
                return history
            case CompactOverflow(messages):
                result = self.compactor.compact(messages, reason="overflow")
                if result.compacted:
                    self._remember(caller, result.messages)
                return result
            case CallModel(messages, settings):
                return self.model.complete(messages, settings=settings)


class AsyncCompactingModel(_Wrapper):
    """The async twin of :class:`CompactingModel`."""

    def __init__(self, model: Any, compactor: AsyncCompactor) -> None:
        self.model = model
        self.compactor: AsyncCompactor = compactor
        self._conversation = Conversation()

    async def complete(
        self, messages: Messages, *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        history = self._conversation.resume(messages)
        return await adrive(compacting_call(history, settings), partial(self._perform, messages))

    async def _perform(self, caller: Messages, step: ModelStep) -> Any:
        match step:
            case CompactForModel(messages):
                history = await self.compactor(messages)
                self._remember(caller, history)
                return history
            case CompactOverflow(messages):
                result = await self.compactor.compact(messages, reason="overflow")
                if result.compacted:
                    self._remember(caller, result.messages)
                return result
            case CallModel(messages, settings):
                return await self.model.complete(messages, settings=settings)
