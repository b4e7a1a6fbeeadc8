"""SessionMemoryMiddleware in LangChain's real agent loop: the session summary (and recalled
notes) in the system prompt, a tool-safe window, background summaries, ids from the run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from synopsis import AsyncSessionMemory, AsyncSummarizer, SessionMemory, Summarizer
from synopsis.adapters.langchain import SessionKeys, SessionMemoryMiddleware
from synopsis.errors import ConfigError, InvalidInput
from synopsis.memory import AsyncInMemoryStore, InMemoryStore
from synopsis.testing import AsyncFakeModel, FakeModel
from tests.adapters.test_langchain import (
    NO_SLEEP,
    SUMMARY,
    SYSTEM,
    ToolCallingFakeModel,
    assert_tool_pairs_intact,
    lookup,
    script,
    user_text,
)

TENANT, USER, SESSION = "acme", "u1", "s1"
CONTEXT = {"tenant": TENANT, "user_id": USER, "session_id": SESSION}
WINDOW = 8
EVERY = 6


def thread(name: str = "thread-1") -> Any:
    return {"configurable": {"thread_id": name}}


def memory_for(store: InMemoryStore, summarizer: FakeModel, **options: Any) -> SessionMemory:
    options = {"summarize_every": EVERY, "window_messages": WINDOW, **options}
    return SessionMemory(
        store=store, summarizer=Summarizer(model=summarizer, retry=NO_SLEEP), **options
    )


def agent_for(model: ToolCallingFakeModel, memory: SessionMemory | AsyncSessionMemory) -> Any:
    return create_agent(
        model, tools=[lookup], system_prompt=SYSTEM,
        middleware=[SessionMemoryMiddleware(memory)], checkpointer=InMemorySaver(),
    )  # fmt: skip


def system_text(seen: list[Any]) -> str:
    assert isinstance(seen[0], SystemMessage)
    return str(seen[0].text)


@dataclass
class Turn:
    seen: list[int]
    summary_version: int
    summarizer_calls: int


def test_thirty_turns_with_the_session_summary_in_the_system_prompt() -> None:
    """Each model call gets the system prompt with the latest saved summary and a tool-safe
    window of at most 8 messages ending in the user's request, verbatim; the state keeps the
    whole history; summaries are made in the background, one summarizer call per version."""
    store, summarizer = InMemoryStore(), FakeModel(default=SUMMARY)
    model = ToolCallingFakeModel(messages=script(30))
    turns: list[Turn] = []
    with memory_for(store, summarizer) as memory:
        agent = agent_for(model, memory)
        for turn in range(30):
            latest = store.latest_summary(TENANT, USER, SESSION)
            before = len(model.seen)
            state = agent.invoke(
                {"messages": [HumanMessage(user_text(turn))]}, thread(), context=CONTEXT
            )
            memory.drain()
            for seen in model.seen[before:]:
                assert system_text(seen).startswith(SYSTEM)
                if latest is not None:
                    assert f'<session_summary version="{latest.version}"' in system_text(seen)
                assert len(seen) - 1 <= WINDOW
                assert_tool_pairs_intact(seen[1:])
                assert [m.text for m in seen if isinstance(m, HumanMessage)][-1] == user_text(turn)
            saved = store.latest_summary(TENANT, USER, SESSION)
            turns.append(
                Turn(
                    [len(seen) for seen in model.seen[before:]],
                    saved.version if saved else 0,
                    len(summarizer.requests),
                )
            )
    print("\nLangChain create_agent + SessionMemoryMiddleware, 30 turns")
    print("turn | messages seen per model call | summary version | summarizer calls")
    for number, row in enumerate(turns):
        print(f"{number:4} | {row.seen!s:28} | {row.summary_version:15} | {row.summarizer_calls}")
    assert len(state["messages"]) == sum(4 if t % 3 != 2 else 2 for t in range(30))
    assert turns[-1].summary_version == turns[-1].summarizer_calls >= 5


def test_ids_come_from_the_run_and_tenants_never_meet() -> None:
    """The same user and session ids under another tenant get no summary of the first."""
    store, summarizer = InMemoryStore(), FakeModel(default=SUMMARY)
    model = ToolCallingFakeModel(messages=script(12))
    with memory_for(store, summarizer, summarize_every=2) as memory:
        agent = agent_for(model, memory)
        for turn in range(4):
            agent.invoke({"messages": [HumanMessage(user_text(turn))]}, thread(), context=CONTEXT)
            memory.drain()
        assert "<session_summary" in system_text(model.seen[-1])
        other = {**CONTEXT, "tenant": "globex"}
        agent.invoke({"messages": [HumanMessage(user_text(4))]}, thread("t2"), context=other)
        assert "<session_summary" not in system_text(model.seen[-1])


def test_ids_may_come_from_the_config_and_the_session_from_the_thread() -> None:
    """No context: tenant and user from ``configurable``, the session from ``thread_id``."""
    store, summarizer = InMemoryStore(), FakeModel(default=SUMMARY)
    model = ToolCallingFakeModel(messages=script(3))
    config = {"configurable": {"thread_id": "thread-9", "tenant": TENANT, "user_id": USER}}
    with memory_for(store, summarizer, summarize_every=2) as memory:
        agent_for(model, memory).invoke({"messages": [HumanMessage(user_text(0))]}, config)
        memory.drain()
    summary = store.latest_summary(TENANT, USER, "thread-9")
    assert summary is not None and summary.user_id == USER


def test_keys_are_configurable() -> None:
    store, summarizer = InMemoryStore(), FakeModel(default=SUMMARY)
    model = ToolCallingFakeModel(messages=script(3))
    keys = SessionKeys(tenant="org", user_id="who", session_id="conversation")
    context = {"org": TENANT, "who": USER, "conversation": "c7"}
    with memory_for(store, summarizer, summarize_every=2) as memory:
        agent = create_agent(
            model, tools=[lookup], middleware=[SessionMemoryMiddleware(memory, keys=keys)]
        )
        agent.invoke({"messages": [HumanMessage(user_text(0))]}, context=context)
        memory.drain()
    assert store.latest_summary(TENANT, USER, "c7") is not None


def test_a_run_without_a_tenant_is_refused_naming_the_key() -> None:
    """Nothing in the messages can stand in for the tenant: a run that names none fails."""
    model = ToolCallingFakeModel(messages=script(1))
    with memory_for(InMemoryStore(), FakeModel(default=SUMMARY)) as memory:
        agent = agent_for(model, memory)
        with pytest.raises(InvalidInput, match="'tenant'"):
            agent.invoke(
                {"messages": [HumanMessage("tenant: acme")]}, thread(), context={"user_id": USER}
            )
    assert model.seen == []


def test_recalled_notes_join_the_system_prompt() -> None:
    """With ``hybrid=True`` a memory of the user from elsewhere is recalled into the prompt,
    by CJK-aware keyword search, within the user's tenant only."""
    store = InMemoryStore()
    store.put(TENANT, ("user", USER, "notes"), "coffee", "The user brews 手冲咖啡 every morning.")
    store.put("globex", ("user", USER, "notes"), "coffee", "Secret of another tenant: 咖啡豆.")
    model = ToolCallingFakeModel(messages=iter([AIMessage("Enjoy your coffee.")]))
    with memory_for(store, FakeModel(default=SUMMARY), hybrid=True) as memory:
        agent = agent_for(model, memory)
        agent.invoke({"messages": [HumanMessage("我想喝咖啡")]}, thread(), context=CONTEXT)
    system = system_text(model.seen[0])
    assert "手冲咖啡" in system and "another tenant" not in system
    assert len(model.seen[0]) == 2  # one system message, then the request


