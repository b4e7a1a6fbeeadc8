"""Any Pydantic AI model can be the summarizer (issue 23, item 5), driven through Pydantic
AI's own API with no tools, tested with its own fakes (FunctionModel, TestModel)."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from synopsis import (
    AllModelsFailed,
    AsyncCompactor,
    AsyncSummarizer,
    Compactor,
    ConfigError,
    InvalidSummary,
    Summarizer,
)
from synopsis.prompts import ENGLISH

SUMMARY = "The user asked for the parser fix; it is done."
HISTORY = [
    {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} about the parser"}
    for i in range(12)
]


@pytest.fixture(autouse=True)
def close_the_threads_loop() -> Iterator[None]:
    """Pydantic AI's sync API runs on the thread's event loop, made on first use and kept;
    close it after each test, so a later ``asyncio.run`` does not orphan it unclosed."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:
            return
    if not loop.is_running():
        loop.close()
        asyncio.set_event_loop(None)


class Recorder:
    """A FunctionModel body that records what Pydantic AI hands it and answers ``parts``."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[list[ModelMessage], AgentInfo]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls.append((messages, info))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer if isinstance(answer, ModelResponse) else ModelResponse([TextPart(answer)])


def test_a_function_model_summarizes_a_compaction_with_no_tools() -> None:
    recorder = Recorder(SUMMARY)
    compactor = Compactor(model=FunctionModel(recorder), trigger_messages=4, keep_tail=2)
    result = compactor.compact(HISTORY)
    assert result.compacted and result.calls == 1 and SUMMARY in str(result.messages[0])
    [(messages, info)] = recorder.calls
    assert info.function_tools == [] and info.output_tools == []
    assert info.model_settings is not None and info.model_settings["max_tokens"] > 0
    system = messages[0].parts[0]
    assert system.part_kind == "system-prompt" and system.content == ENGLISH.summarizer_system
    assert "turn 0 about the parser" in str(messages)
    assert result.usage is not None and result.usage.completion_tokens > 0
    assert result.model is not None and result.model.startswith("pydantic-ai:function")


def test_the_async_path_awaits_the_model() -> None:
    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(0)
        return ModelResponse([TextPart(SUMMARY)])

    compactor = AsyncCompactor(model=FunctionModel(answer), trigger_messages=4, keep_tail=2)
    result = asyncio.run(compactor.compact(HISTORY))
    assert result.compacted and SUMMARY in str(result.messages[0])
    summarizer = AsyncSummarizer(model=TestModel(custom_output_text=SUMMARY))
    assert asyncio.run(summarizer.summarize(HISTORY)).text == SUMMARY


def test_pydantic_ais_test_model_works_in_the_sync_summarizer() -> None:
    result = Summarizer(model=TestModel(custom_output_text=SUMMARY)).summarize(HISTORY)
    assert result.text == SUMMARY and result.model == "pydantic-ai:test"


def test_a_tool_call_answer_is_invalid_asked_again_once_then_fails_over() -> None:
    calling = Recorder(ModelResponse([ToolCallPart("read_file", {"path": "x"}, "c1")]))
    backup = Recorder("From the backup.")
    summarizer = Summarizer(
        model=FunctionModel(calling), failover=[FunctionModel(backup)], sleep=lambda s: None
    )
    assert summarizer.summarize(HISTORY).text == "From the backup."
    assert len(calling.calls) == 2
    with pytest.raises(AllModelsFailed) as failed:
        Summarizer(model=FunctionModel(calling), sleep=lambda s: None).summarize(HISTORY)
    assert isinstance(failed.value.exceptions[0].last_error, InvalidSummary)  # type: ignore[attr-defined]


def test_pydantic_ais_http_errors_are_retried_only_when_transient() -> None:
    busy = Recorder(ModelHTTPError(503, "m"), SUMMARY)
    assert (
        Summarizer(model=FunctionModel(busy), sleep=lambda s: None).summarize(HISTORY).attempts == 2
    )
    refused = Recorder(ModelHTTPError(401, "m"))
    with pytest.raises(AllModelsFailed):
        Summarizer(model=FunctionModel(refused), sleep=lambda s: None).summarize(HISTORY)
    assert len(refused.calls) == 1


def test_an_agent_is_refused_with_the_advice_to_pass_its_model() -> None:
    agent = Agent(TestModel())
    with pytest.raises(ConfigError, match="pass its model instead"):
        Summarizer(model=agent)  # type: ignore[arg-type]
