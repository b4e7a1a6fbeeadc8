"""A LangChain agent that compacts its history, and one that keeps session memory.

Runs offline: LangChain's fake chat model answers, the "extractive" model summarizes. For a
real agent, pass a real chat model (``init_chat_model("openai:gpt-4.1")``) and a real
summarizer (``model="openai:gpt-4o-mini"``).
"""

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from synopsis import Compactor, SessionMemory, Summarizer
from synopsis.adapters.langchain import CompactionMiddleware, SessionMemoryMiddleware
from synopsis.memory import InMemoryStore


def fake_model() -> GenericFakeChatModel:
    answer = "Noted. Here is what I found, in some detail: " + "a long explanation. " * 40
    return GenericFakeChatModel(messages=iter(AIMessage(answer) for _ in range(99)))


# 1. In-place compaction: the agent's own message list is compacted when it grows too long.
compactor = Compactor(model="extractive", trigger_tokens=3_000, keep_tail=4)
agent = create_agent(
    fake_model(),
    system_prompt="You are a helpful assistant.",
    middleware=[CompactionMiddleware(compactor)],
    checkpointer=InMemorySaver(),
)
config = {"configurable": {"thread_id": "thread-1"}}
for turn in range(20):
    request = f"Point {turn}: remember that the deadline for task {turn} is day {turn + 10}."
    state = agent.invoke({"messages": [{"role": "user", "content": request}]}, config)
print(len(state["messages"]), "messages in the state, the first one a summary:")
print(state["messages"][0].text.splitlines()[0])

# 2. Session memory: the state keeps everything; each model call gets the session summary in
# its system prompt and only the recent messages. Tenant, user and session come from the
# run's context, never from what the user types.
store = InMemoryStore()  # or SQLiteStore("memory.db"), PostgresStore(url)
memory = SessionMemory(
    store=store,
    summarizer=Summarizer(model="extractive"),
    summarize_every=4,
    window_messages=6,
)
agent = create_agent(
    fake_model(),
    system_prompt="You are a helpful assistant.",
    middleware=[SessionMemoryMiddleware(memory)],
    checkpointer=InMemorySaver(),
)
context = {"tenant": "acme", "user_id": "user-1", "session_id": "session-1"}
for turn in range(8):
    request = f"Point {turn}: the budget for item {turn} is {turn * 100} euros."
    agent.invoke({"messages": [{"role": "user", "content": request}]}, config, context=context)
    memory.drain()  # only so that this script is deterministic: summaries run in the background
memory.close()
summary = store.latest_summary("acme", "user-1", "session-1")
print("session summary version", summary.version if summary else None)
