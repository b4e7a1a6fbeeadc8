"""search_history through each framework's own agent loop, with the framework's fake models:
a long history crosses the compactor's trigger inside the run, the fact is archived, the
scripted model calls search_history, and the tool's answer (from the archive) carries the
fact. The summary the model reads names the tool. No mocks: real archives, real loops."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from agents import Model
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from synopsis import AsyncCompactor, Compactor, JsonlArchive, MemoryArchive, StoreArchive
from synopsis.compaction.store_archive import AsyncStoreArchive
from synopsis.memory import AsyncInMemoryStore, SQLiteStore
from synopsis.testing import AsyncFakeModel, FakeModel, tool_call_reply

FACT = "The vault code is 7429-ALPHA."
QUESTION = "What was the vault code again?"


def history() -> list[dict[str, Any]]:
    """40 turns; the fact is said early by the assistant (the summary drops it)."""
    turns: list[dict[str, Any]] = [
        {"role": "user", "content": "Set up the vault for the team, please."},
        {"role": "assistant", "content": f"Done. {FACT} Keep it safe."},
    ]
    for i in range(40):
        turns.append({"role": "user", "content": f"step {i}: check the staging server logs"})
        turns.append({"role": "assistant", "content": f"step {i}: logs look fine, nothing new"})
    return turns


#: A summary that keeps none of the early turns' facts, so only the archive holds the code
#: (the extractive summarizer now quotes such a fact, which would hide what the tool adds).
FORGETFUL_SUMMARY = "<summary>1. Primary Request and Intent: check the staging logs</summary>"


def options(kind: Any = Compactor, **extra: Any) -> dict[str, Any]:
    """The compactor's options; its summarizer the twin ``kind`` needs."""
    model = AsyncFakeModel if kind is AsyncCompactor else FakeModel
    return {
        "model": model(default=FORGETFUL_SUMMARY),
        "trigger_messages": 30,
        "keep_tail": 4,
        "session_id": "s1",
        **extra,
    }


