"""SynopsisSession in the Agents SDK's own loop: 30 turns with tool calls through Runner.run.

The agent's model is an Agents SDK ``Model`` written here (no network): it calls a tool on
odd turns and answers after the tool's output, recording every input it is sent. The session
compacts with a low trigger and a counting fake summarizer.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from agents import (
    Agent,
    Model,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    RunConfig,
    Runner,
    Usage,
    function_tool,
)
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from synopsis import AsyncCompactor, Compactor
from synopsis.adapters.openai_agents import SynopsisSession
from synopsis.convert import CARRY_KEY, from_responses_items
from synopsis.memory import AsyncInMemoryStore, SQLiteStore
from synopsis.messages import content_type
from synopsis.models.retry import RetryPolicy
from synopsis.testing import AsyncFakeModel, FakeModel

NO_TRACING = RunConfig(tracing_disabled=True)
NO_SLEEP = RetryPolicy(initial_delay=0.0, max_delay=0.0, jitter=False)
SUMMARY = (
    "<summary>1. Primary Request and Intent: look things up\n"
    "6. All user messages:\n<all_user_messages>\n- the model's paraphrase\n"
    "</all_user_messages>\n8. Current Work: lookups</summary>"
)
TURNS = 30
MARKER = "<synopsis:summary"


@function_tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"notes on {topic}: " + "detail " * 12


@dataclass
class ToolThenAnswer(Model):
    """Calls ``lookup`` when the newest input is a user message asking to look something up,
    answers otherwise; records the input of every call."""

    inputs: list[list[dict[str, Any]]] = field(default_factory=list)

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        items = [dict(item) for item in input] if isinstance(input, list) else []
        self.inputs.append(json.loads(json.dumps(items)))
        number = len(self.inputs)
        last = items[-1] if items else {}
        if last.get("role") == "user" and "look up" in str(last.get("content")):
            topic = str(last["content"]).rsplit(" ", 1)[-1]
            output: list[Any] = [
                ResponseFunctionToolCall(
                    id=f"fc_{number}",
                    type="function_call",
                    call_id=f"call_{number}",
                    name="lookup",
                    arguments=json.dumps({"topic": topic}),
                    status="completed",
                )
            ]
        else:
            output = [_message(f"msg_{number}", f"answer {number}: " + "fine " * 10)]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("this test model does not stream")


def _message(item_id: str, text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=item_id,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def user_text(turn: int) -> str:
    if turn % 2:
        return f"turn {turn}: please look up topic{turn}"
    return f"turn {turn}: thanks, what next?"


@dataclass
class TurnRecord:
    turn: int
    fired: bool
    items_seen: list[int]  # input items of each model call of the turn
    messages_seen: int  # chat messages of the turn's first call
    summarizer_calls: int  # so far


async def thirty_turns(
    session: SynopsisSession, compactor: Compactor | AsyncCompactor, summarizer: FakeModel
) -> tuple[ToolThenAnswer, list[TurnRecord]]:
    model = ToolThenAnswer()
    agent = Agent(name="researcher", instructions="Be brief.", model=model, tools=[lookup])
    records = []
    for turn in range(TURNS):
        stored = await session.get_items(limit=10_000)  # a peek: never compacts
        fired = compactor.should_compact(from_responses_items(stored)).fired
        before = len(model.inputs)
        await Runner.run(agent, user_text(turn), session=session, run_config=NO_TRACING)
        seen = model.inputs[before:]
        records.append(
            TurnRecord(
                turn,
                fired,
                [len(items) for items in seen],
                len(from_responses_items(seen[0])),
                len(summarizer.requests),
            )
        )
    return model, records


def print_table(title: str, records: list[TurnRecord]) -> None:
    print(f"\n{title}\nturn  trigger  items seen per model call  messages seen  summarizer calls")
    for r in records:
        fired = "fired" if r.fired else "-"
        print(
            f"{r.turn:>4}  {fired:>7}  {r.items_seen!s:>25}  {r.messages_seen:>13}"
            f"  {r.summarizer_calls:>16}"
        )


def assert_paired(items: list[dict[str, Any]]) -> None:
    """No output without its call before it, no call without its output after it."""
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert sorted(calls) == sorted(outputs)
    for index, item in enumerate(items):
        if item.get("type") == "function_call_output":
            earlier = [i.get("call_id") for i in items[:index] if i.get("type") == "function_call"]
            assert item["call_id"] in earlier


def user_items(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i for i in items if i.get("role") == "user" and MARKER not in str(i.get("content"))]


def check_run(model: ToolThenAnswer, records: list[TurnRecord], summarizer: FakeModel) -> None:
    sent_by_user = [user_text(turn) for turn in range(TURNS)]
    crossings = sum(r.fired for r in records)
    # Compaction happens when the trigger fires and only then; one summarizer call each.
    calls = [r.summarizer_calls for r in records]
    per_turn = [b - a for a, b in zip([0, *calls], calls, strict=False)]
    assert per_turn == [int(r.fired) for r in records]
    assert len(summarizer.requests) == crossings >= 5
    for items in model.inputs:
        assert_paired(items)
        users = [i["content"] for i in user_items(items)]
        # The user's messages reach the model verbatim: a run of the newest ones, in order.
        newest = sent_by_user.index(users[-1])
        assert users == sent_by_user[newest - len(users) + 1 : newest + 1]
        summaries = [i for i in items if MARKER in str(i.get("content"))]
        assert len(summaries) <= 1
        assert all(i["role"] == "user" and i == items[0] for i in summaries)
    assert all(CARRY_KEY not in m for r in summarizer.requests for m in r.messages)
    for request in summarizer.requests[1:]:
        # The previous summary is handed over as such, never as conversation to summarize.
        context = request.messages[1:-1]
        assert all(content_type(m) is None and MARKER not in str(m["content"]) for m in context)
        assert "<previous_summary>" in request.messages[-1]["content"]


async def test_thirty_turns_through_runner_with_an_async_store_and_compactor() -> None:
    summarizer = AsyncFakeModel(default=SUMMARY)
    compactor = AsyncCompactor(
        model=summarizer, retry=NO_SLEEP, trigger_messages=14, keep_tail=4, session_id="s-30"
    )
    session = SynopsisSession(
        "s-30", store=AsyncInMemoryStore(), tenant="acme", user_id="u1", compactor=compactor
    )
    model, records = await thirty_turns(session, compactor, summarizer)
    print_table("Agents SDK, AsyncInMemoryStore + AsyncCompactor", records)
    check_run(model, records, summarizer)
    generations = await session.generations()
    assert len(generations) == len(summarizer.requests) + 1
    everything = [i["content"] for g in generations for i in user_items(g)]
    assert set(everything) == {user_text(turn) for turn in range(TURNS)}  # nothing is lost


async def test_thirty_turns_through_runner_with_sqlite_and_a_sync_compactor(
    tmp_path: Any,
) -> None:
    summarizer = FakeModel(default=SUMMARY)
    compactor = Compactor(model=summarizer, retry=NO_SLEEP, trigger_messages=14, keep_tail=4)
    store = SQLiteStore(tmp_path / "agents.db")
    session = SynopsisSession("s-30", store=store, tenant="acme", user_id="u1", compactor=compactor)
    model, records = await thirty_turns(session, compactor, summarizer)
    print_table("Agents SDK, SQLiteStore + Compactor", records)
    check_run(model, records, summarizer)
    store.close()


async def test_the_model_sees_the_summary_first_then_the_kept_tail() -> None:
    """Right after a compaction the model's input is [summary, kept items..., new input]."""
    summarizer = AsyncFakeModel(default=SUMMARY)
    compactor = AsyncCompactor(model=summarizer, retry=NO_SLEEP, trigger_messages=4, keep_tail=2)
    store = AsyncInMemoryStore()
    session = SynopsisSession("s", store=store, tenant="t", user_id="u", compactor=compactor)
    model = ToolThenAnswer()
    agent = Agent(name="a", model=model, tools=[lookup])
    for turn in range(3):
        await Runner.run(agent, user_text(turn), session=session, run_config=NO_TRACING)
    # Turn 2 starts from 6 stored messages (> 4): the model sees the summary, then the newest
    # two messages as stored, widened to the tool call their tool output answers, then turn 2.
    seen = model.inputs[-1]
    assert re.match(MARKER, seen[0]["content"]) and seen[0]["role"] == "user"
    kinds = [i.get("type", "message") for i in seen[1:-1]]
    assert kinds == ["function_call", "function_call_output", "message"]
    assert seen[1]["call_id"] == seen[2]["call_id"] == "call_2" and seen[3]["id"] == "msg_3"
    assert seen[-1] == {"content": user_text(2), "role": "user"}
    assert len(summarizer.requests) == 1


