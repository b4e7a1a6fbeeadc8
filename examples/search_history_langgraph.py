"""search_history in a LangGraph graph: compact before the model, search the archive in a tool.

Runs offline: LangChain's fake chat model plays the agent and asks the tool for "vault code".
The archive here lives in a synopsis store (one tenant, one user), as a service's would.
"""

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from synopsis import Compactor, StoreArchive
from synopsis.adapters.langgraph import pre_model_hook, search_history_tool
from synopsis.memory import SQLiteStore

call = {"name": "search_history", "args": {"query": "vault code"}, "id": "call-1"}
model = GenericFakeChatModel(messages=iter([AIMessage("", tool_calls=[call]), AIMessage("ok")]))

store = SQLiteStore(":memory:")  # or SQLiteStore("memory.db"), PostgresStore(url)
archive = StoreArchive(store, "acme", user_id="user-1")  # delete_user erases it too
compactor = Compactor(archive=archive, trigger_messages=30, keep_tail=4, session_id="s-1")
search_history = search_history_tool(compactor)

graph = StateGraph(MessagesState)
graph.add_node("compact", pre_model_hook(compactor))
graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
graph.add_node("tools", ToolNode([search_history]))
graph.add_edge(START, "compact")
graph.add_edge("compact", "model")
graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
graph.add_edge("tools", "compact")
app = graph.compile()

history = [HumanMessage("Set up the team vault."), AIMessage("Done. The code is 7429-ALPHA.")]
for step in range(20):
    history += [HumanMessage(f"Step {step}: check the logs."), AIMessage("The logs look fine.")]
result = app.invoke({"messages": [*history, HumanMessage("What was the vault code?")]})
tool_answer = next(message for message in result["messages"] if message.type == "tool")
print(tool_answer.text.splitlines()[2])
store.close()
