"""The retry + failover chain as one flow: its steps, tenacity's decisions, and sync/async parity.

``failover_flow`` yields steps (call, pause, read the clock, announce an attempt); the tests
drive it with a scripted ``perform`` and check the exact sequence, then check that the sync
and async wrappers and drivers built on it behave the same on the same scripts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from synopsis._flow import Flow, adrive, drive
from synopsis.errors import (
    AllModelsFailed,
    ConfigError,
    CoolingDown,
    InvalidSummary,
    ModelTimeout,
    PermanentModelError,
    ProviderUnavailable,
    RateLimited,
    RetryExhausted,
)
from synopsis.models._base import ModelResponse, ModelSettings
from synopsis.models.failover import (
    AsyncFailoverModel,
    AsyncRetryingModel,
    FailoverModel,
    RetryingModel,
    require_text,
)
from synopsis.models.retry import (
    Attempted,
    AttemptRecord,
    CallModel,
    Cooldown,
    FailoverResult,
    Pause,
    ReadClock,
    RetryPolicy,
    RunAttempt,
    arun_with_failover,
    failover_flow,
    run_with_failover,
)
from synopsis.summarizer import Summarizer
from synopsis.testing import AsyncFakeModel, FakeClock, FakeModel, RecordingSleep, tool_call_reply

MESSAGES = [{"role": "user", "content": "hi"}]
NO_JITTER = RetryPolicy(max_retries=2, jitter=False)


@dataclass(frozen=True)
class Stub:
    """A stand-in model for the bare flow: only its name matters."""

    name: str


@dataclass
class Script:
    """A perform for the bare flow: answers each step from a script and logs the steps."""

    answers: dict[str, list[Any]]
    steps: list[Any] = field(default_factory=list)
    now: float = 100.0

    def __call__(self, step: Any) -> Any:
        self.steps.append(step)
        if isinstance(step, ReadClock):
            self.now += 1.0
            return self.now
        if isinstance(step, RunAttempt):
            answer = self.answers[step.model.name].pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        return None


def chain(models: list[str], **options: Any) -> Flow[Any, FailoverResult[Any]]:
    options.setdefault("policy", NO_JITTER)
    options.setdefault("rng", random.Random(0))
    return failover_flow([Stub(name) for name in models], RunAttempt, **options)


def kinds(steps: list[Any]) -> list[str]:
    """A compact picture of a step sequence, e.g. ``call:a``, ``pause:1.0``, ``ok:a#1``."""
    out: list[str] = []
    for step in steps:
        if isinstance(step, RunAttempt):
            out.append(f"call:{step.model.name}")
        elif isinstance(step, Pause):
            out.append(f"pause:{step.seconds}")
        elif isinstance(step, Attempted):
            r = step.record
            out.append(f"{'ok' if r.ok else 'fail'}:{r.model}#{r.attempt}")
    return out


# ---------------------------------------------------------------------------------------------
# The bare flow


def test_first_success_is_timed_announced_and_returned() -> None:
    """One good call: clock, call, clock, announce; the result carries the single record."""
    script = Script({"a": ["done"]})
    result = drive(chain(["a"]), script)
    assert [type(s) for s in script.steps] == [ReadClock, RunAttempt, ReadClock, Attempted]
    assert result == FailoverResult(
        value="done",
        model="a",
        attempts=1,
        records=(AttemptRecord(attempt=1, phase="primary", model="a", latency_s=1.0),),
    )


def test_tenacity_decides_retries_pauses_and_failover() -> None:
    """Transient errors are retried after the policy's pause; exhaustion moves to the next model."""
    down = ProviderUnavailable("down")
    script = Script({"a": [down, down, down], "b": [ModelTimeout("t"), "from b"]})
    result = drive(chain(["a", "b"]), script)
    assert kinds(script.steps) == [
        "call:a", "fail:a#1", "pause:1.0",
        "call:a", "fail:a#2", "pause:2.0",
        "call:a", "fail:a#3",
        "call:b", "fail:b#1", "pause:1.0",
        "call:b", "ok:b#2",
    ]  # fmt: skip
    assert (result.value, result.model, result.attempts) == ("from b", "b", 5)
    assert [r.phase for r in result.records] == ["primary"] * 3 + ["failover"] * 2


