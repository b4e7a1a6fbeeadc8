"""Wrappers that are models: a retrying model and a failover chain, sync and async.

Each satisfies the model protocol it wraps, so they stack in any order with any other wrapper
(a compacting model, a provider model). The retry and failover decisions live in
:func:`synopsis.models.retry.failover_flow`; ``_Chain`` binds that flow to one ``complete()``
request, and the four classes only choose how to drive it (sync or async).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, ClassVar, TypedDict, Unpack

from synopsis._flow import Flow, adrive, drive
from synopsis.errors import AllModelsFailed, ConfigError, InvalidSummary
from synopsis.models._base import AsyncModel, Model, ModelResponse, ModelSettings
from synopsis.models.limits import smallest
from synopsis.models.retry import (
    AsyncSleep,
    AttemptRecord,
    CallModel,
    Clock,
    Cooldown,
    FailoverResult,
    RetryPolicy,
    Sleep,
    aperform,
    failover_flow,
    model_name,
    perform,
)

__all__ = [
    "AsyncFailoverModel",
    "AsyncRetryingModel",
    "ChainOptions",
    "FailoverModel",
    "RetryingModel",
    "Validator",
    "require_text",
]

Validator = Callable[[ModelResponse], object]


def require_text(response: ModelResponse) -> ModelResponse:
    """Reject a response that calls tools or has no text (raises InvalidSummary)."""
    if response.tool_calls:
        raise InvalidSummary("the model called a tool instead of answering", model=response.model)
    if not response.text.strip():
        raise InvalidSummary("the model returned an empty answer", model=response.model)
    return response


def _validated(validate: Validator | None, response: ModelResponse) -> ModelResponse:
    if validate is not None:
        validate(response)
    return response


def _sole_failure(group: AllModelsFailed) -> Exception:
    # A one-model chain reports its RetryExhausted directly, not wrapped in a group of one.
    return group.exceptions[0] if len(group.exceptions) == 1 else group


def _unwrapped(flow: Flow[Any, FailoverResult[ModelResponse]]) -> Flow[Any, ModelResponse]:
    return (yield from flow).value


def _sole(flow: Flow[Any, ModelResponse]) -> Flow[Any, ModelResponse]:
    try:
        return (yield from flow)
    except AllModelsFailed as group:
        raise _sole_failure(group) from None


class ChainOptions(TypedDict, total=False):
    """The options every wrapper takes (defaults on ``_Chain``), declared once for the four.

    ``policy`` retries each model; ``validate(response)`` may raise
    :class:`~synopsis.errors.InvalidSummary` to have a response retried; ``on_attempt`` sees
    every attempt; ``cooldown`` refuses calls after repeated complete failures.
    """

    policy: RetryPolicy
    validate: Validator | None
    on_attempt: Callable[[AttemptRecord], None] | None
    clock: Clock
    rng: random.Random | None
    cooldown: Cooldown | None


class _Chain:
    """Everything the wrappers share: the models, the options, and the flow of a call.

    A retrying model is a chain of one (``_lone``): it is named after its model and reports
    that model's :class:`~synopsis.errors.RetryExhausted` rather than a group of one.
    """

    _lone: ClassVar[bool] = False

    def __init__(
        self,
        models: Sequence[Any],
        *,
        sleep: Any,
        policy: RetryPolicy = RetryPolicy(),
        validate: Validator | None = None,
        on_attempt: Callable[[AttemptRecord], None] | None = None,
        clock: Clock = time.monotonic,
        rng: random.Random | None = None,
        cooldown: Cooldown | None = None,
    ) -> None:
        if not models:
            raise ConfigError(f"{type(self).__name__} needs at least one model")
        self.models = tuple(models)
        self._policy, self._validate, self._rng, self._cooldown = policy, validate, rng, cooldown
        self._effects = {"sleep": sleep, "clock": clock, "on_attempt": on_attempt}

    @property
    def name(self) -> str:
        if self._lone:
            return model_name(self.models[0])
        return "failover:" + ",".join(model_name(m) for m in self.models)

    @property
    def context_window(self) -> int | None:
        """The smallest window of the chain: a request must fit whichever model answers."""
        return smallest(getattr(m, "context_window", None) for m in self.models)

    @property
    def max_output_tokens(self) -> int | None:
        """The smallest output limit of the chain, for the same reason."""
        return smallest(getattr(m, "max_output_tokens", None) for m in self.models)

    def _flow(
        self, messages: Sequence[Mapping[str, Any]], settings: ModelSettings | None
    ) -> Flow[Any, ModelResponse]:
        chain = failover_flow(
            self.models,
            partial(CallModel, messages=messages, settings=settings),
            policy=self._policy,
            rng=self._rng or random.Random(),
            cooldown=self._cooldown,
            check=partial(_validated, self._validate),
        )
        return _sole(_unwrapped(chain)) if self._lone else _unwrapped(chain)


class FailoverModel(_Chain):
    """A chain of models tried in order, each with its own retries; itself a :class:`Model`.

    ``validate(response)`` may raise :class:`~synopsis.errors.InvalidSummary` to reject a
    response (then retried). All failing raises :class:`~synopsis.errors.AllModelsFailed`.
    """

    def __init__(
        self,
        *models: Model,
        sleep: Sleep = time.sleep,
        **options: Unpack[ChainOptions],
    ) -> None:
        super().__init__(models, sleep=sleep, **options)

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        return drive(self._flow(messages, settings), partial(perform, **self._effects))


class RetryingModel(FailoverModel):
    """One model with retries; itself a :class:`Model`. Raises RetryExhausted when it gives up."""

    def __init__(
        self,
        model: Model,
        *,
        sleep: Sleep = time.sleep,
        **options: Unpack[ChainOptions],
    ) -> None:
        super().__init__(model, sleep=sleep, **options)

    _lone = True


class AsyncFailoverModel(_Chain):
    """The async twin of :class:`FailoverModel`; itself an :class:`AsyncModel`."""

    def __init__(
        self,
        *models: AsyncModel,
        sleep: AsyncSleep = asyncio.sleep,
        **options: Unpack[ChainOptions],
    ) -> None:
        super().__init__(models, sleep=sleep, **options)

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        return await adrive(self._flow(messages, settings), partial(aperform, **self._effects))


class AsyncRetryingModel(AsyncFailoverModel):
    """The async twin of :class:`RetryingModel`."""

    def __init__(
        self,
        model: AsyncModel,
        *,
        sleep: AsyncSleep = asyncio.sleep,
        **options: Unpack[ChainOptions],
    ) -> None:
        super().__init__(model, sleep=sleep, **options)

    _lone = True
