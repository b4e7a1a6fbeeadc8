"""search_history: a Pydantic AI agent searches what compaction archived.

Runs offline: a FunctionModel plays the agent, asks the tool for "vault code" and answers with
what it found. A real model decides by itself; the summary tells it that the tool exists.
"""

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from synopsis import AsyncCompactor, MemoryArchive
from synopsis.adapters.pydantic_ai import compaction_capability, search_history_tool
from synopsis.convert import to_pydantic_ai


def agent_model(messages, info):
    found = [part.content for m in messages for part in m.parts if isinstance(part, ToolReturnPart)]
    if not found:
        return ModelResponse(parts=[ToolCallPart("search_history", {"query": "vault code"})])
    return ModelResponse(parts=[TextPart(found[-1])])


compactor = AsyncCompactor(
    archive=MemoryArchive(), trigger_messages=30, keep_tail=4, session_id="vault-setup"
)
agent = Agent(
    FunctionModel(agent_model),
    tools=[search_history_tool(compactor)],
    capabilities=[compaction_capability(compactor)],
)

history = [
    {"role": "user", "content": "Set up the team vault."},
    {"role": "assistant", "content": "Done. The code is 7429-ALPHA."},
]
for step in range(20):
    history += [
        {"role": "user", "content": f"Step {step}: check the logs."},
        {"role": "assistant", "content": "The logs look fine."},
    ]


async def main() -> None:
    result = await agent.run("What was the vault code?", message_history=to_pydantic_ai(history))
    print(result.output.splitlines()[2])


if __name__ == "__main__":
    import asyncio

    asyncio.run(main())
