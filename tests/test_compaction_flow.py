"""The compaction flow, written once: the same steps and results whichever driver runs it.

A tiny synchronous ``perform`` in this file drives the pure flow; the real ``Compactor`` and
``AsyncCompactor`` must carry out exactly the same steps and return the same result. Then
both compactors, with real summarizers over scripted models, must agree on results and on
every event their handlers receive, failures and fallbacks included.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synopsis._flow import Emit, drive
from synopsis.compaction._flow import (
    CompactionResult,
    SummarizeOffline,
    WriteArchive,
    compaction,
)
from synopsis.compaction.archive import MemoryArchive
from synopsis.compaction.compactor import AsyncCompactor, Compactor
from synopsis.compaction.model import (
    AsyncCompactingModel,
    CallModel,
    CompactForModel,
    CompactingModel,
    CompactOverflow,
    compacting_call,
)
from synopsis.compaction.options import CompactionOptions
from synopsis.errors import (
    AllModelsFailed,
    CompactionError,
    ContextLengthExceeded,
    ModelError,
    ProviderUnavailable,
)
from synopsis.events import BeforeSummarize
from synopsis.models.retry import RetryPolicy
from synopsis.summarizer import (
    AsyncSummarizer,
    Summarize,
    Summarizer,
    SummaryResult,
    extract_summary,
)
from synopsis.testing import AsyncFakeModel, FakeClock, FakeModel, RecordingSleep
from synopsis.tokens import TokenCounter
from tests.strategies import histories

DATA = Path(__file__).parent / "data"
SUMMARY = (
    "<analysis>thinking</analysis><summary>1. Primary Request and Intent: fix the bug\n"
    "8. Current Work: tests</summary>"
)
NO_SLEEP = RetryPolicy(initial_delay=0.0, max_delay=0.0, jitter=False)
GOOD = SummaryResult(text=extract_summary(SUMMARY), model="fake:model", attempts=1)
DOWN = AllModelsFailed("every model failed", [ProviderUnavailable("down", model="fake:model")])


def load(name: str) -> list[dict[str, Any]]:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


class FailingArchive:
    """An archive whose disk is full."""

    def write(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None) -> str:
        raise CompactionError("cannot archive replaced messages: disk full")


@dataclass(frozen=True)
class Case:
    """One way a compaction can go: what the summarizer answers, the fallback, the archive."""

    answer: SummaryResult | ModelError
    fallback: str = "keep"
    archive: Callable[[], Any] = MemoryArchive
    force: bool = True

    def options(self, keep_tail: int = 2) -> CompactionOptions:
        """Fresh options (a new archive each time, so archive URIs repeat)."""
        return CompactionOptions.from_keywords(
            fallback=self.fallback,  # type: ignore[typeddict-item]
            archive=self.archive(),
            session_id="s1",
            keep_tail=keep_tail,
        )


CASES = {
    "summarized": Case(GOOD),
    "fallback keep": Case(DOWN),
    "fallback extractive": Case(DOWN, fallback="extractive"),
    "fallback truncate": Case(DOWN, fallback="truncate"),
    "archive fails": Case(GOOD, archive=FailingArchive),
    "truncate, archive fails": Case(DOWN, fallback="truncate", archive=FailingArchive),
    "below the trigger": Case(GOOD, force=False),
}


# -- a tiny perform against the real drivers ------------------------------------------------------


def tiny_run(
    case: Case, messages: list[dict[str, Any]], keep_tail: int = 2
) -> tuple[CompactionResult, list[Any]]:
    """Drive the pure flow with a perform written here: scripted answers, no compactor."""
    steps: list[Any] = []
    options = case.options(keep_tail)

    def perform(step: Any) -> Any:
        steps.append(step)
        match step:
            case Summarize():
                if isinstance(case.answer, ModelError):
                    raise case.answer
                return case.answer
            case SummarizeOffline(context, previous, prompts):
                offline = Summarizer(model="extractive", prompts=options.texts).speaking(prompts)
                return offline.summarize(context, previous_summary=previous)
            case WriteArchive(replaced, session_id):
                return options.archive.write(replaced, session_id=session_id)  # type: ignore[union-attr]
        return None

    flow = compaction(options, TokenCounter(), messages, force=case.force)
    return drive(flow, perform), steps


@dataclass
class ScriptedSummarizer:
    """Answers every summarize call with the case's result or error."""

    answer: SummaryResult | ModelError

    def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:
        if isinstance(self.answer, ModelError):
            raise self.answer
        return self.answer


