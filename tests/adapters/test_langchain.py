"""CompactionMiddleware in LangChain's real agent loop (``create_agent``), with LangChain's own
fake chat model taught to call tools: 30 turns with a low trigger, sync and async."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime
from pydantic import Field

from synopsis import AsyncCompactor, CompactionOptions, Compactor, RetryPolicy
from synopsis.adapters.langchain import CompactionMiddleware
from synopsis.convert import from_langchain, to_langchain
from synopsis.errors import ConfigError
from synopsis.messages import content_type, marker_of
from synopsis.testing import AsyncFakeModel, FakeModel
from synopsis.tokens import TokenCounter
from tests.strategies import histories

SUMMARY = (
    "<summary>1. Primary Request and Intent: look topics up\n"
    "6. All user messages:\n<all_user_messages>\n- (paraphrased)\n</all_user_messages>\n"
    "8. Current Work: answering lookups</summary>"
)
SYSTEM = "You look topics up with the lookup tool."
PREAMBLE = "This conversation continues an earlier one"
NO_SLEEP = RetryPolicy(initial_delay=0.0, max_delay=0.0, jitter=False)
TURNS = 30
CONFIG: Any = {"configurable": {"thread_id": "thread-1"}}


# -- LangChain's fake chat model, taught to call tools and to report usage ---------------------


class ToolCallingFakeModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` answering from its script, with tools bound (and ignored) and
    ``usage_metadata`` as a provider reports it: a third of the prompt's characters plus a
    fixed overhead for the tool schemas, or ``input_tokens`` when that is set."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)
    input_tokens: int | None = None

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolCallingFakeModel:  # type: ignore[override]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.seen.append(list(messages))
        answer = super()._generate(messages, stop=stop, run_manager=run_manager, **kw)
        message = answer.generations[0].message
        prompt = self.input_tokens or sum(len(m.text) for m in messages) // 3 + 60
        output = len(message.text) // 3 + 1
        usage = UsageMetadata(
            input_tokens=prompt, output_tokens=output, total_tokens=prompt + output
        )
        reported = message.model_copy(update={"usage_metadata": usage})
        return ChatResult(generations=[ChatGeneration(message=reported)])


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"Facts about {topic}: " + "it is well documented. " * 12


def user_text(turn: int) -> str:
    return f"Turn {turn}: please look up topic-{turn} for me."


def uses_tool(turn: int) -> bool:
    return turn % 3 != 2


def script(turns: int) -> Iterator[AIMessage]:
    """What the agent model answers, call after call: a lookup, then the answer."""
    for turn in range(turns):
        if uses_tool(turn):
            call = {"name": "lookup", "args": {"topic": f"topic-{turn}"}, "id": f"call_{turn}"}
            yield AIMessage(content="", tool_calls=[call])
        yield AIMessage(content=f"Answer {turn}: topic-{turn} is well documented. " * 2)


class TriggerProbe(AgentMiddleware[AgentState[Any], Any, Any]):
    """Runs before CompactionMiddleware and records whether the trigger fires on the state."""

    def __init__(self, compactor: Compactor | AsyncCompactor) -> None:
        self.compactor = compactor
        self.fired: list[bool] = []

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> None:
        self.fired.append(self.compactor.should_compact(from_langchain(state["messages"])).fired)

    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> None:
        self.before_model(state, runtime)


# -- one 30-turn run ---------------------------------------------------------------------------


@dataclass
class Run:
    model: ToolCallingFakeModel
    summarizer: FakeModel
    probe: TriggerProbe
    #: Per turn: the number of messages the model saw at each of its calls.
    seen_per_turn: list[list[int]] = field(default_factory=list)
    #: Per turn: the summarizer's calls so far.
    summaries_per_turn: list[int] = field(default_factory=list)
    final_state: list[BaseMessage] = field(default_factory=list)

    def table(self) -> str:
        rows = ["turn | messages seen per model call | compacted | summarizer calls"]
        calls = 0
        compacted = compactions(self.model.seen)
        for turn, (seen, summaries) in enumerate(
            zip(self.seen_per_turn, self.summaries_per_turn, strict=True)
        ):
            marks = ["yes" if compacted[calls + i] else "-" for i in range(len(seen))]
            calls += len(seen)
            rows.append(f"{turn:4} | {seen!s:28} | {', '.join(marks):9} | {summaries}")
        return "\n".join(rows)


def compactor_options() -> dict[str, Any]:
    return {"trigger_tokens": 900, "keep_tail": 6, "retry": NO_SLEEP}


def agent_for(model: ToolCallingFakeModel, compactor: Compactor | AsyncCompactor) -> Any:
    probe = TriggerProbe(compactor)
    middleware = [probe, CompactionMiddleware(compactor)]
    agent = create_agent(
        model, tools=[lookup], system_prompt=SYSTEM, middleware=middleware,
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    return agent, probe


def run_sync(turns: int = TURNS) -> Run:
    model = ToolCallingFakeModel(messages=script(turns))
    summarizer = FakeModel(default=SUMMARY)
    agent, probe = agent_for(model, Compactor(model=summarizer, **compactor_options()))
    run = Run(model, summarizer, probe)
    for turn in range(turns):
        before = len(model.seen)
        state = agent.invoke({"messages": [HumanMessage(user_text(turn))]}, CONFIG)
        record(run, before, state)
    return run


async def run_async(turns: int = TURNS) -> Run:
    model = ToolCallingFakeModel(messages=script(turns))
    summarizer = AsyncFakeModel(default=SUMMARY)
    agent, probe = agent_for(model, AsyncCompactor(model=summarizer, **compactor_options()))
    run = Run(model, summarizer, probe)
    for turn in range(turns):
        before = len(model.seen)
        state = await agent.ainvoke({"messages": [HumanMessage(user_text(turn))]}, CONFIG)
        record(run, before, state)
    return run


def record(run: Run, calls_before: int, state: dict[str, Any]) -> None:
    run.seen_per_turn.append([len(seen) for seen in run.model.seen[calls_before:]])
    run.summaries_per_turn.append(len(run.summarizer.requests))
    run.final_state = state["messages"]


# -- what the model saw ------------------------------------------------------------------------


def summary_version(seen: Sequence[BaseMessage]) -> int:
    versions = [
        marker.integer("version") or 0
        for marker in map(marker_of, from_langchain(seen))
        if marker is not None and marker.kind == "summary"
    ]
    assert len(versions) <= 1, "the model saw two summaries"
    return versions[0] if versions else 0


def compactions(seen: Sequence[Sequence[BaseMessage]]) -> list[bool]:
    """Per model call: whether a new summary appeared since the call before."""
    versions = [summary_version(messages) for messages in seen]
    return [now != before for before, now in zip([0, *versions], versions, strict=False)]


def assert_tool_pairs_intact(seen: Sequence[BaseMessage]) -> None:
    called: list[str] = []
    answered: list[str] = []
    for message in seen:
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in called, "orphaned tool result"
            answered.append(message.tool_call_id)
        elif isinstance(message, AIMessage):
            called += [call["id"] or "" for call in message.tool_calls]
    assert sorted(called) == sorted(answered), "dangling tool call"


def user_blocks(seen: Sequence[BaseMessage]) -> list[str]:
    return [
        block
        for message in seen
        for block in re.findall(r"<all_user_messages>(.*?)</all_user_messages>", message.text, re.S)
    ]


def recent_within_budget(turn: int) -> list[int]:
    """The turns up to ``turn`` whose user messages fit the quote budget, newest first."""
    budget = CompactionOptions.from_keywords(**compactor_options()).quote_budget
    counter = TokenCounter()
    chosen: list[int] = []
    for earlier in range(turn, -1, -1):
        budget -= counter.estimate_text(user_text(earlier))
        if budget < 0:
            break
        chosen.append(earlier)
    return chosen


def assert_what_the_model_saw(run: Run) -> None:
    call = 0
    for turn, seen_counts in enumerate(run.seen_per_turn):
        for _ in seen_counts:
            seen = run.model.seen[call]
            call += 1
            assert isinstance(seen[0], SystemMessage) and seen[0].text == SYSTEM
            assert_tool_pairs_intact(seen)
            humans = [m for m in seen if isinstance(m, HumanMessage)]
            assert humans[-1].content == user_text(turn)  # the request, verbatim and last
            text = "\n".join(m.text for m in seen)
            # Every earlier user message, kept or quoted, back to what the quote budget holds
            # (a fifth of the trigger: the summary never ends far above it).
            assert all(user_text(earlier) in text for earlier in recent_within_budget(turn))
            for block in user_blocks(seen):
                assert PREAMBLE not in block and "<synopsis:" not in block


def test_thirty_turns_compact_exactly_when_the_trigger_fires() -> None:
    """30 turns through create_agent: a compaction happens at a model call iff the trigger
    fired on the state before it; summarizer calls == trigger crossings; the model never sees
    a broken tool pair, sees the user's request verbatim and every earlier user message (kept
    or quoted), and never sees a summary quoted as user words."""
    run = run_sync()
    print("\nLangChain create_agent, 30 turns, sync\n" + run.table())
    fired = run.probe.fired
    assert len(fired) == len(run.model.seen) == sum(map(len, run.seen_per_turn))
    assert compactions(run.model.seen) == fired
    assert len(run.summarizer.requests) == sum(fired) >= 3
    assert_what_the_model_saw(run)
    later = [r.messages[-1]["content"] for r in run.summarizer.requests[1:]]
    assert all("<previous_summary>" in text for text in later)
    assert max(map(len, run.model.seen)) < 30  # the state stayed small


async def test_async_run_matches_the_sync_run() -> None:
    """ainvoke with an AsyncCompactor sees what invoke with a Compactor saw, call for call."""
    sync, run = run_sync(), await run_async()
    assert run.seen_per_turn == sync.seen_per_turn
    assert run.summaries_per_turn == sync.summaries_per_turn
    assert run.probe.fired == sync.probe.fired
    assert [from_langchain(s) for s in run.model.seen] == [
        from_langchain(s) for s in sync.model.seen
    ]


async def test_a_sync_compactor_serves_async_runs_too() -> None:
    """ainvoke with a sync Compactor (run in a worker thread) compacts as invoke does."""
    model = ToolCallingFakeModel(messages=script(8))
    summarizer = FakeModel(default=SUMMARY)
    agent, probe = agent_for(model, Compactor(model=summarizer, **compactor_options()))
    for turn in range(8):
        await agent.ainvoke({"messages": [HumanMessage(user_text(turn))]}, CONFIG)
    assert compactions(model.seen) == probe.fired and 0 < len(summarizer.requests) == sum(
        probe.fired
    )


def test_an_async_compactor_in_a_sync_run_is_refused_by_name() -> None:
    """invoke cannot await an AsyncCompactor; the error says what to use instead."""
    model = ToolCallingFakeModel(messages=script(1))
    agent, _ = agent_for(model, AsyncCompactor(model=AsyncFakeModel(default=SUMMARY)))
    with pytest.raises(ConfigError, match="ainvoke"):
        agent.invoke({"messages": [HumanMessage(user_text(0))]}, CONFIG)


def test_something_else_than_a_compactor_is_refused_at_construction() -> None:
    with pytest.raises(ConfigError, match="Compactor"):
        CompactionMiddleware("extractive")  # type: ignore[arg-type]


# -- provider usage is the baseline ------------------------------------------------------------


def test_provider_usage_is_the_counting_baseline() -> None:
    """The provider says the prompt had 5,000 tokens (the text alone is tiny): the next model
    call compacts. The answer it kept loses its usage, so the call after that does not."""
    model = ToolCallingFakeModel(
        messages=iter([AIMessage(content=f"answer {i}") for i in range(4)]), input_tokens=5_000
    )
    summarizer = FakeModel(default=SUMMARY)
    compactor = Compactor(model=summarizer, trigger_tokens=1_000, keep_tail=2, retry=NO_SLEEP)
    agent = create_agent(
        model, middleware=[CompactionMiddleware(compactor)], checkpointer=InMemorySaver()
    )
    model.input_tokens = None
    agent.invoke({"messages": [HumanMessage("first")]}, CONFIG)
    assert summarizer.requests == []
    model.input_tokens = 5_000  # the second answer reports a huge prompt
    agent.invoke({"messages": [HumanMessage("second")]}, CONFIG)
    model.input_tokens = None
    state = agent.invoke({"messages": [HumanMessage("third")]}, CONFIG)
    assert len(summarizer.requests) == 1 and compactions(model.seen) == [False, False, True]
    agent.invoke({"messages": [HumanMessage("fourth")]}, CONFIG)
    assert len(summarizer.requests) == 1
    answers = [m for m in state["messages"] if isinstance(m, AIMessage)]
    assert [m.text for m in answers] == ["answer 1", "answer 2"]
    assert answers[0].usage_metadata is None and answers[1].usage_metadata is not None


# -- the state's own objects in and out --------------------------------------------------------


def runtime() -> Runtime[Any]:
    return Runtime(context=None)


def state_of(messages: Sequence[BaseMessage]) -> AgentState[Any]:
    return {"messages": list(messages)}


def test_kept_messages_are_the_states_own_objects() -> None:
    """What the compactor keeps comes back as the very objects of the state (ids, tool status,
    artifacts, response metadata intact); an AI message only loses its usage; what the
    compactor wrote is a new message whose marker survives the conversion."""
    error = ToolMessage("boom", tool_call_id="c1", status="error", artifact={"raw": 1}, id="t1")
    answer = AIMessage(
        "done",
        id="a2",
        response_metadata={"model_name": "m"},
        usage_metadata=UsageMetadata(input_tokens=9, output_tokens=1, total_tokens=10),
    )
    messages = [
        HumanMessage("old request " * 40, id="h0"),
        AIMessage("old answer " * 40, id="a0"),
        HumanMessage("do it", id="h1"),
        AIMessage("", tool_calls=[{"name": "x", "args": {}, "id": "c1"}], id="a1"),
        error,
        answer,
    ]
    compactor = Compactor(model=FakeModel(default=SUMMARY), trigger_messages=3, keep_tail=4)
    update = CompactionMiddleware(compactor).before_model(state_of(messages), runtime())
    assert update is not None
    remove, summary, *kept = update["messages"]
    assert isinstance(remove, RemoveMessage) and remove.id == REMOVE_ALL_MESSAGES
    assert isinstance(summary, HumanMessage) and content_type(from_langchain([summary])[0])
    assert kept[:3] == messages[2:5] and all(
        a is b for a, b in zip(kept, messages[2:5], strict=False)
    )
    assert kept[2].status == "error" and kept[2].artifact == {"raw": 1}
    assert kept[3] == answer.model_copy(update={"usage_metadata": None})
    assert kept[3].id == "a2" and kept[3].response_metadata == {"model_name": "m"}


def test_no_update_when_the_trigger_does_not_fire() -> None:
    compactor = Compactor(model=FakeModel(default=SUMMARY), trigger_messages=50)
    state = state_of([HumanMessage("hi", id="h"), AIMessage("hello", id="a")])
    assert CompactionMiddleware(compactor).before_model(state, runtime()) is None


PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(histories(max_turns=14))
def test_state_compaction_is_the_compactors_result_on_the_states_objects(
    history: list[dict[str, Any]],
) -> None:
    """For any history: the new state, read back as our messages, is exactly what the
    compactor returns for the state; every kept message is the state's object (a usage-less
    copy for an AI message with usage), in order; every other one is marked internal."""
    originals = [m.model_copy(update={"id": f"m{i}"}) for i, m in enumerate(to_langchain(history))]
    options = {"trigger_messages": 4, "keep_tail": 3}
    expected = Compactor(model=FakeModel(default=SUMMARY), **options).compact(
        from_langchain(originals), force=False
    )
    compactor = Compactor(model=FakeModel(default=SUMMARY), **options)
    update = CompactionMiddleware(compactor).before_model(state_of(originals), runtime())
    if not expected.compacted:
        assert update is None
        return
    assert update is not None
    _, *messages = update["messages"]
    assert from_langchain(messages) == expected.messages
    by_id = {m.id: m for m in originals}
    kept = [m for m in messages if m.id in by_id]
    assert [m.id for m in kept] == sorted((m.id for m in kept), key=lambda i: int(i[1:]))
    for message in kept:
        original = by_id[message.id]
        usage = getattr(original, "usage_metadata", None)
        assert (
            message is original
            if usage is None
            else message == original.model_copy(update={"usage_metadata": None})
        )
    assert all(content_type(m) for m in from_langchain([m for m in messages if m.id is None]))
