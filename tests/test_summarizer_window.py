"""Summarizer requests are bounded by the window; impossible windows fail at construction;
what a summary cost (usage, calls) reaches the result, the event, the report and the CLI."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from synopsis.cli import main
from synopsis.compaction.compactor import AsyncCompactor, Compactor
from synopsis.errors import ConfigError, ContextLengthExceeded, ProviderUnavailable
from synopsis.events import AfterSummarize, Event
from synopsis.messages import content_type, open_tool_calls
from synopsis.models._base import ModelResponse, ModelSettings, Usage
from synopsis.models.openai import OpenAIModel
from synopsis.models.retry import RetryPolicy
from synopsis.summarizer import MIN_CONVERSATION_TOKENS, AsyncSummarizer, Summarizer
from synopsis.testing import AsyncFakeModel, FakeModel
from synopsis.tokens import TokenCounter
from synopsis.validation import validate_messages
from tests.strategies import histories

NO_SLEEP = RetryPolicy(max_retries=1, initial_delay=0.0, max_delay=0.0, jitter=False)
SUMMARY = "<summary>1. Primary Request and Intent: keep going with the task</summary>"
DATA = Path(__file__).parent / "data"


@dataclass(eq=False)
class WindowedModel:
    """A fake server with a context limit, like vLLM: a request whose prompt (by ``counter``)
    plus ``max_tokens`` exceeds ``context_window`` is refused with a context-length error.
    The answer is ``words`` words long whatever ``max_tokens`` says."""

    context_window: int
    counter: TokenCounter = field(default_factory=TokenCounter)
    words: int = 40
    name: str = "windowed"
    sizes: list[int] = field(default_factory=list)
    requests: list[list[dict[str, Any]]] = field(default_factory=list)

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        prompt = sum(self.counter.estimate(m) for m in messages)
        size = prompt + (settings.max_tokens or 0 if settings else 0)
        self.sizes.append(size)
        self.requests.append([dict(m) for m in messages])
        if size > self.context_window:
            raise ContextLengthExceeded(f"{size} > {self.context_window}", model=self.name)
        text = "<summary>1. Primary Request and Intent: " + "detail " * self.words + "</summary>"
        return ModelResponse(
            message={"role": "assistant", "content": text},
            model=self.name,
            usage=Usage(prompt, self.words, prompt + self.words),
        )


def big_history(count: int) -> list[dict[str, Any]]:
    """``count`` messages of about 575 characters each (20,000 of them make 11.5 MB): user
    and assistant turns with a tool call and its result every tenth turn."""
    filler = "the quick brown fox jumps over the lazy dog near the river bank " * 9
    messages: list[dict[str, Any]] = []
    while len(messages) < count:
        i = len(messages)
        if i % 10 == 8:
            call = {"id": f"c{i}", "type": "function"}
            call["function"] = {"name": "read_file", "arguments": json.dumps({"path": f"{i}.py"})}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": filler})
        else:
            role = "user" if i % 2 == 0 else "assistant"
            messages.append({"role": role, "content": f"message {i}: {filler}"})
    return messages[:count]


# -- issue 8: no request exceeds the window --------------------------------------------------


@pytest.mark.slow
def test_twenty_thousand_messages_compact_in_chunks_on_an_8k_model() -> None:
    """A 20,000-message history (11.5 MB) and a model with an 8k window that refuses anything
    larger: the compaction succeeds in rolling chunks, every request within the window."""
    history = big_history(20_000)
    assert len(json.dumps(history)) > 11_000_000
    model = WindowedModel(context_window=8_192)
    compactor = Compactor(model=model, retry=NO_SLEEP, fallback="keep")
    result = compactor.compact(history)
    assert result.error is None and result.compacted
    assert len(model.sizes) > 100
    assert max(model.sizes) <= 8_192
    assert content_type(result.messages[0]) == "summary"
    assert result.calls == len(model.sizes)


def test_oversized_messages_and_tool_groups_are_shrunk_to_fit() -> None:
    """A 1 MB tool result, a call with huge arguments and a 300-call parallel group: each is
    shrunk (clipped, or turned into a transcript) so that no request exceeds the window."""
    calls = [
        {"id": f"p{i}", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
        for i in range(300)
    ]
    huge_args = {"id": "w", "type": "function"}
    huge_args["function"] = {"name": "write", "arguments": json.dumps({"text": "x y " * 50_000})}
    history = [
        {"role": "user", "content": "fix the bug " * 10},
        {"role": "assistant", "content": None, "tool_calls": [huge_args]},
        {"role": "tool", "tool_call_id": "w", "content": "ok"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": f"p{i}", "content": "hit " * 300} for i in range(300)),
        {"role": "user", "content": "result " * 250_000},
        {"role": "assistant", "content": "done"},
    ]
    model = WindowedModel(context_window=4_096)
    summarizer = Summarizer(model=model, retry=NO_SLEEP)
    summarizer.summarize(history)
    assert max(model.sizes) <= 4_096
    transcripts = [m for r in model.requests for m in r if "called grep" in str(m.get("content"))]
    assert transcripts  # the parallel group did not fit as messages: it became a transcript


@st.composite
def bulky_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Random valid histories whose messages and tool arguments are blown up at random."""
    history = [m for m in draw(histories(max_turns=25)) if m["role"] != "system"]
    for message in history:
        factor = draw(st.sampled_from([1, 1, 1, 20, 300, 3_000]))
        if isinstance(message.get("content"), str):
            message["content"] = (message["content"] + " word") * factor
        for call in message.get("tool_calls") or ():
            call["function"]["arguments"] = json.dumps({"a": "z " * factor})
    return history


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=bulky_histories(),
    window=st.integers(1_300, 9_000),
    output=st.integers(16, 1_200),
    words=st.integers(1, 3_000),
    previous=st.none() | st.integers(1, 5_000),
    estimator=st.sampled_from(["default", "adk"]),
)
def test_no_request_exceeds_the_window(
    history: list[dict[str, Any]],
    window: int,
    output: int,
    words: int,
    previous: int | None,
    estimator: str,
) -> None:
    """Property: over random histories, small windows, answers that ignore max_tokens and
    long previous summaries, every request (system prompt, previous summary, chunk and
    instruction, counted by the summarizer's own estimator) plus the answer budget fits the
    window, and no request separates a tool call from its results."""
    counter = TokenCounter(estimator=estimator)
    model = WindowedModel(context_window=window, counter=counter, words=words)
    try:
        summarizer = Summarizer(
            model=model, retry=NO_SLEEP, counter=counter, max_output_tokens=output
        )
    except ConfigError:
        assume(False)
        return
    earlier = None if previous is None else "earlier fact " * previous
    summarizer.summarize(history, previous_summary=earlier)
    assert all(size <= window for size in model.sizes)
    for request in model.requests:
        assert sum(summarizer.counter.estimate(m) for m in request) + output <= window
        validate_messages(request)
        assert not open_tool_calls(request)


