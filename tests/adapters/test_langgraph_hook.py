"""pre_model_hook in a LangGraph agent loop (hook -> model -> tools -> hook, LangGraph 1.x's
own nodes; its prebuilt ``create_react_agent`` is deprecated since 1.0, and
``langchain.agents.create_agent`` takes ``CompactionMiddleware`` instead): 30 turns with tool
calls and a low trigger, compacting exactly when the trigger fires."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from synopsis import AsyncCompactor, Compactor
from synopsis.adapters.langgraph import pre_model_hook
from synopsis.convert import from_langchain
from synopsis.errors import ConfigError
from synopsis.testing import AsyncFakeModel, FakeModel
from tests.adapters.test_langchain import (
    CONFIG,
    SUMMARY,
    SYSTEM,
    TURNS,
    Run,
    ToolCallingFakeModel,
    assert_what_the_model_saw,
    compactions,
    compactor_options,
    lookup,
    record,
    script,
    user_text,
)


class Probe:
    """The hook, preceded by a record of whether the trigger fires on the state it gets."""

    def __init__(self, compactor: Compactor | AsyncCompactor) -> None:
        self.compactor = compactor
        self.hook = pre_model_hook(compactor)
        self.fired: list[bool] = []

    def __call__(self, state: Any) -> dict[str, Any]:
        self.fired.append(self.compactor.should_compact(from_langchain(state["messages"])).fired)
        return self.hook.invoke(state)

    async def acall(self, state: Any) -> dict[str, Any]:
        self.fired.append(self.compactor.should_compact(from_langchain(state["messages"])).fired)
        return await self.hook.ainvoke(state)


def react_agent(model: ToolCallingFakeModel, probe: Probe) -> Any:
    """The agent create_react_agent built, from LangGraph's own nodes: the hook, then the
    model (with the system prompt), then ToolNode when the model called a tool."""
    from langchain_core.runnables import RunnableLambda

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke([SystemMessage(SYSTEM), *state["messages"]])]}

    async def acall_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke([SystemMessage(SYSTEM), *state["messages"]])]}

    graph = StateGraph(MessagesState)
    graph.add_node("compact", RunnableLambda(probe, afunc=probe.acall))
    graph.add_node("model", RunnableLambda(call_model, afunc=acall_model))
    graph.add_node("tools", ToolNode([lookup]))
    graph.add_edge(START, "compact")
    graph.add_edge("compact", "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "compact")
    return graph.compile(checkpointer=InMemorySaver())


def test_thirty_turns_through_a_langgraph_agent_loop() -> None:
    """The same 30 turns as the LangChain middleware test, through a LangGraph agent loop with
    the hook: compaction iff the trigger fired, one summarizer call per crossing, no broken
    tool pair, the user's words verbatim, never a summary quoted as user words."""
    model = ToolCallingFakeModel(messages=script(TURNS))
    summarizer = FakeModel(default=SUMMARY)
    probe = Probe(Compactor(model=summarizer, **compactor_options()))
    agent = react_agent(model, probe)
    run = Run(model, summarizer, probe)  # type: ignore[arg-type]
    for turn in range(TURNS):
        before = len(model.seen)
        state = agent.invoke({"messages": [HumanMessage(user_text(turn))]}, CONFIG)
        record(run, before, state)
    print("\nLangGraph agent loop + pre_model_hook, 30 turns, sync\n" + run.table())
    assert len(probe.fired) == len(model.seen)
    assert compactions(model.seen) == probe.fired
    assert len(summarizer.requests) == sum(probe.fired) >= 3
    assert_what_the_model_saw(run)


async def test_async_agent_loop_with_an_async_compactor() -> None:
    model = ToolCallingFakeModel(messages=script(12))
    summarizer = AsyncFakeModel(default=SUMMARY)
    probe = Probe(AsyncCompactor(model=summarizer, **compactor_options()))
    agent = react_agent(model, probe)
    for turn in range(12):
        await agent.ainvoke({"messages": [HumanMessage(user_text(turn))]}, CONFIG)
    assert compactions(model.seen) == probe.fired
    assert 0 < len(summarizer.requests) == sum(probe.fired)


def test_the_hook_in_a_hand_built_graph() -> None:
    """Any graph with a ``messages`` state: hook -> model -> tools -> hook ..."""
    model = ToolCallingFakeModel(messages=script(12))
    summarizer = FakeModel(default=SUMMARY)
    compactor = Compactor(model=summarizer, **compactor_options())

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke([SystemMessage(SYSTEM), *state["messages"]])]}

    graph = StateGraph(MessagesState)
    graph.add_node("compact", pre_model_hook(compactor))
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode([lookup]))
    graph.add_edge(START, "compact")
    graph.add_edge("compact", "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "compact")
    app = graph.compile(checkpointer=InMemorySaver())
    for turn in range(12):
        state = app.invoke({"messages": [HumanMessage(user_text(turn))]}, CONFIG)
    assert 0 < len(summarizer.requests) == sum(compactions(model.seen))
    assert isinstance(state["messages"][-1], AIMessage)
    assert len(state["messages"]) < 20


def test_an_async_compactor_cannot_serve_a_sync_graph() -> None:
    hook = pre_model_hook(AsyncCompactor(model=AsyncFakeModel(default=SUMMARY)))
    with pytest.raises(ConfigError, match="ainvoke"):
        hook.invoke({"messages": [HumanMessage("hi")]})


def test_no_update_when_the_trigger_does_not_fire() -> None:
    hook = pre_model_hook(Compactor(model=FakeModel(default=SUMMARY), trigger_messages=10))
    assert hook.invoke({"messages": [HumanMessage("hi", id="h")]}) == {}
