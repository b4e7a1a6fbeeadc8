"""Retry, failover and cooldown for model calls, on top of tenacity.

The pieces, from small to large:

- :class:`RetryPolicy` says *whether* to retry an error and *how long* to wait (exponential
  backoff with jitter, capped, honouring a provider's ``Retry-After``). It is a pure value.
- :func:`failover_flow` is the chain written once: a pure generator (see :mod:`synopsis._flow`)
  that walks an ordered list of models (primary first, then failover models), asks tenacity's
  sans-I/O core (``Retrying.iter``) after each attempt whether to retry, sleep or give up, and
  *yields* what is to be done: :class:`CallModel` / :class:`RunAttempt`, :class:`Pause`,
  :class:`ReadClock`, and a notification per attempt (:class:`Attempted` by default).
- :func:`run_with_failover` / :func:`arun_with_failover` drive that flow with a caller's
  ``attempt`` function; every attempt is reported as an :class:`AttemptRecord`, and the
  ``attempt`` function is where a response is validated (raise
  :class:`~synopsis.errors.InvalidSummary` to have it retried).
- :mod:`synopsis.models.failover` and :mod:`synopsis.summarizer` drive the same flow.
- :class:`Cooldown` stops retry storms: after a number of complete failures in a row it refuses
  further calls for a while.

Only transient errors are retried (:func:`~synopsis.models.transient.is_transient`:
timeouts, lost connections, 408/409/429 and 5xx, ours or any SDK's), and an invalid answer
(:class:`~synopsis.errors.InvalidSummary`) at most ``RetryPolicy.invalid_retries`` times (one
by default: a sampled answer may differ once, a deterministic one never will). A permanent
error (bad request, auth, validation), a context-length error, a configuration error or a
bug moves straight on to the next model: repeating the same request cannot fix it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from tenacity import (
    DoAttempt,
    DoSleep,
    RetryCallState,
    Retrying,
    stop_after_attempt,
)

from synopsis._flow import Flow, adrive, drive
from synopsis.errors import (
    AllModelsFailed,
    ConfigError,
    CoolingDown,
    InvalidSummary,
    RateLimited,
    RetryExhausted,
    describe_error,
)
from synopsis.events import GenerateSummary
from synopsis.models._base import AsyncModel, Model, ModelSettings
from synopsis.models.transient import is_transient

__all__ = [
    "AsyncSleep",
    "AttemptRecord",
    "Attempted",
    "CallModel",
    "Clock",
    "Cooldown",
    "FailoverResult",
    "Pause",
    "ReadClock",
    "RetryPolicy",
    "RunAttempt",
    "Sleep",
    "aperform",
    "arun_with_failover",
    "failover_flow",
    "is_retryable",
    "model_name",
    "perform",
    "run_with_failover",
]

T = TypeVar("T")
Phase = Literal["primary", "failover"]
Sleep = Callable[[float], None]
AsyncSleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]

_log = logging.getLogger("synopsis.models.retry")


def is_retryable(error: BaseException) -> bool:
    """The default retry predicate: transient errors (ours or an SDK's, see
    :func:`~synopsis.models.transient.is_transient`) and invalid responses (these at most
    ``RetryPolicy.invalid_retries`` times)."""
    return isinstance(error, InvalidSummary) or is_transient(error)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often to retry one model and how long to wait between attempts.

    ``max_retries`` retries follow the first attempt (the default 3 means 4 attempts). The
    wait before retry ``n`` (1-based) is ``initial_delay * 2 ** (n - 1)``; with ``jitter`` a
    random extra of up to half of that is added, and the result, jitter included, never
    exceeds ``max_delay``. When the error is :class:`~synopsis.errors.RateLimited` with a
    ``retry_after`` hint, the wait is at least that hint: the provider's explicit request beats
    our cap, but never beyond ``max_retry_after`` (a hint of an hour would stall the agent).
    ``retry_on`` says which errors are retried; an :class:`~synopsis.errors.InvalidSummary`
    it accepts is retried at most ``invalid_retries`` times per model (then the next model
    is asked), whatever ``max_retries`` allows.
    """

    max_retries: int = 3
    initial_delay: float = 1.0
    max_delay: float = 10.0
    jitter: bool = True
    max_retry_after: float = 60.0
    retry_on: Callable[[BaseException], bool] = is_retryable
    invalid_retries: int = 1

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.invalid_retries < 0:
            raise ConfigError(
                f"max_retries and invalid_retries must be >= 0, got {self.max_retries} "
                f"and {self.invalid_retries}"
            )
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
# The steps of the chain