# -- issue 9: small windows, derived output, construction-time errors ---------------------------


def test_an_8k_model_compacts_instead_of_raising_from_the_hook() -> None:
    """An 8k summarizer used to make every compaction raise ConfigError inside the hook
    (8,192 - 8,192 output tokens); now the output budget is derived and the hook compacts."""
    history = big_history(60)
    model = WindowedModel(context_window=8_192)
    compactor = Compactor(model=model, retry=NO_SLEEP, trigger_tokens=1_000)
    out = compactor(history)
    assert content_type(out[0]) == "summary"
    # The window gives a quarter of 8,192; the compactor caps the answer by its trigger too
    # (two fifths of 1,000 tokens, never below 256), so a compaction ends under its trigger.
    assert Summarizer(model=model).max_output_tokens == 2_048
    assert compactor.summarizer.max_output_tokens == 400  # type: ignore[attr-defined]
    assert max(model.sizes) <= 8_192


def test_the_output_budget_is_derived_from_the_window_and_configurable() -> None:
    """Default: a quarter of the window (at least 1,024, at most the model's own limit);
    max_output_tokens= overrides it and reaches the request's settings."""
    fake = FakeModel(default=SUMMARY, context_window=32_000)
    assert Summarizer(model=fake).max_output_tokens == 8_000
    assert Summarizer(model=fake, max_output_tokens=700).settings.max_tokens == 700
    assert Summarizer(model=FakeModel(default=SUMMARY)).max_output_tokens == 8_192  # no window
    gpt4 = OpenAIModel("gpt-4o", api_key="k")
    assert Summarizer(model=gpt4).max_output_tokens == 16_384  # the model's own limit
    gpt4.close()


