"""Summarizer and AsyncSummarizer: one flow, two drivers, the same results and events.

Both twins run the same scripted fake models (transient failures, an invalid answer, a
failover, chunking, a cooldown refusal) and must agree on the result or error, every
``generate_summary`` event, every sleep and every request. A second group of tests pins *when*
an attempt's event is delivered: before the next sleep or model call starts, in both twins.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from synopsis.errors import (
    AllModelsFailed,
    InvalidSummary,
    ModelTimeout,
    PermanentModelError,
    ProviderUnavailable,
    RateLimited,
)
from synopsis.events import Event, GenerateSummary
from synopsis.models._base import ModelResponse, ModelSettings
from synopsis.models.retry import Cooldown, RetryPolicy
from synopsis.summarizer import AsyncSummarizer, Summarizer
from synopsis.testing import AsyncFakeModel, FakeClock, FakeModel, tool_call_reply

FIRST = "<analysis>notes</analysis><summary>1. Primary Request and Intent: chunk one</summary>"
FINAL = "<summary>1. Primary Request and Intent: both chunks, updated</summary>"
POLICY = RetryPolicy(max_retries=2, max_retry_after=5.0)


def history(turns: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "word " * 150}
        for i in range(turns)
    ]


@dataclass
class Trace:
    """One shared log of model calls, sleeps and delivered events, with a fake clock."""

    log: list[tuple[Any, ...]] = field(default_factory=list)
    clock: FakeClock = field(default_factory=FakeClock)
    events: list[dict[str, Any]] = field(default_factory=list)

    def call(self, name: str, number: int) -> None:
        self.log.append(("call", name, number))
        self.clock.advance(0.5)  # every call takes half a second of fake time

    def handler(self, event: Event) -> None:
        self.events.append(event.to_dict())
        if isinstance(event, GenerateSummary):
            self.log.append(("event", event.model, event.attempt, event.ok))

    async def ahandler(self, event: Event) -> None:
        self.handler(event)

    def sleep(self, seconds: float) -> None:
        self.log.append(("sleep", seconds))
        self.clock.advance(seconds)

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


@dataclass(eq=False)
class TracedModel(FakeModel):
    """A FakeModel that writes each call into the shared trace before answering."""

    trace: Trace = field(default_factory=Trace)

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        self.trace.call(self.name, len(self.requests) + 1)
        return super().complete(messages, settings=settings)


@dataclass(eq=False)
class AsyncTracedModel(AsyncFakeModel):
    """The async twin of :class:`TracedModel`."""

    trace: Trace = field(default_factory=Trace)

    async def complete(  # type: ignore[override]
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        self.trace.call(self.name, len(self.requests) + 1)
        return await super().complete(messages, settings=settings)


# ---------------------------------------------------------------------------------------------
# Cases: scripted replies per model, and what each twin is asked


@dataclass(frozen=True)
class Case:
    replies: dict[str, list[Any]]
    turns: int = 2
    window: int | None = None
    cooldown: bool = False
    calls: int = 1


CASES = {
    # primary: two transient errors then a tool call (invalid) -> exhausted; failover: an empty
    # answer (invalid) then chunk one's summary; chunk two: the primary answers at once.
    "retries, invalid answers, failover and chunks": Case(
        replies={
            "a": [
                ProviderUnavailable("down"),
                RateLimited("busy", retry_after=3.0),
                tool_call_reply(),
                FINAL,
            ],
            "b": ["", FIRST],
        },
        turns=6,
        window=2000,
    ),
    "a timeout, then a good answer": Case(replies={"a": [ModelTimeout("slow"), FIRST]}),
    "too little content is retried": Case(replies={"a": ["ok", FINAL]}),
    # one complete failure opens the cooldown: the second call is refused without a call
    "cooldown refusal": Case(
        replies={"a": [PermanentModelError("bad key")], "b": [InvalidSummary("no")] * 3},
        cooldown=True,
        calls=2,
    ),
}


@dataclass(frozen=True)
class Outcome:
    """Everything one twin showed on a case."""

    answers: list[Any]
    events: list[dict[str, Any]]
    log: list[tuple[Any, ...]]
    requests: dict[str, list[list[dict[str, Any]]]]


def describe(value: Any) -> Any:
    if isinstance(value, AllModelsFailed):
        return ("AllModelsFailed", str(value), [e.to_dict() for e in value.exceptions])  # type: ignore[attr-defined]
    if isinstance(value, Exception):
        return (type(value).__name__, str(value))
    return value


def options(case: Case, trace: Trace) -> dict[str, Any]:
    cooldown = Cooldown(failures=1, seconds=30.0, clock=trace.clock) if case.cooldown else None
    return {
        "retry": POLICY, "window": case.window, "max_output_tokens": 500,
        "cooldown": cooldown, "clock": trace.clock, "rng": random.Random(11),
    }  # fmt: skip


def run_sync(case: Case) -> Outcome:
    trace = Trace()
    models = [TracedModel(list(r), name=n, trace=trace) for n, r in case.replies.items()]
    summarizer = Summarizer(
        model=models[0], failover=models[1:], on_event=[trace.handler], sleep=trace.sleep,
        **options(case, trace),
    )  # fmt: skip
    answers = []
    for _ in range(case.calls):
        try:
            answers.append(summarizer.summarize(history(case.turns), session_id="s1"))
        except Exception as exc:
            answers.append(describe(exc))
    return Outcome(answers, trace.events, trace.log, {m.name: sent(m) for m in models})


async def run_async(case: Case, *, async_handler: bool = False) -> Outcome:
    trace = Trace()
    models = [AsyncTracedModel(list(r), name=n, trace=trace) for n, r in case.replies.items()]
    handler = trace.ahandler if async_handler else trace.handler
    summarizer = AsyncSummarizer(
        model=models[0], failover=models[1:], on_event=[handler], sleep=trace.asleep,
        **options(case, trace),
    )  # fmt: skip
    answers = []
    for _ in range(case.calls):
        try:
            answers.append(await summarizer.summarize(history(case.turns), session_id="s1"))
        except Exception as exc:
            answers.append(describe(exc))
    return Outcome(answers, trace.events, trace.log, {m.name: sent(m) for m in models})


def sent(model: FakeModel) -> list[list[dict[str, Any]]]:
    return [request.messages for request in model.requests]


# ---------------------------------------------------------------------------------------------
# Parity


@pytest.mark.parametrize("name", list(CASES))
async def test_sync_and_async_summarizers_agree(name: str) -> None:
    """Same case: equal results or errors, events, sleeps, calls (in order) and requests."""
    case = CASES[name]
    sync = run_sync(case)
    assert await run_async(case) == sync
    assert await run_async(case, async_handler=True) == sync


def test_the_full_case_retries_fails_over_and_chunks() -> None:
    """The main case really exercises each path it names, in the expected order."""
    seen = run_sync(CASES["retries, invalid answers, failover and chunks"])
    result = seen.answers[0]
    assert (result.text, result.model, result.attempts) == (
        "1. Primary Request and Intent: both chunks, updated",
        "a",
        6,
    )
    attempts = [(e["phase"], e["model"], e["attempt"], e["ok"]) for e in seen.events]
    assert attempts == [
        ("primary", "a", 1, False),
        ("primary", "a", 2, False),
        ("primary", "a", 3, False),
        ("failover", "b", 1, False),
        ("failover", "b", 2, True),
        ("primary", "a", 1, True),  # chunk two starts the chain again
    ]
    assert [e["error"]["type"] for e in seen.events[:4]] == [
        "ProviderUnavailable",
        "RateLimited",
        "InvalidSummary",
        "InvalidSummary",
    ]
    assert all(e["latency_s"] == 0.5 and e["session_id"] == "s1" for e in seen.events)
    assert ("sleep", 3.0) in seen.log  # the Retry-After hint
    second_request = seen.requests["a"][-1][-1]["content"]
    assert "chunk one" in second_request  # the rolling summary feeds chunk two


def test_the_cooldown_case_refuses_without_calling() -> None:
    """After one complete failure the next summarize raises CoolingDown and calls nothing."""
    seen = run_sync(CASES["cooldown refusal"])
    assert seen.answers[0][0] == "AllModelsFailed"
    assert seen.answers[1][0] == "CoolingDown"
    assert [entry for entry in seen.log if entry[0] == "call"] == [
        ("call", "a", 1),
        ("call", "b", 1),
        ("call", "b", 2),  # an invalid answer is retried once (RetryPolicy.invalid_retries)
    ]


# ---------------------------------------------------------------------------------------------
# Each attempt's event is delivered before the next step starts

INTERLEAVED = Case(
    replies={
        "a": [ProviderUnavailable("down"), tool_call_reply(), PermanentModelError("no")],
        "b": [FIRST],
    },
)


def interleaved() -> list[tuple[Any, ...]]:
    """What both twins must show: each call, then its event, then the backoff or next call."""
    rng = random.Random(11)  # the summarizers' seed: the same jitter draws
    first, second = POLICY.delay(1, rng=rng), POLICY.delay(2, rng=rng)
    return [
        ("call", "a", 1),
        ("event", "a", 1, False),
        ("sleep", first),
        ("call", "a", 2),
        ("event", "a", 2, False),
        ("sleep", second),
        ("call", "a", 3),
        ("event", "a", 3, False),
        ("call", "b", 1),
        ("event", "b", 1, True),
    ]


def test_sync_summarizer_delivers_each_event_before_the_next_call() -> None:
    """Summarizer: call, its event, the backoff, the next call, its event, ..."""
    assert run_sync(INTERLEAVED).log == interleaved()


@pytest.mark.parametrize("async_handler", [False, True])
async def test_async_summarizer_delivers_each_event_before_the_next_call(
    async_handler: bool,
) -> None:
    """AsyncSummarizer too, with sync or async handlers (it used to hold the events back
    until the whole failover chain had ended)."""
    assert (await run_async(INTERLEAVED, async_handler=async_handler)).log == interleaved()