@dataclass(frozen=True, slots=True)
class CallModel:
    """Call ``model.complete(messages, settings=settings)``; the result is the response."""

    model: Any
    messages: Sequence[Mapping[str, Any]] = ()
    settings: ModelSettings | None = None


@dataclass(frozen=True, slots=True)
class RunAttempt:
    """Run the caller's ``attempt(model)`` (used by :func:`run_with_failover`)."""

    model: Any


@dataclass(frozen=True, slots=True)
class Pause:
    """Sleep ``seconds`` before the next attempt (the backoff tenacity chose)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class ReadClock:
    """Read the clock: attempts are timed by the driver's clock, never the flow's."""


@dataclass(frozen=True, slots=True)
class Attempted:
    """Tell the observer about one finished attempt (its errors are logged, never raised)."""

    record: AttemptRecord


#: The steps :func:`failover_flow` yields with its default notification.
ChainStep = CallModel | RunAttempt | Pause | ReadClock | Attempted


# ---------------------------------------------------------------------------------------------
# The flow


def _retry_options(policy: RetryPolicy, rng: random.Random) -> dict[str, Any]:
    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        return policy.delay(state.attempt_number, error, rng=rng)

    invalid: set[int] = set()  # the attempts that gave an invalid answer

    def retry(state: RetryCallState) -> bool:
        error = state.outcome.exception() if state.outcome is not None else None
        if error is None or not policy.retry_on(error):
            return False
        if isinstance(error, InvalidSummary):
            invalid.add(state.attempt_number)
            return len(invalid) <= policy.invalid_retries
        return True

    return {
        "stop": stop_after_attempt(policy.attempts),
        "wait": wait,
        "retry": retry,
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


def _all_failed(failures: list[Exception], cooldown: Cooldown | None) -> AllModelsFailed:
    if cooldown is not None:
        cooldown.record_failure()
    names = ", ".join(str(getattr(f, "model", None) or "?") for f in failures)
    return AllModelsFailed(f"all {len(failures)} model(s) failed: {names}", failures)


def _as_is(value: Any) -> Any:
    return value


@dataclass(frozen=True, slots=True)
class _AttemptRules:
    """How every attempt of one run is made, checked, announced and retried."""

    call: Callable[[Any], Any]
    check: Callable[[Any], Any]
    notify: Callable[[AttemptRecord], Any]
    policy: RetryPolicy
    rng: random.Random


def failover_flow(
    models: Sequence[Any],
    call: Callable[[Any], Any],
    *,
    policy: RetryPolicy,
    rng: random.Random,
    cooldown: Cooldown | None = None,
    check: Callable[[Any], T] = _as_is,
    notify: Callable[[AttemptRecord], Any] = Attempted,
) -> Flow[Any, FailoverResult[T]]:
    """The retry + failover chain as a flow: try each model in order until one succeeds.

    ``call(model)`` is the step that calls a model (e.g. ``CallModel`` with the request);
    ``check(result)`` validates what it returned, raising an error ``policy.retry_on`` accepts
    (e.g. ``InvalidSummary``) to retry the same model, any other error to move on. Each
    attempt is timed with :class:`ReadClock` steps and announced with ``notify(record)`` (an
    :class:`Attempted` step unless the caller turns it into its own, such as an event) before
    the chain goes on. When all models fail, :class:`~synopsis.errors.AllModelsFailed` holds
    one :class:`~synopsis.errors.RetryExhausted` per model; a ``cooldown`` that refuses raises
    :class:`~synopsis.errors.CoolingDown` before any step.
    """
    _check(models, cooldown)
    rules = _AttemptRules(call, check, notify, policy, rng)
    records: list[AttemptRecord] = []
    failures: list[Exception] = []
    for index, model in enumerate(models):
        try:
            value = yield from _retry_model(model, _phase(index), rules, records)
        except RetryExhausted as exc:
            failures.append(exc)
            continue
        if cooldown is not None:
            cooldown.record_success()
        return FailoverResult(
            value=value, model=model_name(model), attempts=len(records), records=tuple(records)
        )
    raise _all_failed(failures, cooldown)


def _retry_model(
    model: Any, phase: Phase, rules: _AttemptRules, records: list[AttemptRecord]
) -> Flow[Any, Any]:
    """One model's attempts, as tenacity decides them; RetryExhausted when it gives up."""
    retrying = Retrying(**_retry_options(rules.policy, rules.rng))
    retrying.begin()
    state = RetryCallState(retrying, fn=None, args=(), kwargs={})
    while True:
        try:
            action = retrying.iter(state)
        except Exception as exc:  # tenacity re-raises the final error: the model is done
            exhausted = RetryExhausted(
                model=model_name(model), attempts=state.attempt_number, last_error=exc
            )
            raise exhausted from exc
        if isinstance(action, DoAttempt):
            value, error = yield from _attempt(model, phase, state.attempt_number, rules, records)
            if error is None:
                state.set_result(value)
            else:
                state.set_exception((type(error), error, error.__traceback__))
        elif isinstance(action, DoSleep):
            state.prepare_for_next_attempt()
            yield Pause(float(action))
        else:
            return action