class AsyncScriptedSummarizer(ScriptedSummarizer):
    async def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:  # type: ignore[override]
        return ScriptedSummarizer.summarize(self, messages)


class RecordingCompactor(Compactor):
    """The real sync driver, noting each step it performs."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.steps: list[Any] = []

    def _perform(self, step: Any) -> Any:
        self.steps.append(step)
        return super()._perform(step)


class AsyncRecordingCompactor(AsyncCompactor):
    """The real async driver, noting each step it performs."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.steps: list[Any] = []

    async def _perform(self, step: Any) -> Any:
        self.steps.append(step)
        return await super()._perform(step)


@pytest.mark.parametrize("name", CASES)
async def test_the_drivers_perform_the_steps_a_tiny_perform_sees(name: str) -> None:
    """Same input, same answers: the sync driver, the async driver and a perform written in
    the test go through identical steps and return identical results."""
    case, history = CASES[name], load("seed-d.json")
    expected, expected_steps = tiny_run(case, history)
    sync = RecordingCompactor(options=case.options(), summarizer=ScriptedSummarizer(case.answer))
    asynchronous = AsyncRecordingCompactor(
        options=case.options(), summarizer=AsyncScriptedSummarizer(case.answer)
    )
    assert sync.compact(history, force=case.force) == expected
    assert await asynchronous.compact(history, force=case.force) == expected
    assert sync.steps == expected_steps == asynchronous.steps


def test_the_flow_asks_for_a_summary_after_announcing_it() -> None:
    """Steps in order: before_summarize, the summary, the archive, after_summarize."""
    result, steps = tiny_run(CASES["summarized"], load("seed-d.json"))
    kinds = [type(step).__name__ for step in steps]
    assert kinds == ["Emit", "Summarize", "WriteArchive", "Emit"]
    assert isinstance(steps[0].event, BeforeSummarize) and steps[1].session_id == "s1"
    assert [step.event for step in steps if isinstance(step, Emit)] == list(result.events)


def test_below_the_trigger_the_flow_takes_no_step() -> None:
    """Nothing fires: the flow returns at once, without any I/O step."""
    result, steps = tiny_run(CASES["below the trigger"], load("seed-d.json"))
    assert steps == [] and not result.triggered and not result.compacted


def test_a_failing_extractive_fallback_reaches_the_caller() -> None:
    """An error the flow does not handle (the offline summarizer failing) is not swallowed."""
    flow = compaction(CASES["fallback extractive"].options(), TokenCounter(), load("seed-d.json"))

    def perform(step: Any) -> Any:
        if isinstance(step, Summarize | SummarizeOffline):
            raise DOWN
        return None

    with pytest.raises(AllModelsFailed):
        drive(flow, perform)


# -- sync and async compactors agree, events included ---------------------------------------------


def failing(model_type: type[FakeModel]) -> FakeModel:
    return model_type(default=ProviderUnavailable("down", model="fake:model"))


MODEL_CASES: dict[str, tuple[Callable[[type[FakeModel]], FakeModel], dict[str, Any]]] = {
    "summarized": (lambda t: t([SUMMARY]), {}),
    "retried once": (lambda t: t([ProviderUnavailable("x", model="fake:model"), SUMMARY]), {}),
    "fallback keep": (failing, {"fallback": "keep"}),
    "fallback extractive": (failing, {"fallback": "extractive"}),
    "fallback truncate": (failing, {"fallback": "truncate"}),
    "archive fails": (lambda t: t([SUMMARY]), {"archive": FailingArchive}),
    "truncate, archive fails": (failing, {"fallback": "truncate", "archive": FailingArchive}),
}


