"""Retry, failover and cooldown for model calls, on top of tenacity.

The pieces, from small to large:

- :class:`RetryPolicy` says *whether* to retry an error and *how long* to wait (exponential
  backoff with jitter, capped, honouring a provider's ``Retry-After``). It is a pure value.
- :func:`run_with_failover` / :func:`arun_with_failover` drive one call across an ordered list
  of models (primary first, then failover models), each model with its own retries. Every
  attempt is reported as an :class:`AttemptRecord`; the caller's ``attempt`` function is where
  a response is validated (raise :class:`~synopsis.errors.InvalidSummary` to have it retried).
- :mod:`synopsis.models.failover` binds them to wrappers that *are* models.
- :class:`Cooldown` stops retry storms: after a number of complete failures in a row it refuses
  further calls for a while.

Only transient errors (rate limits, timeouts, 5xx) and invalid responses are retried. A
permanent error (bad request, auth), a context-length error or a configuration error moves
straight on to the next model: repeating the same request cannot fix it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from synopsis.errors import (
    AllModelsFailed,
    ConfigError,
    CoolingDown,
    InvalidSummary,
    RateLimited,
    RetryExhausted,
    TransientModelError,
    describe_error,
)
from synopsis.events import GenerateSummary
from synopsis.models._base import AsyncModel, Model

__all__ = [
    "AsyncSleep",
    "AttemptRecord",
    "Clock",
    "Cooldown",
    "FailoverResult",
    "RetryPolicy",
    "Sleep",
    "arun_with_failover",
    "is_retryable",
    "model_name",
    "run_with_failover",
]

T = TypeVar("T")
Phase = Literal["primary", "failover"]
Sleep = Callable[[float], None]
AsyncSleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]

_log = logging.getLogger("synopsis.models.retry")


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


def model_name(model: object) -> str:
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
    name = model_name(model)

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
        return run.result(value, model_name(model))
    raise _all_failed(failures, cooldown)


async def _aretry_one(
    model: AsyncModel,
    attempt: Callable[[AsyncModel], Awaitable[T]],
    phase: Phase,
    run: _Attempts,
    retrying: AsyncRetrying,
) -> T:
    name = model_name(model)

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
        return run.result(value, model_name(model))
    raise _all_failed(failures, cooldown)