def test_an_async_memory_in_a_sync_run_is_refused_by_name() -> None:
    memory = AsyncSessionMemory(store=AsyncInMemoryStore(), summarizer=None)
    agent = agent_for(ToolCallingFakeModel(messages=script(1)), memory)
    with pytest.raises(ConfigError, match="ainvoke"):
        agent.invoke({"messages": [HumanMessage(user_text(0))]}, thread(), context=CONTEXT)


async def test_async_memory_in_an_async_run() -> None:
    """ainvoke with an AsyncSessionMemory: summaries as tasks, then injected."""
    store, summarizer = AsyncInMemoryStore(), AsyncFakeModel(default=SUMMARY)
    model = ToolCallingFakeModel(messages=script(6))
    async with AsyncSessionMemory(
        store=store, summarizer=AsyncSummarizer(model=summarizer, retry=NO_SLEEP),
        summarize_every=2, window_messages=WINDOW,
    ) as memory:  # fmt: skip
        agent = agent_for(model, memory)
        for turn in range(3):
            await agent.ainvoke(
                {"messages": [HumanMessage(user_text(turn))]}, thread(), context=CONTEXT
            )
            await memory.drain()
    assert "<session_summary" in system_text(model.seen[-1])
    assert len(summarizer.requests) >= 2


async def test_sync_memory_in_an_async_run() -> None:
    """ainvoke with a SessionMemory calls it in a worker thread and injects its summary."""
    store, summarizer = InMemoryStore(), FakeModel(default=SUMMARY)
    model = ToolCallingFakeModel(messages=script(6))
    with memory_for(store, summarizer, summarize_every=2) as memory:
        agent = agent_for(model, memory)
        for turn in range(3):
            await agent.ainvoke(
                {"messages": [HumanMessage(user_text(turn))]}, thread(), context=CONTEXT
            )
            memory.drain()
    assert "<session_summary" in system_text(model.seen[-1])


def test_something_else_than_a_memory_is_refused_at_construction() -> None:
    with pytest.raises(ConfigError, match="SessionMemory"):
        SessionMemoryMiddleware(InMemoryStore())  # type: ignore[arg-type]
