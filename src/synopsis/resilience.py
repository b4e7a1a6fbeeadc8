"""Retry, failover and cooldown for model calls, on top of tenacity.

The pieces, from small to large:

- :class:`RetryPolicy` says *whether* to retry an error and *how long* to wait (exponential
  backoff with jitter, capped, honouring a provider's ``Retry-After``). It is a pure value.
- :func:`run_with_failover` / :func:`arun_with_failover` drive one call across an ordered list
  of models (primary first, then failover models), each model with its own retries. Every
  attempt is reported as an :class:`AttemptRecord`; the caller's ``attempt`` function is where
  a response is validated (raise :class:`~synopsis.errors.InvalidSummary` to have it retried).
- :class:`RetryingModel` and :class:`FailoverModel` (and their ``Async`` twins) wrap models and
  *are* models, so they stack with any other wrapper.
- :class:`Cooldown` stops retry storms: after a number of complete failures in a row it refuses
  further calls for a while.

Only transient errors (rate limits, timeouts, 5xx) and invalid responses are retried. A
permanent error (bad request, auth), a context-length error or a configuration error moves
straight on to the next model: repeating the same request cannot fix it.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from synopsis.errors import (
    AllModelsFailed,
    ConfigError,
    ContextLengthExceeded,
    InvalidSummary,
    ModelError,
    ModelTimeout,
    PermanentModelError,
    ProviderUnavailable,
    RateLimited,
    RetryExhausted,
    TransientModelError,
    describe_error,
)
from synopsis.events import GenerateSummary
from synopsis.models._base import AsyncModel, Model, ModelResponse, ModelSettings

__all__ = [
    "AsyncFailoverModel",
    "AsyncRetryingModel",
    "AttemptRecord",
    "Cooldown",
    "CoolingDown",
    "FailoverModel",
    "FailoverResult",
    "RetryPolicy",
    "RetryingModel",
    "arun_with_failover",
    "error_for_status",
    "is_retryable",
    "looks_like_context_overflow",
    "parse_retry_after",
    "require_text",
    "run_with_failover",
]

T = TypeVar("T")
Phase = Literal["primary", "failover"]
Sleep = Callable[[float], None]
AsyncSleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]
Validator = Callable[[ModelResponse], object]

_log = logging.getLogger("synopsis.resilience")


def is_retryable(error: BaseException) -> bool:
    """The default retry predicate: transient model errors and invalid responses."""
    return isinstance(error, TransientModelError | InvalidSummary)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often to retry one model and how long to wait between attempts.

    ``max_retries`` retries follow the first attempt (the default 3 means 4 attempts). The
    wait before retry ``n`` (1-based) is ``initial_delay * 2 ** (n - 1)``; with ``jitter`` a
    random extra of up to half of that is added, and the result, jitter included, never
    exceeds ``max_delay``. When the error is :class:`~synopsis.errors.RateLimited` with a
    ``retry_after`` hint, the wait is at least that hint: the provider's explicit request beats
    our cap, but never beyond ``max_retry_after`` (a hint of an hour would stall the agent).
    """

    max_retries: int = 3
    initial_delay: float = 1.0
    max_delay: float = 10.0
    jitter: bool = True
    max_retry_after: float = 60.0
    retry_on: Callable[[BaseException], bool] = is_retryable

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.initial_delay < 0 or self.max_delay < 0 or self.max_retry_after < 0:
            raise ConfigError("initial_delay, max_delay and max_retry_after must be >= 0")
        if self.initial_delay > self.max_delay:
            raise ConfigError(
                f"initial_delay ({self.initial_delay}) must not exceed max_delay ({self.max_delay})"
            )

    @property
    def attempts(self) -> int:
        """Attempts per model: the first one plus the retries."""
        return self.max_retries + 1

    def delay(
        self, retry: int, error: BaseException | None = None, *, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait before retry number ``retry`` (1-based) after ``error``."""
        base = min(self.initial_delay * 2.0 ** max(retry - 1, 0), self.max_delay)
        if self.jitter:
            base = min(base * (1.0 + (rng or random.Random()).random() / 2.0), self.max_delay)
        hint = getattr(error, "retry_after", None) if isinstance(error, RateLimited) else None
        if isinstance(hint, int | float) and hint > 0:
            return max(base, min(float(hint), self.max_retry_after))
        return base


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord:
    """One model call: its number within the model (1-based), phase, model, latency, error."""

    attempt: int
    phase: Phase
    model: str
    latency_s: float
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_event(self, *, session_id: str | None = None) -> GenerateSummary:
        """This attempt as a ``generate_summary`` event (error serialized)."""
        return GenerateSummary(
            attempt=self.attempt,
            phase=self.phase,
            model=self.model,
            latency_s=self.latency_s,
            ok=self.ok,
            error=None if self.error is None else describe_error(self.error),
            session_id=session_id,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class FailoverResult(Generic[T]):
    """What :func:`run_with_failover` returns: the value, who produced it, and every attempt."""

    value: T
    model: str
    attempts: int
    records: tuple[AttemptRecord, ...] = field(default_factory=tuple)


class CoolingDown(ModelError):
    """Calls are refused for ``retry_in`` more seconds after repeated complete failures.

    Not transient on purpose: retrying inside the cooldown is exactly the storm it prevents.
    """

    def __init__(self, message: str, *, retry_in: float):
        super().__init__(message)
        self.retry_in = retry_in


class Cooldown:
    """A circuit breaker: after ``failures`` complete failures in a row, refuse for ``seconds``.

    A complete failure is a call where every model failed. After the pause one call is let
    through; if it fails too the pause starts again at once, a success resets everything.
    This is the one stateful object here; a lock makes it safe to share between threads
    (and between tasks, as no method awaits).
    """

    def __init__(
        self, *, failures: int = 3, seconds: float = 60.0, clock: Clock = time.monotonic
    ) -> None:
        if failures < 1 or seconds < 0:
            raise ConfigError("Cooldown needs failures >= 1 and seconds >= 0")
        self.failures = failures
        self.seconds = seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._consecutive = 0
        self._until: float | None = None

    def allow(self) -> bool:
        """True when a call may be made now."""
        return self.remaining() <= 0

    def remaining(self) -> float:
        """Seconds until calls are allowed again (0 when they are)."""
        with self._lock:
            if self._until is None:
                return 0.0
            return max(self._until - self._clock(), 0.0)

    def record_success(self) -> None:
        with self._lock:
            self._consecutive = 0
            self._until = None

    def record_failure(self) -> None:
        with self._lock:
            self._consecutive += 1
            if self._consecutive >= self.failures:
                self._until = self._clock() + self.seconds


# ---------------------------------------------------------------------------------------------
# The driver


class _Attempts:
    """Per-call bookkeeping: times attempts, numbers them per model and reports them."""

    def __init__(self, on_attempt: Callable[[AttemptRecord], None] | None, clock: Clock):
        self._on_attempt = on_attempt
        self._clock = clock
        self.records: list[AttemptRecord] = []
        self.per_model = 0

    def start_model(self) -> None:
        self.per_model = 0

    def begin(self) -> float:
        self.per_model += 1
        return self._clock()

    def end(self, started: float, phase: Phase, model: str, error: BaseException | None) -> None:
        record = AttemptRecord(
            attempt=self.per_model,
            phase=phase,
            model=model,
            latency_s=max(self._clock() - started, 0.0),
            error=error,
        )
        self.records.append(record)
        if self._on_attempt is None:
            return
        try:
            self._on_attempt(record)
        except Exception:  # an observer must never break the call it observes
            _log.exception("on_attempt callback %r failed", self._on_attempt)

    def result(self, value: T, model: str) -> FailoverResult[T]:
        return FailoverResult(
            value=value, model=model, attempts=len(self.records), records=tuple(self.records)
        )


def _retry_options(policy: RetryPolicy, rng: random.Random) -> dict[str, Any]:
    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        return policy.delay(state.attempt_number, error, rng=rng)

    return {
        "stop": stop_after_attempt(policy.attempts),
        "wait": wait,
        "retry": retry_if_exception(policy.retry_on),
        "reraise": True,
    }


def _phase(index: int) -> Phase:
    return "primary" if index == 0 else "failover"


def _model_name(model: object) -> str:
    name = getattr(model, "name", None)
    return name if isinstance(name, str) else type(model).__name__


def _check(models: Sequence[object], cooldown: Cooldown | None) -> None:
    if not models:
        raise ConfigError("at least one model is required")
    if cooldown is not None and not cooldown.allow():
        wait = cooldown.remaining()
        raise CoolingDown(
            f"model calls paused for {wait:.1f}s after {cooldown.failures} failures in a row",
            retry_in=wait,
        )


def _exhausted(name: str, attempts: int, error: Exception) -> RetryExhausted:
    exhausted = RetryExhausted(model=name, attempts=attempts, last_error=error)
    exhausted.__cause__ = error
    return exhausted


def _all_failed(failures: list[Exception], cooldown: Cooldown | None) -> AllModelsFailed:
    if cooldown is not None:
        cooldown.record_failure()
    names = ", ".join(str(getattr(f, "model", None) or "?") for f in failures)
    return AllModelsFailed(f"all {len(failures)} model(s) failed: {names}", failures)


def _succeeded(cooldown: Cooldown | None) -> None:
    if cooldown is not None:
        cooldown.record_success()


def _retry_one(
    model: Model, attempt: Callable[[Model], T], phase: Phase, run: _Attempts, retrying: Retrying
) -> T:
    name = _model_name(model)

    def once() -> T:
        started = run.begin()
        try:
            value = attempt(model)
        except Exception as exc:
            run.end(started, phase, name, exc)
            raise
        run.end(started, phase, name, None)
        return value

    run.start_model()
    try:
        return retrying(once)
    except Exception as exc:
        raise _exhausted(name, run.per_model, exc) from exc


def run_with_failover(
    models: Sequence[Model],
    attempt: Callable[[Model], T],
    *,
    policy: RetryPolicy = RetryPolicy(),
    on_attempt: Callable[[AttemptRecord], None] | None = None,
    sleep: Sleep = time.sleep,
    clock: Clock = time.monotonic,
    rng: random.Random | None = None,
    cooldown: Cooldown | None = None,
) -> FailoverResult[T]:
    """Call ``attempt(model)`` on each model in order until one succeeds, retrying each.

    ``attempt`` makes the call and validates the response; raising an error that
    ``policy.retry_on`` accepts (e.g. ``InvalidSummary``) retries the same model after a
    backoff, any other error moves on to the next model. ``on_attempt`` sees every attempt.
    When all models fail, :class:`~synopsis.errors.AllModelsFailed` holds one
    :class:`~synopsis.errors.RetryExhausted` per model (its ``last_error`` the final failure).
    With a ``cooldown``, a refused call raises :class:`CoolingDown` without calling anything.
    """
    _check(models, cooldown)
    run, rng = _Attempts(on_attempt, clock), rng or random.Random()
    failures: list[Exception] = []
    for index, model in enumerate(models):
        retrying = Retrying(sleep=sleep, **_retry_options(policy, rng))
        try:
            value = _retry_one(model, attempt, _phase(index), run, retrying)
        except RetryExhausted as exc:
            failures.append(exc)
            continue
        _succeeded(cooldown)
        return run.result(value, _model_name(model))
    raise _all_failed(failures, cooldown)


async def _aretry_one(
    model: AsyncModel,
    attempt: Callable[[AsyncModel], Awaitable[T]],
    phase: Phase,
    run: _Attempts,
    retrying: AsyncRetrying,
) -> T:
    name = _model_name(model)

    async def once() -> T:
        started = run.begin()
        try:
            value = await attempt(model)
        except Exception as exc:
            run.end(started, phase, name, exc)
            raise
        run.end(started, phase, name, None)
        return value

    run.start_model()
    try:
        return await retrying(once)
    except Exception as exc:
        raise _exhausted(name, run.per_model, exc) from exc


async def arun_with_failover(
    models: Sequence[AsyncModel],
    attempt: Callable[[AsyncModel], Awaitable[T]],
    *,
    policy: RetryPolicy = RetryPolicy(),
    on_attempt: Callable[[AttemptRecord], None] | None = None,
    sleep: AsyncSleep = asyncio.sleep,
    clock: Clock = time.monotonic,
    rng: random.Random | None = None,
    cooldown: Cooldown | None = None,
) -> FailoverResult[T]:
    """The async twin of :func:`run_with_failover` (``attempt`` and ``sleep`` are awaited)."""
    _check(models, cooldown)
    run, rng = _Attempts(on_attempt, clock), rng or random.Random()
    failures: list[Exception] = []
    for index, model in enumerate(models):
        retrying = AsyncRetrying(sleep=sleep, **_retry_options(policy, rng))
        try:
            value = await _aretry_one(model, attempt, _phase(index), run, retrying)
        except RetryExhausted as exc:
            failures.append(exc)
            continue
        _succeeded(cooldown)
        return run.result(value, _model_name(model))
    raise _all_failed(failures, cooldown)


# ---------------------------------------------------------------------------------------------
# Validation and error classification (shared by the provider adapters)


def require_text(response: ModelResponse) -> ModelResponse:
    """Reject a response that calls tools or has no text (raises InvalidSummary)."""
    if response.tool_calls:
        raise InvalidSummary("the model called a tool instead of answering", model=response.model)
    if not response.text.strip():
        raise InvalidSummary("the model returned an empty answer", model=response.model)
    return response


def parse_retry_after(headers: Mapping[str, str], *, now: float) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` or ``Retry-After`` (seconds or date).

    ``now`` is the current Unix time, needed for the HTTP-date form. Unparseable or negative
    hints give ``None``.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = _as_float(lowered.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    seconds = _as_float(raw)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - now, 0.0)


def _as_float(raw: str | None) -> float | None:
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and value >= 0 else None


_CONTEXT_WORDS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input is too long",
)


def looks_like_context_overflow(message: str, code: str | None = None) -> bool:
    """True when a provider's 400 message or code says the request does not fit."""
    text = f"{code or ''} {message}".lower()
    return any(word in text for word in _CONTEXT_WORDS)


def error_for_status(
    status: int,
    message: str,
    *,
    model: str,
    headers: Mapping[str, str] | None = None,
    code: str | None = None,
    now: float | None = None,
) -> ModelError:
    """Translate an HTTP error of a provider into our error tree.

    429 is :class:`RateLimited` (with ``retry_after`` from the headers), 408 a timeout,
    5xx (including Anthropic's 529 "overloaded") :class:`ProviderUnavailable`, a 400/413 about
    the context length :class:`ContextLengthExceeded`, any other 4xx
    :class:`PermanentModelError`.
    """
    detail = f"{model}: HTTP {status}: {message}"
    if status == 429:
        hint = parse_retry_after(headers or {}, now=time.time() if now is None else now)
        return RateLimited(detail, model=model, retry_after=hint)
    if status == 408:
        return ModelTimeout(detail, model=model)
    if status >= 500:
        return ProviderUnavailable(detail, model=model, status_code=status)
    if status in (400, 413, 422) and looks_like_context_overflow(message, code):
        return ContextLengthExceeded(detail, model=model)
    return PermanentModelError(detail, model=model, status_code=status)


# ---------------------------------------------------------------------------------------------
# Wrappers that are models


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
        return "failover:" + ",".join(_model_name(m) for m in self.models)

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
        return _model_name(self.models[0])

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
        return "failover:" + ",".join(_model_name(m) for m in self.models)

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
        return _model_name(self.models[0])

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        try:
            return await super().complete(messages, settings=settings)
        except AllModelsFailed as group:
            raise _sole_failure(group) from None