def test_a_permanent_error_moves_on_without_pausing() -> None:
    """A non-retryable error ends that model's turn at once."""
    script = Script({"a": [PermanentModelError("no")], "b": ["ok"]})
    drive(chain(["a", "b"]), script)
    assert kinds(script.steps) == ["call:a", "fail:a#1", "call:b", "ok:b#1"]


def test_the_pause_honours_retry_after() -> None:
    """A RateLimited hint becomes the Pause, as RetryPolicy.delay says."""
    script = Script({"a": [RateLimited("slow", retry_after=7.0), "ok"]})
    drive(chain(["a"]), script)
    assert [s.seconds for s in script.steps if isinstance(s, Pause)] == [7.0]


def test_jittered_pauses_follow_the_policy_with_the_same_rng() -> None:
    """The flow's pauses are exactly RetryPolicy.delay drawn from the same seeded rng."""
    policy = RetryPolicy(max_retries=3)
    script = Script({"a": [ModelTimeout("t")] * 4})
    with pytest.raises(AllModelsFailed):
        drive(chain(["a"], policy=policy, rng=random.Random(4)), script)
    rng = random.Random(4)
    expected = [policy.delay(n, ModelTimeout("t"), rng=rng) for n in (1, 2, 3)]
    assert [s.seconds for s in script.steps if isinstance(s, Pause)] == expected


def test_check_rejects_a_result_which_is_then_retried() -> None:
    """check() runs inside the attempt: an InvalidSummary it raises is a failed attempt."""

    def check(value: str) -> str:
        if value == "bad":
            raise InvalidSummary("bad answer")
        return value

    script = Script({"a": ["bad", "good"]})
    result = drive(chain(["a"], check=check), script)
    assert kinds(script.steps) == ["call:a", "fail:a#1", "pause:1.0", "call:a", "ok:a#2"]
    assert isinstance(result.records[0].error, InvalidSummary)


def test_notify_turns_each_record_into_the_callers_step() -> None:
    """notify= replaces the Attempted step, e.g. with an event step of the caller's own."""
    script = Script({"a": [ModelTimeout("t"), "ok"]})
    drive(chain(["a"], notify=lambda r: ("event", r.attempt, r.ok)), script)
    assert [s for s in script.steps if isinstance(s, tuple)] == [
        ("event", 1, False),
        ("event", 2, True),
    ]


def test_all_failing_gives_one_retry_exhausted_per_model() -> None:
    """The group holds each model's RetryExhausted with its attempts and last error."""
    last = PermanentModelError("b-last")
    script = Script({"a": [ModelTimeout("1"), ModelTimeout("2"), ModelTimeout("3")], "b": [last]})
    with pytest.raises(AllModelsFailed) as info:
        drive(chain(["a", "b"]), script)
    exhausted = info.value.exceptions
    assert [(e.model, e.attempts) for e in exhausted] == [("a", 3), ("b", 1)]  # type: ignore[attr-defined]
    assert exhausted[1].last_error is last  # type: ignore[attr-defined]
    assert exhausted[1].__cause__ is last


def test_a_refusing_cooldown_yields_no_step() -> None:
    """CoolingDown is raised before anything is called, timed or announced."""
    clock = FakeClock()
    cooldown = Cooldown(failures=1, seconds=5.0, clock=clock)
    cooldown.record_failure()
    script = Script({"a": ["never"]})
    with pytest.raises(CoolingDown) as info:
        drive(chain(["a"], cooldown=cooldown), script)
    assert info.value.retry_in == 5.0
    assert script.steps == []


