"""history_processor: what it hands Pydantic AI, message by message (no agent loop here)."""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from synopsis import AsyncCompactor, Compactor
from synopsis.adapters._carried import reattach, split_carried
from synopsis.adapters.pydantic_ai import compaction_capability, history_processor
from synopsis.convert import CARRY_KEY, from_pydantic_ai, to_pydantic_ai
from synopsis.errors import ConfigError
from synopsis.messages import content_type
from synopsis.models.retry import RetryPolicy
from synopsis.testing import AsyncFakeModel, FakeModel
from tests.convert_histories import chat_histories

NO_SLEEP = RetryPolicy(initial_delay=0.0, max_delay=0.0, jitter=False)
SUMMARY = "<summary>1. Primary Request and Intent: research\n8. Current Work: notes</summary>"
PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def history(turns: int = 4) -> list[ModelMessage]:
    """A run's messages: a system prompt, then per turn a tool round and an answer."""
    messages: list[ModelMessage] = []
    for n in range(turns):
        first = [SystemPromptPart("You research.")] if n == 0 else []
        messages += [
            ModelRequest(parts=[*first, UserPromptPart(f"look up topic {n}")], run_id=f"run-{n}"),
            ModelResponse(
                parts=[TextPart("looking"), ToolCallPart("lookup", {"q": n}, tool_call_id=f"c{n}")],
                usage=RequestUsage(input_tokens=100 * n, output_tokens=9),
                model_name="function:research",
                run_id=f"run-{n}",
            ),
            ModelRequest(parts=[ToolReturnPart("lookup", f"notes {n}", tool_call_id=f"c{n}")]),
            ModelResponse(parts=[TextPart(f"answer {n}")], model_name="function:research"),
        ]
    return [*messages, ModelRequest(parts=[UserPromptPart("and now?")])]


def compactor(**options: Any) -> Compactor:
    options = {"trigger_messages": 10, "keep_tail": 3, **options}
    return Compactor(model=FakeModel(default=SUMMARY), retry=NO_SLEEP, **options)


def test_under_the_trigger_the_very_list_comes_back() -> None:
    messages = history(1)
    assert history_processor(compactor(trigger_messages=100))(messages) is messages


def test_kept_messages_come_back_as_they_were_less_their_usage() -> None:
    """Timestamps, run ids and model names survive; the summary follows the system prompt in
    the first request; the history still ends with the request being sent."""
    messages = history()
    result = history_processor(compactor())(messages)
    ours = from_pydantic_ai(result)
    assert [m["role"] for m in ours[:2]] == ["system", "user"]
    assert content_type(ours[1]) == "summary"
    assert isinstance(result[0], ModelRequest) and isinstance(result[-1], ModelRequest)
    # Three messages kept, widened to the tool call the tool return answers.
    assert _without_usage(result[1:]) == _without_usage(messages[-4:])
    # The old usage measured the longer prompt: it must not be the next count's baseline.
    assert all(not m.usage.has_values() for m in result if isinstance(m, ModelResponse))


def _without_usage(messages: list[ModelMessage]) -> list[ModelMessage]:
    return [
        replace(m, usage=RequestUsage()) if isinstance(m, ModelResponse) else m for m in messages
    ]


def test_a_cut_inside_a_request_keeps_tool_returns_with_their_calls() -> None:
    """Two calls answered in one request: the kept tail never starts between them."""
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("do two things " * 20)]),
        ModelResponse(
            parts=[ToolCallPart("a", {}, tool_call_id="x"), ToolCallPart("b", {}, tool_call_id="y")]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("a", "ra", tool_call_id="x"),
                ToolReturnPart("b", "rb", tool_call_id="y"),
            ]
        ),
        ModelResponse(parts=[TextPart("both done")]),
        ModelRequest(parts=[UserPromptPart("thanks")]),
    ]
    result = from_pydantic_ai(
        history_processor(compactor(trigger_messages=2, keep_tail=3))(messages)
    )
    assert content_type(result[0]) == "summary"
    assert [m["role"] for m in result[1:]] == ["assistant", "tool", "tool", "assistant", "user"]


async def test_the_async_processor_gives_what_the_sync_one_gives() -> None:
    messages = history()
    sync = history_processor(compactor())(messages)
    asynchronous = history_processor(
        AsyncCompactor(
            model=AsyncFakeModel(default=SUMMARY), retry=NO_SLEEP, trigger_messages=10, keep_tail=3
        )
    )
    assert inspect.iscoroutinefunction(asynchronous)
    assert from_pydantic_ai(await asynchronous(messages)) == from_pydantic_ai(sync)


def test_the_capability_wraps_the_processor() -> None:
    capability = compaction_capability(compactor())
    assert isinstance(capability, ProcessHistory)
    assert not inspect.iscoroutinefunction(capability.processor)


def test_anything_but_a_compactor_is_refused() -> None:
    with pytest.raises(ConfigError, match="Compactor or an AsyncCompactor"):
        history_processor(object())  # type: ignore[call-overload]


def test_the_summarizer_never_sees_carried_data() -> None:
    summarizer = FakeModel(default=SUMMARY)
    compact = Compactor(model=summarizer, retry=NO_SLEEP, trigger_messages=10, keep_tail=3)
    history_processor(compact)(history())
    assert summarizer.requests
    assert all(CARRY_KEY not in m for r in summarizer.requests for m in r.messages)


@PROPERTY
@given(chat_histories(), chat_histories())
def test_processing_is_compacting_the_converted_history(
    old: list[dict[str, Any]], recent: list[dict[str, Any]]
) -> None:
    """For any history: the processor's output, read back, is what the compactor makes of the
    history read the same way; when nothing is compacted, the list is not touched."""
    messages = to_pydantic_ai([*old, *_without_system(recent)])
    direct = compactor(trigger_messages=1).compact(from_pydantic_ai(messages), force=False)
    processed = history_processor(compactor(trigger_messages=1))(messages)
    if direct.compacted:
        assert from_pydantic_ai(processed) == direct.messages
    else:
        assert processed is messages


def _without_system(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in history if m["role"] not in ("system", "developer")]


@PROPERTY
@given(chat_histories())
def test_reattach_gives_each_kept_message_its_own_carried_data(
    history: list[dict[str, Any]],
) -> None:
    """Whatever a compaction keeps of a converted history converts back to the original."""
    system = [m for m in history if m["role"] in ("system", "developer")]
    opening = [{"role": "user", "content": "start"}, {"role": "assistant", "content": "ok"}]
    ours = from_pydantic_ai(
        to_pydantic_ai([*system, *opening, *_without_system(history)]), keep_extras=True
    )
    plain, carried = split_carried(ours)
    result = compactor(trigger_messages=1, keep_tail=2).compact(plain, force=False)
    if not result.compacted:  # the tail covers everything: nothing to check
        return
    again = reattach(result.messages, plain, carried)
    summary = [content_type(m) for m in result.messages].index("summary")
    tail = len(result.messages) - summary - 1
    if tail and result.messages[summary + 1] != plain[len(plain) - tail]:
        tail -= 1  # the newest user message, pinned ahead of the tail
    for kept, original in zip(again[len(again) - tail :], ours[len(ours) - tail :], strict=True):
        assert kept.get(CARRY_KEY) == original.get(CARRY_KEY)
    for kept, original in zip(again[: len(system)], ours, strict=False):
        assert kept.get(CARRY_KEY) == original.get(CARRY_KEY)