async def test_every_model_call_of_one_run_is_bounded_by_the_trigger() -> None:
    """One Runner.run of 40 tool calls: with the session's run config every model call is
    compacted once it crosses the trigger (without it, one run's input grew to 81 items)."""
    from agents.testing import ScriptedModel, assistant_message, function_call

    calls = 40
    steps = [
        [function_call("lookup", {"topic": f"t{n}"}, call_id=f"c{n}", item_id=f"fc{n}")]
        for n in range(calls)
    ]
    summarizer = AsyncFakeModel(default=SUMMARY)
    compactor = AsyncCompactor(model=summarizer, retry=NO_SLEEP, trigger_tokens=400)
    session = SynopsisSession(
        "s", store=AsyncInMemoryStore(), tenant="t", user_id="u", compactor=compactor
    )
    model = ScriptedModel([*steps, [assistant_message("done")]])
    agent = Agent(name="a", model=model, tools=[lookup])
    config = session.run_config(tracing_disabled=True)
    result = await Runner.run(
        agent, "look up forty topics", session=session, run_config=config, max_turns=calls + 2
    )
    assert result.final_output == "done" and len(model.calls) == calls + 1
    inputs = [[dict(item) for item in call.input] for call in model.calls]
    last_item = json.dumps(inputs[-1][-1])
    for items in inputs:
        assert_paired(items)
        tokens = compactor.counter.count(from_responses_items(items)).total
        # Bounded: at most the trigger plus the newest call and its output.
        assert tokens <= 400 + compactor.counter.estimate_text(last_item) * 2
    crossings = len(summarizer.requests)
    assert 1 <= crossings < calls // 4  # one summary per crossing, never one per call
    assert re.match(MARKER, inputs[-1][0]["content"])
    assert inputs[-1][-1]["call_id"] == f"c{calls - 1}"  # the newest output goes as it is
    stored = await session.get_items(limit=10_000)
    assert len(stored) == 1 + 2 * calls + 1  # the session keeps the run whole


async def test_without_the_filter_one_run_grows_past_the_trigger() -> None:
    """The reason for run_config(): get_items compacts once per run, not per model call."""
    from agents.testing import ScriptedModel, assistant_message, function_call

    steps = [[function_call("lookup", {"topic": f"t{n}"}, call_id=f"c{n}")] for n in range(40)]
    compactor = AsyncCompactor(model=AsyncFakeModel(default=SUMMARY), trigger_tokens=400)
    session = SynopsisSession(
        "s", store=AsyncInMemoryStore(), tenant="t", user_id="u", compactor=compactor
    )
    model = ScriptedModel([*steps, [assistant_message("done")]])
    agent = Agent(name="a", model=model, tools=[lookup])
    await Runner.run(
        agent, "look up forty topics", session=session, run_config=NO_TRACING, max_turns=50
    )
    last = [dict(item) for item in model.calls[-1].input]
    assert compactor.counter.count(from_responses_items(last)).total > 2 * 400