def test_no_models_is_a_config_error_before_any_step() -> None:
    """An empty chain is refused at its first step."""
    with pytest.raises(ConfigError):
        drive(chain([]), Script({}))


async def test_the_async_driver_sees_the_same_steps() -> None:
    """Driven by adrive, the same flow yields the same steps and returns the same result."""
    answers = {"a": [ModelTimeout("t"), PermanentModelError("p")], "b": ["ok"]}
    sync_script = Script({k: list(v) for k, v in answers.items()})
    async_script = Script({k: list(v) for k, v in answers.items()})

    async def aperform(step: Any) -> Any:
        return async_script(step)

    sync_result = drive(chain(["a", "b"]), sync_script)
    async_result = await adrive(chain(["a", "b"]), aperform)
    assert async_script.steps == sync_script.steps
    assert async_result == sync_result


def test_a_wrapper_call_is_the_same_flow_with_call_model_steps() -> None:
    """A wrapper's complete() is the chain with one CallModel step per attempt, request bound."""
    model = FakeModel([ModelTimeout("t"), "ok"])
    settings = ModelSettings(max_tokens=5)
    steps: list[Any] = []

    def perform(step: Any) -> Any:
        steps.append(step)
        if isinstance(step, CallModel):
            return step.model.complete(step.messages, settings=step.settings)
        return 0.0 if isinstance(step, ReadClock) else None

    wrapper = RetryingModel(model, policy=NO_JITTER)
    assert drive(wrapper._flow(MESSAGES, settings), perform).text == "ok"
    assert [s for s in steps if isinstance(s, CallModel)] == [
        CallModel(model, MESSAGES, settings)
    ] * 2
    assert [type(s) for s in steps].count(Pause) == 1


# ---------------------------------------------------------------------------------------------
# Sync / async parity of the drivers and wrappers


@dataclass(frozen=True)
class Outcome:
    """What a run showed: the answer or the error, the attempts seen, pauses and calls made."""

    answer: Any
    records: list[tuple[str, str, int, str | None]]
    delays: list[float]
    calls: dict[str, int]


def describe(result: Any) -> Any:
    if isinstance(result, ModelResponse):
        return ("text", result.text, result.model)
    if isinstance(result, FailoverResult):
        return ("result", describe(result.value), result.model, result.attempts)
    if isinstance(result, AllModelsFailed):
        return ("all failed", [describe(e) for e in result.exceptions])
    if isinstance(result, RetryExhausted):
        return ("exhausted", result.model, result.attempts, type(result.last_error).__name__)
    return (type(result).__name__, str(result))


def replies() -> dict[str, list[Any]]:
    """Scripted replies per model name, the same for each pair of twins."""
    return {
        "a": [ProviderUnavailable("down"), tool_call_reply(), ModelTimeout("slow")],
        "b": [RateLimited("busy", retry_after=3.0), "", "from b"],
        "c": ["from c"],
    }


def outcome(
    answer: Any, records: list[AttemptRecord], sleep: RecordingSleep, models: Any
) -> Outcome:
    views = [
        (r.phase, r.model, r.attempt, None if r.error is None else type(r.error).__name__)
        for r in records
    ]
    return Outcome(describe(answer), views, sleep.delays, {m.name: len(m.requests) for m in models})


POLICY = RetryPolicy(max_retries=2, max_retry_after=5.0)


def options(sleep: Any, records: list[AttemptRecord]) -> dict[str, Any]:
    return {
        "policy": POLICY, "sleep": sleep, "on_attempt": records.append,
        "rng": random.Random(3), "clock": FakeClock(),
    }  # fmt: skip


def run_sync(kind: str, names: list[str]) -> Outcome:
    models = [FakeModel(replies()[n], name=n) for n in names]
    sleep, records = RecordingSleep(), list[AttemptRecord]()
    given = options(sleep, records)
    try:
        if kind == "driver":
            answer: Any = run_with_failover(
                models, lambda m: require_text(m.complete(MESSAGES)), **given
            )
        else:
            one = RetryingModel(models[0], validate=require_text, **given)
            chain = FailoverModel(*models, validate=require_text, **given)
            answer = (one if kind == "retrying" else chain).complete(MESSAGES)
    except Exception as exc:
        answer = exc
    return outcome(answer, records, sleep, models)


