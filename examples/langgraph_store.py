"""A LangGraph graph on a synopsis store, and the compaction hook in a hand-built agent loop.

Runs offline. ``SynopsisStore`` wraps any synopsis store (here SQLite in memory; use
``SQLiteStore("memory.db")`` or ``PostgresStore(url)`` to keep the data) in one tenant.
"""

import uuid
from typing import Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime

from synopsis import Compactor
from synopsis.adapters.langgraph import SynopsisStore, pre_model_hook
from synopsis.memory import SQLiteStore


# 1. The store: tenant-scoped, with CJK-aware keyword search.
class State(TypedDict):
    note: str
    recalled: list[str]


def remember_and_recall(state: State, runtime: Runtime[None]) -> dict[str, Any]:
    assert runtime.store is not None
    memories = runtime.store
    memories.put(("user", "user-1", "notes"), uuid.uuid4().hex, {"text": state["note"]})
    hits = memories.search(("user", "user-1"), query="咖啡", limit=3)
    return {"recalled": [hit.value["text"] for hit in hits]}


synopsis_store = SQLiteStore(":memory:")
store = SynopsisStore(synopsis_store, tenant="acme", ttl={"default_ttl": 60 * 24 * 30})
graph = StateGraph(State).add_node("remember", remember_and_recall)
app = graph.add_edge(START, "remember").add_edge("remember", END).compile(store=store)
app.invoke({"note": "The user drinks tea in the afternoon.", "recalled": []})
result = app.invoke({"note": "用户每天早上都喜欢喝一杯手冲咖啡", "recalled": []})
print("recalled:", result["recalled"])
print("namespaces:", store.list_namespaces(prefix=("user",)))
other_tenant = SynopsisStore(synopsis_store, tenant="globex")
print("another tenant sees:", other_tenant.search(("user",), query="咖啡"))

# 2. The hook: compact the state's messages before the model node when the trigger fires.
model = GenericFakeChatModel(
    messages=iter(AIMessage("Here is a long answer. " * 40) for _ in range(99))
)


def call_model(state: MessagesState) -> dict[str, Any]:
    return {"messages": [model.invoke(state["messages"])]}


compactor = Compactor(model="extractive", trigger_tokens=3_000, keep_tail=4)
loop = StateGraph(MessagesState)
loop.add_node("compact", pre_model_hook(compactor))
loop.add_node("model", call_model)
loop.add_edge(START, "compact")
loop.add_edge("compact", "model")
loop.add_edge("model", END)
agent = loop.compile(checkpointer=InMemorySaver())
config = {"configurable": {"thread_id": "thread-1"}}
for turn in range(20):
    question = f"Question {turn}: what changed in release {turn}?"
    state = agent.invoke({"messages": [{"role": "user", "content": question}]}, config)
print(len(state["messages"]), "messages in the state, the first one a summary:")
print(state["messages"][0].text.splitlines()[0])
synopsis_store.close()
