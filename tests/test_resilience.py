"""Retry policy, failover driver, cooldown and the retrying/failover wrappers, with fakes."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from synopsis.errors import (
    AllModelsFailed,
    ConfigError,
    ContextLengthExceeded,
    CoolingDown,
    InvalidSummary,
    ModelTimeout,
    PermanentModelError,
    ProviderUnavailable,
    RateLimited,
    RetryExhausted,
    describe_error,
)
from synopsis.models._base import AsyncModel, Model, ModelResponse
from synopsis.models._http import error_for_status, parse_retry_after
from synopsis.models.failover import (
    AsyncFailoverModel,
    AsyncRetryingModel,
    FailoverModel,
    RetryingModel,
    require_text,
)
from synopsis.models.retry import (
    AttemptRecord,
    Cooldown,
    RetryPolicy,
    arun_with_failover,
    run_with_failover,
)
from synopsis.testing import AsyncFakeModel, FakeClock, FakeModel, RecordingSleep, tool_call_reply

MESSAGES = [{"role": "user", "content": "hi"}]


def call(model: Any) -> ModelResponse:
    """The attempt used throughout: call and validate."""
    return require_text(model.complete(MESSAGES))


async def acall(model: Any) -> ModelResponse:
    """The async attempt used throughout."""
    return require_text(await model.complete(MESSAGES))


def drive(models: list[Any], **kwargs: Any) -> tuple[Any, list[AttemptRecord], RecordingSleep]:
    """Run the sync driver with a recording sleep and seeded rng; return result, records, sleep."""
    records: list[AttemptRecord] = []
    sleep = RecordingSleep()
    kwargs.setdefault("rng", random.Random(1))
    kwargs.setdefault("clock", FakeClock())
    result = run_with_failover(models, call, on_attempt=records.append, sleep=sleep, **kwargs)
    return result, records, sleep


def fail(n: int, error: Exception | None = None) -> list[Any]:
    return [error or ProviderUnavailable("down")] * n


# ---------------------------------------------------------------------------------------------
# RetryPolicy


def test_default_policy_is_three_retries_four_attempts() -> None:
    """The default policy allows 4 attempts per model."""
    assert RetryPolicy().max_retries == 3
    assert RetryPolicy().attempts == 4


def test_delay_doubles_without_jitter() -> None:
    """Without jitter the delays are 1, 2, 4, 8, then capped at 10."""
    policy = RetryPolicy(jitter=False)
    assert [policy.delay(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_cap_includes_jitter() -> None:
    """With jitter, no delay ever exceeds max_delay (the original's max was ~15 s)."""
    policy = RetryPolicy()
    rng = random.Random(0)
    delays = [policy.delay(n, rng=rng) for n in range(1, 30) for _ in range(50)]
    assert max(delays) <= 10.0
    assert min(delays) >= 1.0


def test_jitter_adds_at_most_half() -> None:
    """Retry n waits between base and 1.5 x base while under the cap."""
    policy = RetryPolicy()
    rng = random.Random(3)
    for n, base in [(1, 1.0), (2, 2.0), (3, 4.0)]:
        for _ in range(100):
            assert base <= policy.delay(n, rng=rng) <= base * 1.5


def test_retry_after_raises_the_wait_but_is_bounded() -> None:
    """A RateLimited hint is waited for, beyond max_delay but never beyond max_retry_after."""
    policy = RetryPolicy(jitter=False)
    assert policy.delay(1, RateLimited("x", retry_after=2.0)) == 2.0
    assert policy.delay(1, RateLimited("x", retry_after=30.0)) == 30.0
    assert policy.delay(1, RateLimited("x", retry_after=3600.0)) == 60.0
    assert policy.delay(4, RateLimited("x", retry_after=0.5)) == 8.0
    assert policy.delay(1, RateLimited("x")) == 1.0


@pytest.mark.parametrize(
    "options",
    [{"max_retries": -1}, {"initial_delay": -1.0}, {"initial_delay": 20.0, "max_delay": 10.0}],
)
def test_bad_policy_is_a_config_error(options: dict[str, Any]) -> None:
    """Impossible policies are rejected when built."""
    with pytest.raises(ConfigError):
        RetryPolicy(**options)


# ---------------------------------------------------------------------------------------------
# The driver


def test_success_first_time_makes_one_call_and_no_sleep() -> None:
    """A good first answer: one attempt, no sleep, one ok record."""
    model = FakeModel(["summary"])
    result, records, sleep = drive([model])
    assert result.value.text == "summary"
    assert (result.model, result.attempts) == ("fake:model", 1)
    assert sleep.delays == []
    assert records == [AttemptRecord(attempt=1, phase="primary", model="fake:model", latency_s=0.0)]


def test_always_failing_model_is_tried_four_times() -> None:
    """With the default policy a failing model gets 4 calls and 3 sleeps."""
    model = FakeModel(default=ProviderUnavailable("down"))
    with pytest.raises(AllModelsFailed):
        drive([model])
    assert len(model.requests) == 4


def test_sleeps_follow_the_backoff_schedule() -> None:
    """The three sleeps lie in [1, 1.5], [2, 3] and [4, 6]."""
    model = FakeModel(default=ModelTimeout("slow"))
    sleep = RecordingSleep()
    with pytest.raises(AllModelsFailed):
        run_with_failover([model], call, sleep=sleep, rng=random.Random(5))
    low_high = [(1, 1.5), (2, 3), (4, 6)]
    assert len(sleep.delays) == 3
    assert all(lo <= d <= hi for d, (lo, hi) in zip(sleep.delays, low_high, strict=True))


def test_same_seed_same_delays() -> None:
    """A seeded rng makes the jittered schedule reproducible."""
    schedules = []
    for _ in range(2):
        sleep = RecordingSleep()
        with pytest.raises(AllModelsFailed):
            run_with_failover(
                [FakeModel(default=ModelTimeout("t"))], call, sleep=sleep, rng=random.Random(9)
            )
        schedules.append(sleep.delays)
    assert schedules[0] == schedules[1]


def test_transient_error_then_success_is_retried() -> None:
    """Two transient failures then a success: three calls, the value of the third."""
    model = FakeModel([*fail(2), "third"])
    result, records, sleep = drive([model])
    assert result.value.text == "third"
    assert [r.ok for r in records] == [False, False, True]
    assert len(sleep.delays) == 2


@pytest.mark.parametrize(
    "error",
    [PermanentModelError("bad", status_code=400), ContextLengthExceeded("big"), ConfigError("x")],
)
def test_non_retryable_error_stops_immediately(error: Exception) -> None:
    """Permanent, context-length and config errors are not retried."""
    model = FakeModel(default=error)
    with pytest.raises(AllModelsFailed) as info:
        drive([model])
    assert len(model.requests) == 1
    exhausted = info.value.exceptions[0]
    assert isinstance(exhausted, RetryExhausted)
    assert exhausted.attempts == 1
    assert exhausted.last_error is error


def test_non_retryable_error_moves_to_next_model() -> None:
    """A permanent error on the primary goes straight to the failover model."""
    first = FakeModel(default=ContextLengthExceeded("big"), name="first")
    second = FakeModel(["ok"], name="second")
    result, records, sleep = drive([first, second])
    assert result.model == "second"
    assert [(r.phase, r.model, r.attempt) for r in records] == [
        ("primary", "first", 1),
        ("failover", "second", 1),
    ]
    assert sleep.delays == []


def test_invalid_responses_are_retried() -> None:
    """Tool calls and empty text count as failed attempts and are retried (up to
    ``invalid_retries``, one by default: see tests/test_retry_contract.py)."""
    model = FakeModel([tool_call_reply(), "", "good"])
    result, records, _ = drive([model], policy=RetryPolicy(invalid_retries=2))
    assert result.value.text == "good"
    assert [type(r.error) for r in records[:2]] == [InvalidSummary, InvalidSummary]


def test_rejected_success_is_not_accepted_with_zero_retries() -> None:
    """max_retries=0 and an invalid response fails (the original accepted it)."""
    model = FakeModel([tool_call_reply()])
    with pytest.raises(AllModelsFailed) as info:
        drive([model], policy=RetryPolicy(max_retries=0))
    assert isinstance(info.value.exceptions[0].last_error, InvalidSummary)  # type: ignore[attr-defined]


def test_custom_retry_predicate() -> None:
    """retry_on decides what is retried: here even a permanent error."""
    policy = RetryPolicy(max_retries=1, retry_on=lambda e: isinstance(e, PermanentModelError))
    model = FakeModel([PermanentModelError("x"), "ok"])
    result, _, _ = drive([model], policy=policy)
    assert result.attempts == 2


def test_rate_limit_wait_honours_retry_after() -> None:
    """The sleep after a RateLimited(retry_after=7) is at least 7 s."""
    model = FakeModel([RateLimited("slow", retry_after=7.0), "ok"])
    _, _, sleep = drive([model])
    assert sleep.delays[0] >= 7.0


def test_failover_order_phases_and_attempt_numbers() -> None:
    """Models are tried in order, each with its own retries; records show both phases."""
    first = FakeModel(default=ModelTimeout("t"), name="a")
    second = FakeModel([RateLimited("r"), "from b"], name="b")
    result, records, _ = drive([first, second], policy=RetryPolicy(max_retries=2))
    assert result.value.text == "from b"
    assert result.model == "b"
    assert result.attempts == 5
    assert [(r.phase, r.model, r.attempt) for r in records] == [
        ("primary", "a", 1),
        ("primary", "a", 2),
        ("primary", "a", 3),
        ("failover", "b", 1),
        ("failover", "b", 2),
    ]
    assert result.records == tuple(records)


def test_next_attempt_sees_the_previous_error() -> None:
    """Each record carries its error, so attempt 2's observer sees attempt 1's failure."""
    seen: list[Any] = []
    errors = [ProviderUnavailable("first"), ModelTimeout("second")]
    model = FakeModel([*errors, "ok"])
    run_with_failover([model], call, on_attempt=seen.append, sleep=RecordingSleep())
    assert [r.error for r in seen] == [*errors, None]


def test_last_error_of_primary_is_kept_in_group() -> None:
    """AllModelsFailed holds one RetryExhausted per model with the last error of each."""
    last_a = ModelTimeout("a-last")
    first = FakeModel([ProviderUnavailable("a1"), last_a], name="a")
    second = FakeModel([InvalidSummary("b1"), PermanentModelError("b-last")], name="b")
    with pytest.raises(AllModelsFailed) as info:
        drive([first, second], policy=RetryPolicy(max_retries=1))
    group = info.value
    assert group.models == ("a", "b")
    assert [e.last_error for e in group.exceptions] == [last_a, second_last(group)]  # type: ignore[attr-defined]
    assert [e.attempts for e in group.exceptions] == [2, 2]  # type: ignore[attr-defined]
    assert group.exceptions[0].__cause__ is last_a


def second_last(group: AllModelsFailed) -> Any:
    return group.exceptions[1].last_error  # type: ignore[attr-defined]


def test_all_models_failed_works_with_except_star() -> None:
    """except* RetryExhausted catches the per-model failures of the group."""
    models = [FakeModel(default=ProviderUnavailable("x"), name=n) for n in ("a", "b")]
    caught: list[str] = []
    try:
        drive(models, policy=RetryPolicy(max_retries=0))
    except* RetryExhausted as group:
        caught = [e.model or "" for e in group.exceptions]  # type: ignore[union-attr]
    assert caught == ["a", "b"]


def test_errors_serialize_to_json() -> None:
    """to_dict()/describe_error of the whole failure is JSON-serializable."""
    models = [FakeModel(default=RateLimited("slow", retry_after=1.0), name="a")]
    with pytest.raises(AllModelsFailed) as info:
        drive(models, policy=RetryPolicy(max_retries=0))
    data = json.loads(json.dumps(info.value.to_dict()))
    assert data["type"] == "AllModelsFailed"
    assert data["errors"][0]["last_error"]["retry_after"] == 1.0
    assert json.dumps(describe_error(info.value.exceptions[0]))


def test_record_to_event() -> None:
    """An attempt record becomes a generate_summary event with a serialized error."""
    record = AttemptRecord(
        attempt=2, phase="failover", model="m", latency_s=0.5, error=ModelTimeout("t", model="m")
    )
    event = record.to_event(session_id="s1").to_dict()
    assert event["event"] == "generate_summary"
    assert (event["attempt"], event["phase"], event["ok"]) == (2, "failover", False)
    assert event["error"]["type"] == "ModelTimeout"
    json.dumps(event)


def test_latency_is_measured_with_the_injected_clock() -> None:
    """latency_s comes from the clock passed in."""
    clock = FakeClock()

    def slow_call(model: Any) -> ModelResponse:
        clock.advance(2.5)
        return call(model)

    result = run_with_failover([FakeModel(["x"])], slow_call, clock=clock, sleep=RecordingSleep())
    assert result.records[0].latency_s == 2.5


def test_failing_observer_does_not_break_the_call() -> None:
    """An on_attempt callback that raises is logged and ignored."""

    def boom(record: AttemptRecord) -> None:
        raise RuntimeError("observer bug")

    result = run_with_failover([FakeModel(["x"])], call, on_attempt=boom, sleep=RecordingSleep())
    assert result.value.text == "x"


def test_no_models_is_a_config_error() -> None:
    """An empty model list is a configuration mistake."""
    with pytest.raises(ConfigError):
        run_with_failover([], call)


# ---------------------------------------------------------------------------------------------
# Cooldown


def test_cooldown_opens_after_consecutive_failures_and_closes_later() -> None:
    """Three failures in a row pause calls for 60 s; then one call is let through."""
    clock = FakeClock()
    cooldown = Cooldown(clock=clock)
    for _ in range(2):
        cooldown.record_failure()
    assert cooldown.allow()
    cooldown.record_failure()
    assert not cooldown.allow()
    assert cooldown.remaining() == 60.0
    clock.advance(60.0)
    assert cooldown.allow()
    cooldown.record_failure()  # the probe failed: pause again at once
    assert not cooldown.allow()
    clock.advance(60.0)
    cooldown.record_success()
    cooldown.record_failure()
    assert cooldown.allow()


def test_driver_refuses_during_cooldown_without_calling() -> None:
    """After enough complete failures the driver raises CoolingDown and calls nothing."""
    clock = FakeClock()
    cooldown = Cooldown(failures=2, seconds=30.0, clock=clock)
    model = FakeModel(default=ProviderUnavailable("down"))
    policy = RetryPolicy(max_retries=0)
    for _ in range(2):
        with pytest.raises(AllModelsFailed):
            drive([model], policy=policy, cooldown=cooldown, clock=clock)
    with pytest.raises(CoolingDown) as info:
        drive([model], policy=policy, cooldown=cooldown, clock=clock)
    assert info.value.retry_in == 30.0
    assert len(model.requests) == 2
    clock.advance(30.0)
    model.default = "back"
    result, _, _ = drive([model], policy=policy, cooldown=cooldown, clock=clock)
    assert result.value.text == "back"
    assert cooldown.allow()


def test_bad_cooldown_is_a_config_error() -> None:
    """failures must be at least 1."""
    with pytest.raises(ConfigError):
        Cooldown(failures=0)


# ---------------------------------------------------------------------------------------------
# Wrappers


def test_retrying_model_is_a_model_and_retries() -> None:
    """RetryingModel satisfies Model, keeps the name, and retries transient errors."""
    inner = FakeModel([ModelTimeout("t"), "ok"], context_window=1000)
    sleep = RecordingSleep()
    model = RetryingModel(inner, sleep=sleep, rng=random.Random(0))
    assert isinstance(model, Model)
    assert model.name == "fake:model"
    assert model.context_window == 1000
    assert model.complete(MESSAGES).text == "ok"
    assert len(sleep.delays) == 1


def test_retrying_model_raises_retry_exhausted() -> None:
    """A single model that keeps failing raises RetryExhausted, not a group of one."""
    model = RetryingModel(FakeModel(default=ModelTimeout("t")), sleep=RecordingSleep())
    with pytest.raises(RetryExhausted) as info:
        model.complete(MESSAGES)
    assert info.value.attempts == 4


def test_retrying_model_validates() -> None:
    """validate= rejects a tool-calling answer, which is then retried."""
    inner = FakeModel([tool_call_reply(), "fine"])
    model = RetryingModel(inner, validate=require_text, sleep=RecordingSleep())
    assert model.complete(MESSAGES).text == "fine"


def test_failover_model_chains_and_stacks() -> None:
    """FailoverModel of a RetryingModel: wrappers stack; RetryExhausted is not retried again."""
    a = RetryingModel(FakeModel(default=ProviderUnavailable("x"), name="a"), sleep=RecordingSleep())
    b = FakeModel(["from b"], name="b", context_window=500)
    records: list[AttemptRecord] = []
    chain = FailoverModel(a, b, sleep=RecordingSleep(), on_attempt=records.append)
    assert isinstance(chain, Model)
    assert chain.name == "failover:a,b"
    assert chain.context_window == 500
    assert chain.complete(MESSAGES).text == "from b"
    assert [(r.phase, r.model) for r in records] == [("primary", "a"), ("failover", "b")]


def test_failover_model_all_fail() -> None:
    """Every model failing raises AllModelsFailed."""
    chain = FailoverModel(
        FakeModel(default=PermanentModelError("x"), name="a"),
        FakeModel(default=PermanentModelError("y"), name="b"),
    )
    with pytest.raises(AllModelsFailed):
        chain.complete(MESSAGES)


async def test_async_driver_retries_and_fails_over() -> None:
    """The async driver retries, then fails over, awaiting the injected sleep."""
    first = AsyncFakeModel([ProviderUnavailable("x"), ModelTimeout("t")], name="a")
    second = AsyncFakeModel(["ok"], name="b")
    sleep = RecordingSleep()
    records: list[AttemptRecord] = []
    result = await arun_with_failover(
        [first, second],
        acall,
        policy=RetryPolicy(max_retries=1),
        on_attempt=records.append,
        sleep=sleep.asleep,
        rng=random.Random(2),
    )
    assert result.value.text == "ok"
    assert [(r.phase, r.attempt) for r in records] == [
        ("primary", 1),
        ("primary", 2),
        ("failover", 1),
    ]
    assert len(sleep.delays) == 1


async def test_async_all_fail_and_cooldown() -> None:
    """The async driver raises AllModelsFailed and feeds the cooldown."""
    clock = FakeClock()
    cooldown = Cooldown(failures=1, clock=clock)
    model = AsyncFakeModel(default=PermanentModelError("x"))
    with pytest.raises(AllModelsFailed):
        await arun_with_failover([model], acall, cooldown=cooldown, sleep=RecordingSleep().asleep)
    with pytest.raises(CoolingDown):
        await arun_with_failover([model], acall, cooldown=cooldown, sleep=RecordingSleep().asleep)


async def test_async_wrappers_are_async_models() -> None:
    """AsyncRetryingModel and AsyncFailoverModel satisfy AsyncModel and stack."""
    sleep = RecordingSleep()
    inner = AsyncRetryingModel(
        AsyncFakeModel([InvalidSummary("bad"), "ok"], name="a"), sleep=sleep.asleep
    )
    chain = AsyncFailoverModel(inner, AsyncFakeModel(["b"], name="b"), sleep=sleep.asleep)
    assert isinstance(inner, AsyncModel)
    assert isinstance(chain, AsyncModel)
    assert (await chain.complete(MESSAGES)).text == "ok"
    failing = AsyncRetryingModel(
        AsyncFakeModel(default=ModelTimeout("t")), sleep=sleep.asleep, validate=require_text
    )
    with pytest.raises(RetryExhausted):
        await failing.complete(MESSAGES)


# ---------------------------------------------------------------------------------------------
# Header parsing and status classification


def test_parse_retry_after_forms() -> None:
    """Seconds, milliseconds and HTTP dates are understood; junk is ignored."""
    now = 1_700_000_000.0
    assert parse_retry_after({"Retry-After": "2"}, now=now) == 2.0
    assert parse_retry_after({"retry-after-ms": "250"}, now=now) == 0.25
    assert parse_retry_after({"Retry-After": "Tue, 14 Nov 2023 22:13:50 GMT"}, now=now) == 30.0
    assert parse_retry_after({"Retry-After": "soon"}, now=now) is None
    assert parse_retry_after({"Retry-After": "-3"}, now=now) is None
    assert parse_retry_after({}, now=now) is None


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (429, "rate", RateLimited),
        (408, "timeout", ModelTimeout),
        (500, "oops", ProviderUnavailable),
        (529, "overloaded", ProviderUnavailable),
        (400, "prompt is too long: 300000 tokens > 200000 maximum", ContextLengthExceeded),
        (400, "maximum context length is 8192", ContextLengthExceeded),
        (400, "bad field", PermanentModelError),
        (404, "no such model", PermanentModelError),
    ],
)
def test_error_for_status(status: int, message: str, expected: type) -> None:
    """HTTP statuses map onto the error tree by what the caller should do next."""
    assert type(error_for_status(status, message, model="m", now=0.0)) is expected


def test_context_length_detected_by_code() -> None:
    """The OpenAI error code alone is enough to recognise an overflow."""
    error = error_for_status(400, "too big", model="m", code="context_length_exceeded")
    assert isinstance(error, ContextLengthExceeded)