async def run_async(kind: str, names: list[str]) -> Outcome:
    models = [AsyncFakeModel(replies()[n], name=n) for n in names]
    sleep, records = RecordingSleep(), list[AttemptRecord]()
    given = options(sleep.asleep, records)

    async def attempt(model: Any) -> ModelResponse:
        return require_text(await model.complete(MESSAGES))

    try:
        if kind == "driver":
            answer: Any = await arun_with_failover(models, attempt, **given)
        else:
            one = AsyncRetryingModel(models[0], validate=require_text, **given)
            chain = AsyncFailoverModel(*models, validate=require_text, **given)
            answer = await (one if kind == "retrying" else chain).complete(MESSAGES)
    except Exception as exc:
        answer = exc
    return outcome(answer, records, sleep, models)


@pytest.mark.parametrize(
    ("kind", "names"),
    [
        ("retrying", ["a"]),
        ("retrying", ["b"]),
        ("failover", ["a", "b"]),
        ("failover", ["a", "c"]),
        ("driver", ["a", "b", "c"]),
        ("driver", ["a"]),
    ],
)
async def test_sync_and_async_twins_agree(kind: str, names: list[str]) -> None:
    """Same script, policy and seed: the same answer or error, attempts, pauses and calls."""
    sync = run_sync(kind, names)
    assert await run_async(kind, names) == sync
    assert sync.records  # every case makes attempts


def test_parity_cases_cover_what_they_claim() -> None:
    """The shared scripts exercise retries, invalid answers, a Retry-After and failover."""
    seen = run_sync("driver", ["a", "b", "c"])
    assert seen.records == [
        ("primary", "a", 1, "ProviderUnavailable"),
        ("primary", "a", 2, "InvalidSummary"),
        ("primary", "a", 3, "ModelTimeout"),
        ("failover", "b", 1, "RateLimited"),
        ("failover", "b", 2, "InvalidSummary"),
        ("failover", "b", 3, None),
    ]
    assert seen.delays[2] == 3.0  # the Retry-After of b's first answer
    assert seen.answer == ("result", ("text", "from b", "b"), "b", 6)
    assert run_sync("retrying", ["a"]).answer == ("exhausted", "a", 3, "ModelTimeout")
    assert run_sync("failover", ["a", "c"]).answer == ("text", "from c", "c")


# ---------------------------------------------------------------------------------------------
# The summarizer's flow: the same chain, its attempts announced as Emit steps


def test_the_flow_yields_emit_steps_between_calls() -> None:
    """Driven by a scripted perform, the summary flow shows each Emit right after its call."""
    summarizer = Summarizer(model=FakeModel(name="m"), retry=NO_JITTER, rng=random.Random(0))
    answers = iter([ModelTimeout("t"), "<summary>1. Primary Request and Intent: the bug</summary>"])
    steps: list[Any] = []

    def perform(step: Any) -> Any:
        steps.append(type(step).__name__)
        if isinstance(step, CallModel):
            answer = next(answers)
            if isinstance(answer, Exception):
                raise answer
            return ModelResponse(message={"role": "assistant", "content": answer}, model="m")
        return 0.0 if isinstance(step, ReadClock) else None

    chat = [{"role": "user", "content": "fix the bug"}, {"role": "assistant", "content": "done"}]
    result = drive(summarizer.flow(chat, session_id="s"), perform)
    assert result.text == "1. Primary Request and Intent: the bug"
    assert steps == [
        "ReadClock", "CallModel", "ReadClock", "Emit", "Pause",
        "ReadClock", "CallModel", "ReadClock", "Emit",
    ]  # fmt: skip
