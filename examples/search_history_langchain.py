"""search_history: a LangChain agent searches what compaction archived.

Runs offline: LangChain's fake chat model plays the agent and asks the tool for "vault code".
A real model decides by itself; the summary tells it that the tool exists.
"""

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage

from synopsis import Compactor, MemoryArchive
from synopsis.adapters.langchain import CompactionMiddleware


class ToolCallingFake(GenericFakeChatModel):
    def bind_tools(self, tools, **kwargs):  # the fake model ignores the tool schemas
        return self


call = {"name": "search_history", "args": {"query": "vault code"}, "id": "call-1"}
model = ToolCallingFake(messages=iter([AIMessage("", tool_calls=[call]), AIMessage("7429-ALPHA")]))

# Any searchable archive: MemoryArchive(), JsonlArchive(directory), StoreArchive(store, tenant).
compactor = Compactor(
    archive=MemoryArchive(), trigger_messages=30, keep_tail=4, session_id="vault-setup"
)
# history_tool=True gives the agent the search_history tool over the compactor's archive.
agent = create_agent(model, middleware=[CompactionMiddleware(compactor, history_tool=True)])

history = [HumanMessage("Set up the team vault."), AIMessage("Done. The code is 7429-ALPHA.")]
for step in range(20):
    history += [HumanMessage(f"Step {step}: check the logs."), AIMessage("The logs look fine.")]
result = agent.invoke({"messages": [*history, HumanMessage("What was the vault code?")]})

summary = result["messages"][0].text
print([line for line in summary.splitlines() if "search_history" in line][0])
tool_answer = next(message for message in result["messages"] if message.type == "tool")
print(tool_answer.text)