def _attempt(
    model: Any, phase: Phase, number: int, rules: _AttemptRules, records: list[AttemptRecord]
) -> Flow[Any, tuple[Any, Exception | None]]:
    """One timed, checked call, announced before the chain decides what comes next."""
    started = yield ReadClock()
    value, error = None, None
    try:
        value = rules.check((yield rules.call(model)))
    except Exception as exc:  # every failure is an outcome for tenacity to judge
        error = exc
    ended = yield ReadClock()
    record = AttemptRecord(
        attempt=number,
        phase=phase,
        model=model_name(model),
        latency_s=max(ended - started, 0.0),
        error=error,
    )
    records.append(record)
    yield rules.notify(record)
    return value, error


# ---------------------------------------------------------------------------------------------
# Carrying the steps out


def _observe(on_attempt: Callable[[AttemptRecord], None] | None, record: AttemptRecord) -> None:
    if on_attempt is None:
        return
    try:
        on_attempt(record)
    except Exception:  # an observer must never break the call it observes
        _log.exception("on_attempt callback %r failed", on_attempt)


def perform(
    step: Any,
    *,
    sleep: Sleep,
    clock: Clock,
    on_attempt: Callable[[AttemptRecord], None] | None = None,
    attempt: Callable[[Any], Any] | None = None,
) -> Any:
    """Carry out one chain step synchronously."""
    if isinstance(step, CallModel):
        return step.model.complete(step.messages, settings=step.settings)
    if isinstance(step, RunAttempt) and attempt is not None:
        return attempt(step.model)
    if isinstance(step, Pause):
        return sleep(step.seconds)
    return _perform_instant(step, clock, on_attempt)


async def aperform(
    step: Any,
    *,
    sleep: AsyncSleep,
    clock: Clock,
    on_attempt: Callable[[AttemptRecord], None] | None = None,
    attempt: Callable[[Any], Awaitable[Any]] | None = None,
) -> Any:
    """The async twin of :func:`perform`: model calls and sleeps are awaited."""
    if isinstance(step, CallModel):
        return await step.model.complete(step.messages, settings=step.settings)
    if isinstance(step, RunAttempt) and attempt is not None:
        return await attempt(step.model)
    if isinstance(step, Pause):
        return await sleep(step.seconds)
    return _perform_instant(step, clock, on_attempt)


def _perform_instant(
    step: Any, clock: Clock, on_attempt: Callable[[AttemptRecord], None] | None
) -> Any:
    """The steps that never wait, carried out the same way by both drivers."""
    if isinstance(step, ReadClock):
        return clock()
    if isinstance(step, Attempted):
        return _observe(on_attempt, step.record)
    raise TypeError(f"no way to perform {step!r}")


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
    flow: Flow[Any, FailoverResult[T]] = failover_flow(
        models, RunAttempt, policy=policy, rng=rng or random.Random(), cooldown=cooldown
    )
    return drive(
        flow,
        lambda step: perform(
            step, sleep=sleep, clock=clock, on_attempt=on_attempt, attempt=attempt
        ),
    )


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
    flow: Flow[Any, FailoverResult[T]] = failover_flow(
        models, RunAttempt, policy=policy, rng=rng or random.Random(), cooldown=cooldown
    )
    return await adrive(
        flow,
        lambda step: aperform(
            step, sleep=sleep, clock=clock, on_attempt=on_attempt, attempt=attempt
        ),
    )