@pytest.mark.parametrize(
    "options",
    [
        {"window": 8_192, "max_output_tokens": 8_192},
        {"window": 2_000},  # the derived 1,024 output leaves no room
        {"window": 1_000, "max_output_tokens": 100},
        {"window": 0},
    ],
)
def test_impossible_windows_fail_at_construction(options: dict[str, Any]) -> None:
    """A window that cannot hold the prompts, the answer and some conversation is a
    ConfigError when the summarizer is built, never when it summarizes."""
    with pytest.raises(ConfigError):
        Summarizer(model=FakeModel(default=SUMMARY), **options)
    with pytest.raises(ConfigError):
        AsyncSummarizer(model=FakeModel(default=SUMMARY), **options)


@pytest.mark.parametrize("kind", [Compactor, AsyncCompactor])
def test_compactors_reject_impossible_windows_when_built(kind: type) -> None:
    """summarizer_window / summarizer_max_output_tokens are checked by the compactors'
    constructors (and an output at least the window by the options themselves)."""
    with pytest.raises(ConfigError, match="too small"):
        kind(summarizer_window=4_000, summarizer_max_output_tokens=3_000)
    with pytest.raises(ConfigError, match="summarizer_max_output_tokens"):
        kind(summarizer_window=4_000, summarizer_max_output_tokens=4_000)
    compactor = kind(summarizer_window=4_000, summarizer_max_output_tokens=500)
    assert (compactor.summarizer.window, compactor.summarizer.max_output_tokens) == (4_000, 500)


def test_unknown_provider_models_get_the_conservative_window() -> None:
    """An unknown model behind an OpenAI-compatible server is summarized in 8k requests."""
    model = OpenAIModel("my-local-model", api_key="k", base_url="http://127.0.0.1:9/v1")
    summarizer = Summarizer(model=model)
    assert (summarizer.window, summarizer.max_output_tokens) == (8_192, 2_048)
    model.close()


def test_the_hook_survives_a_previous_summary_larger_than_the_window() -> None:
    """An old summary longer than the whole window is clipped, not sent, not raised."""
    model = WindowedModel(context_window=4_096)
    compactor = Compactor(model=model, retry=NO_SLEEP, trigger_tokens=500)
    first = compactor(big_history(30))
    summary = dict(first[0])
    summary["content"] = "<summary>" + "an old fact " * 6_000 + "</summary>"
    out = compactor([summary, *big_history(30)])
    assert content_type(out[0]) == "summary"
    assert max(model.sizes) <= 4_096


# -- issue 11: what a summary cost --------------------------------------------------------------


def answer(text: str, prompt: int, completion: int) -> ModelResponse:
    return ModelResponse(
        message={"role": "assistant", "content": text},
        model="m",
        usage=Usage(prompt, completion, prompt + completion),
    )


def test_usage_sums_every_answer_over_retries_and_chunks() -> None:
    """An error costs nothing, an invalid answer is paid for, every chunk counts: usage is
    the sum over every answer received, calls how many there were."""
    replies: list[Any] = [
        ProviderUnavailable("down"),
        answer("", 100, 0),  # invalid, retried, still paid for
        answer("<summary>1. Primary Request and Intent: chunk one</summary>", 900, 40),
        answer("<summary>1. Primary Request and Intent: both chunks</summary>", 800, 30),
    ]
    model = FakeModel(replies, name="m", context_window=2_000)
    retry = RetryPolicy(max_retries=3, initial_delay=0.0, max_delay=0.0, jitter=False)
    summarizer = Summarizer(model=model, retry=retry, max_output_tokens=400)
    history = [{"role": "user", "content": f"turn {i} " + "word " * 150} for i in range(8)]
    result = summarizer.summarize(history)
    assert result.text == "1. Primary Request and Intent: both chunks"
    assert (result.attempts, result.calls, result.model) == (4, 3, "m")
    assert result.usage == Usage(1_800, 70, 1_870)


