"""Wrappers that are models: a retrying model and a failover chain, sync and async.

Each satisfies the model protocol it wraps, so they stack in any order with any other wrapper
(a compacting model, a provider model). The retry and failover decisions live in
:mod:`synopsis.models.retry`; these classes only bind them to ``complete()``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from synopsis.errors import AllModelsFailed, ConfigError, InvalidSummary
from synopsis.models._base import AsyncModel, Model, ModelResponse, ModelSettings
from synopsis.models.retry import (
    AsyncSleep,
    AttemptRecord,
    Clock,
    Cooldown,
    RetryPolicy,
    Sleep,
    arun_with_failover,
    model_name,
    run_with_failover,
)

__all__ = [
    "AsyncFailoverModel",
    "AsyncRetryingModel",
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


class _Options:
    """Options shared by the wrappers; kept in one place so the four stay in step."""

    def __init__(
        self,
        policy: RetryPolicy,
        validate: Validator | None,
        on_attempt: Callable[[AttemptRecord], None] | None,
        clock: Clock,
        rng: random.Random | None,
        cooldown: Cooldown | None,
    ) -> None:
        self.policy, self.validate, self.on_attempt = policy, validate, on_attempt
        self.clock, self.rng, self.cooldown = clock, rng, cooldown

    def driver_kwargs(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "on_attempt": self.on_attempt,
            "clock": self.clock,
            "rng": self.rng,
            "cooldown": self.cooldown,
        }


def _sole_failure(group: AllModelsFailed) -> Exception:
    # A one-model chain reports its RetryExhausted directly, not wrapped in a group of one.
    return group.exceptions[0] if len(group.exceptions) == 1 else group


class FailoverModel:
    """A chain of models tried in order, each with its own retries; itself a :class:`Model`.

    ``validate(response)`` may raise :class:`~synopsis.errors.InvalidSummary` to reject a
    response (then retried). All failing raises :class:`~synopsis.errors.AllModelsFailed`.
    """

    def __init__(
        self,
        *models: Model,
        policy: RetryPolicy = RetryPolicy(),
        sleep: Sleep = time.sleep,
        validate: Validator | None = None,
        on_attempt: Callable[[AttemptRecord], None] | None = None,
        clock: Clock = time.monotonic,
        rng: random.Random | None = None,
        cooldown: Cooldown | None = None,
    ) -> None:
        if not models:
            raise ConfigError("FailoverModel needs at least one model")
        self.models = tuple(models)
        self._sleep = sleep
        self._options = _Options(policy, validate, on_attempt, clock, rng, cooldown)

    @property
    def name(self) -> str:
        return "failover:" + ",".join(model_name(m) for m in self.models)

    @property
    def context_window(self) -> int | None:
        """The smallest window of the chain: a request must fit whichever model answers."""
        windows = [getattr(m, "context_window", None) for m in self.models]
        known = [w for w in windows if isinstance(w, int)]
        return min(known) if known else None

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        def call(model: Model) -> ModelResponse:
            response = model.complete(messages, settings=settings)
            return _validated(self._options.validate, response)

        result = run_with_failover(
            self.models, call, sleep=self._sleep, **self._options.driver_kwargs()
        )
        return result.value


class RetryingModel(FailoverModel):
    """One model with retries; itself a :class:`Model`. Raises RetryExhausted when it gives up."""

    def __init__(
        self,
        model: Model,
        *,
        policy: RetryPolicy = RetryPolicy(),
        sleep: Sleep = time.sleep,
        validate: Validator | None = None,
        on_attempt: Callable[[AttemptRecord], None] | None = None,
        clock: Clock = time.monotonic,
        rng: random.Random | None = None,
        cooldown: Cooldown | None = None,
    ) -> None:
        super().__init__(
            model, policy=policy, sleep=sleep, validate=validate, on_attempt=on_attempt,
            clock=clock, rng=rng, cooldown=cooldown,
        )  # fmt: skip

    @property
    def name(self) -> str:
        return model_name(self.models[0])

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        try:
            return super().complete(messages, settings=settings)
        except AllModelsFailed as group:
            raise _sole_failure(group) from None


class AsyncFailoverModel:
    """The async twin of :class:`FailoverModel`; itself an :class:`AsyncModel`."""

    def __init__(
        self,
        *models: AsyncModel,
        policy: RetryPolicy = RetryPolicy(),
        sleep: AsyncSleep = asyncio.sleep,
        validate: Validator | None = None,
        on_attempt: Callable[[AttemptRecord], None] | None = None,
        clock: Clock = time.monotonic,
        rng: random.Random | None = None,
        cooldown: Cooldown | None = None,
    ) -> None:
        if not models:
            raise ConfigError("AsyncFailoverModel needs at least one model")
        self.models = tuple(models)
        self._sleep = sleep
        self._options = _Options(policy, validate, on_attempt, clock, rng, cooldown)

    @property
    def name(self) -> str:
        return "failover:" + ",".join(model_name(m) for m in self.models)

    @property
    def context_window(self) -> int | None:
        """The smallest window of the chain: a request must fit whichever model answers."""
        windows = [getattr(m, "context_window", None) for m in self.models]
        known = [w for w in windows if isinstance(w, int)]
        return min(known) if known else None

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        async def call(model: AsyncModel) -> ModelResponse:
            response = await model.complete(messages, settings=settings)
            return _validated(self._options.validate, response)

        result = await arun_with_failover(
            self.models, call, sleep=self._sleep, **self._options.driver_kwargs()
        )
        return result.value


class AsyncRetryingModel(AsyncFailoverModel):
    """The async twin of :class:`RetryingModel`."""

    def __init__(
        self,
        model: AsyncModel,
        *,
        policy: RetryPolicy = RetryPolicy(),
        sleep: AsyncSleep = asyncio.sleep,
        validate: Validator | None = None,
        on_attempt: Callable[[AttemptRecord], None] | None = None,
        clock: Clock = time.monotonic,
        rng: random.Random | None = None,
        cooldown: Cooldown | None = None,
    ) -> None:
        super().__init__(
            model, policy=policy, sleep=sleep, validate=validate, on_attempt=on_attempt,
            clock=clock, rng=rng, cooldown=cooldown,
        )  # fmt: skip

    @property
    def name(self) -> str:
        return model_name(self.models[0])

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        try:
            return await super().complete(messages, settings=settings)
        except AllModelsFailed as group:
            raise _sole_failure(group) from None