def twins(model: Callable[[type[FakeModel]], FakeModel], options: dict[str, Any]) -> Any:
    """A sync and an async compactor with real summarizers over the same scripted model, each
    with its own archive and a list of the events its handlers received."""
    seen: tuple[list[Any], list[Any]] = ([], [])
    options = {"archive": MemoryArchive, **options}
    make_archive = options.pop("archive")
    sync_summarizer = Summarizer(
        model=model(FakeModel),
        retry=NO_SLEEP,
        sleep=RecordingSleep(),
        clock=FakeClock(),
        on_event=[seen[0].append],
    )
    async_summarizer = AsyncSummarizer(
        model=model(AsyncFakeModel),
        retry=NO_SLEEP,
        sleep=RecordingSleep().asleep,
        clock=FakeClock(),
        on_event=[seen[1].append],
    )
    common = {"session_id": "s1", **options}
    sync = Compactor(
        summarizer=sync_summarizer, on_event=[seen[0].append], archive=make_archive(), **common
    )
    asynchronous = AsyncCompactor(
        summarizer=async_summarizer, on_event=[seen[1].append], archive=make_archive(), **common
    )
    return sync, asynchronous, seen


@pytest.mark.parametrize("name", MODEL_CASES)
async def test_sync_and_async_compactors_agree_on_results_and_events(name: str) -> None:
    """Equal results, and every handler sees the same events in the same order."""
    model, options = MODEL_CASES[name]
    sync, asynchronous, (sync_events, async_events) = twins(model, options)
    history = load("seed-d.json")
    expected = sync.compact(history)
    assert await asynchronous.compact(history) == expected
    assert sync_events == async_events
    assert sync_events[0].name == "before_summarize"
    assert [e for e in sync_events if e.name != "generate_summary"] == list(expected.events)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(max_turns=10), st.integers(0, 4), st.sampled_from(list(CASES)))
def test_drivers_agree_on_random_histories(history: list[Any], keep: int, name: str) -> None:
    """On any valid history the tiny perform and both drivers take the same steps."""
    case = CASES[name]
    expected, expected_steps = tiny_run(case, history, keep)
    sync = RecordingCompactor(
        options=case.options(keep), summarizer=ScriptedSummarizer(case.answer)
    )
    asynchronous = AsyncRecordingCompactor(
        options=case.options(keep), summarizer=AsyncScriptedSummarizer(case.answer)
    )
    assert sync.compact(history, force=case.force) == expected
    assert asyncio.run(asynchronous.compact(history, force=case.force)) == expected
    assert sync.steps == expected_steps == asynchronous.steps


# -- the compacting model, written once -----------------------------------------------------------


def test_compacting_call_compacts_again_only_on_overflow() -> None:
    """The model flow: hook, call; on a context-length error compact (overflow) and call again."""
    steps: list[Any] = []
    compacted = CompactionResult(
        messages=[{"role": "user", "content": "short"}],
        triggered=False,
        compacted=True,
        reason="overflow",
        tokens_before=10,
        tokens_after=2,
    )

    def perform(step: Any) -> Any:
        steps.append(step)
        match step:
            case CompactForModel(messages):
                return list(messages)
            case CompactOverflow():
                return compacted
            case CallModel(messages) if len(steps) == 2:
                raise ContextLengthExceeded("too long", model="agent")
        return "answer"

    history = [{"role": "user", "content": "long"}]
    assert drive(compacting_call(history, None), perform) == "answer"
    assert steps == [
        CompactForModel(history),
        CallModel(history, None),
        CompactOverflow(history),
        CallModel(compacted.messages, None),
    ]


def test_an_overflow_that_compaction_cannot_fix_is_raised() -> None:
    """When the overflow compaction changes nothing, the provider's error stands."""
    agent = FakeModel(default=ContextLengthExceeded("too long", model="agent"), name="agent")
    wrapped = CompactingModel(agent, Compactor(trigger_tokens=10**9))
    with pytest.raises(ContextLengthExceeded):
        wrapped.complete([{"role": "system", "content": "nothing to summarize"}])
    assert len(agent.requests) == 1


async def test_the_async_compacting_model_raises_the_same_way() -> None:
    """The async twin drives the same flow: an unfixable overflow is raised after one call."""
    agent = AsyncFakeModel(default=ContextLengthExceeded("too long", model="a"), name="a")
    wrapped = AsyncCompactingModel(agent, AsyncCompactor(trigger_tokens=10**9))
    with pytest.raises(ContextLengthExceeded):
        await wrapped.complete([{"role": "system", "content": "nothing to summarize"}])
    assert len(agent.requests) == 1 and wrapped.name == "a"