async def test_async_twin_sums_usage_the_same_way() -> None:
    """AsyncSummarizer: the same usage and calls for the same answers."""
    from synopsis.testing import AsyncFakeModel

    replies = [answer("", 5, 0), answer(SUMMARY, 7, 3)]
    summarizer = AsyncSummarizer(model=AsyncFakeModel(replies), retry=NO_SLEEP)
    result = await summarizer.summarize([{"role": "user", "content": "hi"}])
    assert (result.usage, result.calls) == (Usage(12, 3, 15), 2)


def test_usage_reaches_the_event_the_result_and_its_report() -> None:
    """after_summarize, CompactionResult and report() carry the usage, model and calls."""
    events: list[Event] = []
    model = FakeModel([answer(SUMMARY, 1_234, 56)], name="provider:model")
    compactor = Compactor(model=model, retry=NO_SLEEP, on_event=[events.append])
    result = compactor.compact(big_history(30))
    after = next(e for e in events if isinstance(e, AfterSummarize))
    expected = {"prompt_tokens": 1_234, "completion_tokens": 56, "total_tokens": 1_290}
    assert (after.usage, after.calls, after.model) == (expected, 1, "provider:model")
    assert json.loads(json.dumps(after.to_dict()))["usage"] == expected
    assert (result.usage, result.calls) == (Usage(1_234, 56, 1_290), 1)
    report = result.report()
    assert (report["usage"], report["calls"], report["model"]) == (expected, 1, "provider:model")


def test_the_cli_reports_what_the_summary_cost(tmp_path: Path) -> None:
    """``synopsis compact`` shows the usage in its JSON report and in its table."""
    runner = CliRunner()
    args = ["compact", str(DATA / "seed-d.json"), "--force", "-o", str(tmp_path / "o.json")]
    result = runner.invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["calls"] == 1 and report["usage"]["completion_tokens"] > 0
    table = runner.invoke(main, args)
    assert table.exit_code == 0
    assert "usage" in table.stderr and "completion" in table.stderr


def test_the_cli_takes_the_summarizer_window_flags(tmp_path: Path) -> None:
    """--summarizer-window / --summarizer-max-output reach the summarizer; an impossible pair
    is one clear line and exit code 2."""
    args = ["compact", str(DATA / "seed-d.json"), "--force", "-o", str(tmp_path / "o.json")]
    ok = CliRunner().invoke(
        main, [*args, "--summarizer-window", "4000", "--summarizer-max-output", "500", "--json"]
    )
    assert ok.exit_code == 0, ok.output
    bad = CliRunner().invoke(main, [*args, "--summarizer-window", "1000"])
    assert bad.exit_code == 2
    assert bad.stderr.startswith("synopsis: error:") and "window" in bad.stderr


@pytest.mark.parametrize(
    ("kind", "fake"), [(Compactor, FakeModel), (AsyncCompactor, AsyncFakeModel)]
)
def test_a_window_without_room_is_refused_when_built_naming_the_option(
    kind: type, fake: type
) -> None:
    """LangChain's case: ``summarizer_window=100`` fails at construction, naming the option,
    what the window must leave room for, and the smallest window that works (which does)."""
    with pytest.raises(ConfigError) as refused:
        kind(model=fake(default=SUMMARY), summarizer_window=100)
    message = str(refused.value)
    for part in ("summarizer_window=", "of 100 tokens", "the prompts", "the answer", "the rolling"):
        assert part in message
    assert f"at least {MIN_CONVERSATION_TOKENS} tokens of conversation" in message
    found = re.search(r"a window of at least (\d+) tokens", message)
    assert found is not None
    smallest = int(found.group(1))
    assert kind(model=fake(default=SUMMARY), summarizer_window=smallest).summarizer.window
    with pytest.raises(ConfigError, match="too small"):
        kind(model=fake(default=SUMMARY), summarizer_window=smallest - 1)
