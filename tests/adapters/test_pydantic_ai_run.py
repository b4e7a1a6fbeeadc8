"""history_processor in Pydantic AI's own loop: 30 turns with tool calls through Agent.run.

The agent's model is Pydantic AI's ``FunctionModel`` (no network): it calls a tool on odd
turns and answers after the tool's return; Pydantic AI reports its usage, which the compactor
takes as the counting baseline. A first history processor records what reaches ours and
whether the trigger fires on it; a counting fake model summarizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from synopsis import AsyncCompactor, Compactor
from synopsis.adapters.pydantic_ai import compaction_capability, history_processor
from synopsis.convert import CARRY_KEY, from_pydantic_ai
from synopsis.messages import content_type
from synopsis.models.retry import RetryPolicy
from synopsis.testing import AsyncFakeModel, FakeModel

NO_SLEEP = RetryPolicy(initial_delay=0.0, max_delay=0.0, jitter=False)
SUMMARY = (
    "<summary>1. Primary Request and Intent: look things up\n"
    "6. All user messages:\n<all_user_messages>\n- the model's paraphrase\n"
    "</all_user_messages>\n8. Current Work: lookups</summary>"
)
TURNS = 30
MARKER = "<synopsis:summary"


def user_text(turn: int) -> str:
    if turn % 2:
        return f"turn {turn}: please look up topic{turn}"
    return f"turn {turn}: thanks, what next?"


def tool_then_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1].parts[-1]
    if isinstance(last, UserPromptPart) and "look up" in str(last.content):
        topic = str(last.content).rsplit(" ", 1)[-1]
        return ModelResponse(parts=[ToolCallPart("lookup", {"topic": topic})])
    return ModelResponse(parts=[TextPart(f"answer after {len(messages)} messages: " + "ok " * 8)])


@dataclass
class Request:
    """One model request: the turn, the messages the model saw, whether the trigger fired."""

    turn: int
    fired: bool
    seen: list[ModelMessage]


class Recorder:
    """A history processor placed before ours: records whether the trigger fires."""

    def __init__(self, compactor: Compactor | AsyncCompactor) -> None:
        self.compactor = compactor
        self.turn = 0
        self.fired: list[tuple[int, bool]] = []

    def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        decision = self.compactor.should_compact(from_pydantic_ai(messages))
        self.fired.append((self.turn, decision.fired))
        return messages


async def thirty_turns(
    compactor: Compactor | AsyncCompactor, summarizer: FakeModel
) -> tuple[list[Request], list[int]]:
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        return tool_then_answer(messages, info)

    recorder = Recorder(compactor)
    agent = Agent(
        FunctionModel(model),
        system_prompt="You are a researcher.",
        capabilities=[ProcessHistory(recorder), compaction_capability(compactor)],
    )

    @agent.tool_plain
    def lookup(topic: str) -> str:
        """Look a topic up."""
        return f"notes on {topic}: " + "detail " * 12

    history: list[ModelMessage] = []
    summarizer_calls = []
    for turn in range(TURNS):
        recorder.turn = turn
        result = await agent.run(user_text(turn), message_history=history)
        history = result.all_messages()
        summarizer_calls.append(len(summarizer.requests))
    requests = [
        Request(turn, fired, messages)
        for (turn, fired), messages in zip(recorder.fired, seen, strict=True)
    ]
    return requests, summarizer_calls


def print_table(title: str, requests: list[Request], summarizer_calls: list[int]) -> None:
    print(f"\n{title}\nturn  trigger  messages seen per model call  summarizer calls")
    for turn in range(TURNS):
        mine = [r for r in requests if r.turn == turn]
        fired = "fired" if any(r.fired for r in mine) else "-"
        counts = [len(from_pydantic_ai(r.seen)) for r in mine]
        print(f"{turn:>4}  {fired:>7}  {counts!s:>28}  {summarizer_calls[turn]:>16}")


def assert_paired(messages: list[ModelMessage]) -> None:
    calls: list[str] = []
    returned: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                calls.append(part.tool_call_id)
            elif isinstance(part, ToolReturnPart):
                assert part.tool_call_id in calls  # never an orphaned tool return
                returned.append(part.tool_call_id)
    assert sorted(calls) == sorted(returned)  # never a dangling tool call


def user_prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and MARKER not in str(part.content)
    ]


def check_run(requests: list[Request], calls: list[int], summarizer: FakeModel) -> None:
    sent_by_user = [user_text(turn) for turn in range(TURNS)]
    fired_per_turn = [sum(r.fired for r in requests if r.turn == t) for t in range(TURNS)]
    per_turn = [b - a for a, b in zip([0, *calls], calls, strict=False)]
    # Compaction happens when the trigger fires and only then; one summarizer call each.
    assert per_turn == fired_per_turn
    assert len(summarizer.requests) == sum(fired_per_turn) >= 5
    for request in requests:
        assert_paired(request.seen)
        users = user_prompts(request.seen)
        newest = sent_by_user.index(users[-1])
        assert users[-1] == user_text(request.turn)
        assert users == sent_by_user[newest - len(users) + 1 : newest + 1]  # verbatim, in order
        texts = [str(getattr(p, "content", "")) for m in request.seen for p in m.parts]
        assert sum(MARKER in text for text in texts) <= 1
    assert all(CARRY_KEY not in m for r in summarizer.requests for m in r.messages)
    for request in summarizer.requests[1:]:
        context = request.messages[1:-1]
        assert all(content_type(m) is None and MARKER not in str(m["content"]) for m in context)
        assert "<previous_summary>" in request.messages[-1]["content"]


async def test_thirty_turns_through_agent_run_with_an_async_compactor() -> None:
    summarizer = AsyncFakeModel(default=SUMMARY)
    compactor = AsyncCompactor(model=summarizer, retry=NO_SLEEP, trigger_tokens=300, keep_tail=4)
    requests, calls = await thirty_turns(compactor, summarizer)
    print_table("Pydantic AI, AsyncCompactor (trigger 300 tokens, usage baseline)", requests, calls)
    check_run(requests, calls, summarizer)


async def test_thirty_turns_through_agent_run_with_a_sync_compactor() -> None:
    summarizer = FakeModel(default=SUMMARY)
    compactor = Compactor(model=summarizer, retry=NO_SLEEP, trigger_messages=14, keep_tail=4)
    requests, calls = await thirty_turns(compactor, summarizer)
    print_table("Pydantic AI, Compactor (trigger 14 messages)", requests, calls)
    check_run(requests, calls, summarizer)


@pytest.mark.parametrize("make", [Compactor, AsyncCompactor])
async def test_the_run_goes_on_from_the_summary(make: Any) -> None:
    """After a compaction the run's own history holds the summary, so the next turn's
    ``message_history=result.all_messages()`` starts from it."""
    summarizer = (
        FakeModel(default=SUMMARY) if make is Compactor else AsyncFakeModel(default=SUMMARY)
    )
    compactor = make(model=summarizer, retry=NO_SLEEP, trigger_messages=4, keep_tail=2)
    processor = ProcessHistory(history_processor(compactor))  # the processor as Pydantic AI has it
    agent = Agent(FunctionModel(tool_then_answer), capabilities=[processor])
    history: list[ModelMessage] = []
    for turn in range(3):
        history = (await agent.run(user_text(turn), message_history=history)).all_messages()
    ours = from_pydantic_ai(history)
    assert [content_type(m) for m in ours].count("summary") == 1
    assert content_type(ours[0]) == "summary" and ours[-2]["content"] == user_text(2)
    assert summarizer.requests
