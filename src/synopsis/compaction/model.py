"""A model that compacts its input first, and once more when the provider says it is too long.

:class:`CompactingModel` and :class:`AsyncCompactingModel` satisfy the model protocol, so they
stack with retrying and failover models in any order. The policy is written once as a flow
(:func:`compacting_call`): run the compactor's before-model hook, call the model, and on
:class:`~synopsis.errors.ContextLengthExceeded` compact again (reason ``overflow``) and call
once more; when that compaction changes nothing the provider's error stands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from synopsis._flow import Flow, adrive, drive
from synopsis.errors import ContextLengthExceeded
from synopsis.models._base import ModelResponse, ModelSettings

if TYPE_CHECKING:
    from synopsis.compaction.compactor import AsyncCompactor, Compactor

__all__ = [
    "AsyncCompactingModel",
    "CallModel",
    "CompactForModel",
    "CompactOverflow",
    "CompactingModel",
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


class _Wrapper:
    model: Any

    @property
    def name(self) -> str:
        return str(getattr(self.model, "name", "model"))


class CompactingModel(_Wrapper):
    """A model that compacts its input first, and once more if the provider still answers
    "context length exceeded". It satisfies the Model protocol, so it stacks with others."""

    def __init__(self, model: Any, compactor: Compactor) -> None:
        self.model = model
        self.compactor = compactor

    def complete(
        self, messages: Messages, *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        return drive(compacting_call(messages, settings), self._perform)

    def _perform(self, step: ModelStep) -> Any:
        match step:
            case CompactForModel(messages):
                return self.compactor(messages)
            case CompactOverflow(messages):
                return self.compactor.compact(messages, reason="overflow")
            case CallModel(messages, settings):
                return self.model.complete(messages, settings=settings)


class AsyncCompactingModel(_Wrapper):
    """The async twin of :class:`CompactingModel`."""

    def __init__(self, model: Any, compactor: AsyncCompactor) -> None:
        self.model = model
        self.compactor = compactor

    async def complete(
        self, messages: Messages, *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        return await adrive(compacting_call(messages, settings), self._perform)

    async def _perform(self, step: ModelStep) -> Any:
        match step:
            case CompactForModel(messages):
                return await self.compactor(messages)
            case CompactOverflow(messages):
                return await self.compactor.compact(messages, reason="overflow")
            case CallModel(messages, settings):
                return await self.model.complete(messages, settings=settings)