def _lc(messages: Sequence[dict[str, Any]]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for message in messages:
        kind = HumanMessage if message["role"] == "user" else AIMessage
        out.append(kind(content=message["content"]))
    return out


# --- LangChain: create_agent + CompactionMiddleware(history_tool=True) ------------------------


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model, with tools bound (and ignored), recording its inputs."""

    seen: list[list[BaseMessage]] = field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def script(query: str = "vault code") -> Any:
    return iter(
        [
            AIMessage(
                content="",
                tool_calls=[{"name": "search_history", "args": {"query": query}, "id": "c1"}],
            ),
            AIMessage(content="It is 7429-ALPHA."),
        ]
    )


def _tool_answers(messages: Sequence[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages if isinstance(m, ToolMessage)]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_langchain_agent_finds_the_archived_fact(mode: str, tmp_path: Path) -> None:
    from langchain.agents import create_agent

    from synopsis.adapters.langchain import CompactionMiddleware

    kind = Compactor if mode == "sync" else AsyncCompactor
    compactor = kind(archive=JsonlArchive(tmp_path), **options(kind))
    model = ScriptedChatModel(messages=script())
    agent = create_agent(model, middleware=[CompactionMiddleware(compactor, history_tool=True)])
    state = {"messages": [*_lc(history()), HumanMessage(QUESTION)]}
    result = agent.invoke(state) if mode == "sync" else await agent.ainvoke(state)
    answers = _tool_answers(result["messages"])
    assert len(answers) == 1 and "7429-ALPHA" in answers[0]
    summary = str(model.seen[0][0].content)
    assert "<synopsis:summary" in summary and "`search_history` tool" in summary
    assert "7429-ALPHA" not in "\n".join(str(m.content) for m in model.seen[0])
    assert result["messages"][-1].content == "It is 7429-ALPHA."


def test_langchain_a_bad_call_is_answered_with_an_error_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    from langchain.agents import create_agent

    from synopsis.adapters.langchain import search_history_tool

    compactor = Compactor(archive=MemoryArchive(), **options())
    model = ScriptedChatModel(messages=script(query="  "))
    agent = create_agent(model, tools=[search_history_tool(compactor)])
    result = agent.invoke({"messages": [HumanMessage(QUESTION)]})
    assert _tool_answers(result["messages"])[0].startswith("Error: query must be")


# --- LangGraph: a hand-built graph with pre_model_hook and ToolNode ----------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_langgraph_graph_finds_the_archived_fact(mode: str) -> None:
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from synopsis.adapters.langgraph import pre_model_hook, search_history_tool

    if mode == "sync":
        store = SQLiteStore(":memory:")
        compactor: Any = Compactor(archive=StoreArchive(store, "acme", user_id="u1"), **options())
    else:
        archive = AsyncStoreArchive(AsyncInMemoryStore(), "acme", user_id="u1")
        compactor = AsyncCompactor(archive=archive, **options(AsyncCompactor))
    tool = search_history_tool(compactor)
    model = ScriptedChatModel(messages=script())

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("compact", pre_model_hook(compactor))
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode([tool]))
    graph.add_edge(START, "compact")
    graph.add_edge("compact", "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "compact")
    app = graph.compile()
    state = {"messages": [*_lc(history()), HumanMessage(QUESTION)]}
    result = app.invoke(state) if mode == "sync" else await app.ainvoke(state)
    answers = _tool_answers(result["messages"])
    assert len(answers) == 1 and "7429-ALPHA" in answers[0]
    assert "`search_history` tool" in str(model.seen[0][0].content)


# --- Pydantic AI: Agent + the compaction capability + FunctionModel -----------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_pydantic_ai_agent_finds_the_archived_fact(mode: str) -> None:
    from pydantic_ai import Agent
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

    from synopsis.adapters.pydantic_ai import compaction_capability, search_history_tool
    from synopsis.convert import to_pydantic_ai

    kind = Compactor if mode == "sync" else AsyncCompactor
    compactor: Any = kind(archive=MemoryArchive(), **options(kind))
    seen: list[list[ModelMessage]] = []

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        returns = [
            part
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        ]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("search_history", {"query": "vault code"})])
        return ModelResponse(parts=[TextPart(f"Found: {returns[-1].content}")])

    agent = Agent(
        FunctionModel(scripted),
        tools=[search_history_tool(compactor)],
        capabilities=[compaction_capability(compactor)],
    )
    earlier = to_pydantic_ai(history())
    result = await agent.run(QUESTION, message_history=earlier)
    assert "7429-ALPHA" in result.output
    first = seen[0][0]
    assert isinstance(first, ModelRequest)
    prompt = next(p for p in first.parts if isinstance(p, UserPromptPart))
    assert "`search_history` tool" in str(prompt.content)


# --- OpenAI Agents: Runner.run + SynopsisSession + a scripted Model ----------------------------


@dataclass
class SearchThenAnswer(Model):
    """An Agents SDK model: calls search_history once, then answers with what it returned."""

    inputs: list[list[dict[str, Any]]] = field(default_factory=list)

    async def get_response(  # type: ignore[override]
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> Any:
        from agents import ModelResponse, Usage
        from openai.types.responses import (
            ResponseFunctionToolCall,
            ResponseOutputMessage,
            ResponseOutputText,
        )

        items = [dict(item) for item in input] if isinstance(input, list) else []
        self.inputs.append(json.loads(json.dumps(items)))
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        if not outputs:
            call = ResponseFunctionToolCall(
                id="fc_1",
                type="function_call",
                call_id="call_1",
                name="search_history",
                arguments=json.dumps({"query": "vault code"}),
                status="completed",
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(
            type="output_text", text=f"Found: {outputs[-1]['output']}", annotations=[]
        )
        message = ResponseOutputMessage(
            id="msg_1", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("this test model does not stream")


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_openai_agents_runner_finds_the_archived_fact(mode: str, tmp_path: Path) -> None:
    from agents import Agent, RunConfig, Runner

    from synopsis.adapters.openai_agents import SynopsisSession, search_history_tool
    from synopsis.convert import to_responses_items

    kind = Compactor if mode == "sync" else AsyncCompactor
    compactor: Any = kind(archive=JsonlArchive(tmp_path), **options(kind))
    store = SQLiteStore(":memory:")
    session = SynopsisSession("s1", store=store, tenant="acme", user_id="u1", compactor=compactor)
    await session.add_items(to_responses_items(history()))  # type: ignore[arg-type]
    model = SearchThenAnswer()
    agent = Agent(name="helper", model=model, tools=[search_history_tool(compactor)])
    result = await Runner.run(
        agent, QUESTION, session=session, run_config=RunConfig(tracing_disabled=True)
    )
    assert "7429-ALPHA" in result.final_output
    first = json.dumps(model.inputs[0], ensure_ascii=False)
    assert "`search_history` tool" in first
    assert "7429-ALPHA" not in first


# --- CompactingModel: a hand-written loop over chat-completions tool calls ---------------------


def test_compacting_model_loop_finds_the_archived_fact() -> None:
    from synopsis import CompactingModel

    compactor = Compactor(archive=MemoryArchive(), **options())
    inner = FakeModel(
        replies=[
            tool_call_reply("search_history", json.dumps({"query": "vault code"})),
            "It is 7429-ALPHA.",
        ]
    )
    model = CompactingModel(inner, compactor)
    tool = model.search_history_tool()
    messages: list[dict[str, Any]] = [*history(), {"role": "user", "content": QUESTION}]
    tools = [tool.openai_tool()]
    while True:
        response = model.complete(messages, settings=None)
        messages.append(dict(response.message))
        if not response.tool_calls:
            break
        messages.extend(tool.answer(call) for call in response.tool_calls)
    answers = [m["content"] for m in messages if m["role"] == "tool"]
    assert len(answers) == 1 and "7429-ALPHA" in answers[0]
    first = inner.requests[0].messages
    assert "`search_history` tool" in str(first[0]["content"])
    assert tools[0]["function"]["name"] == "search_history"
