"""search_history: an OpenAI Agents SDK agent searches what its session's compaction archived.

Runs offline: a scripted ``Model`` plays the agent, asks the tool for "vault code" and answers
with what it found. A real model decides by itself; the summary tells it that the tool exists.
"""

import json

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from synopsis import AsyncCompactor, StoreArchive
from synopsis.adapters.openai_agents import SynopsisSession, search_history_tool
from synopsis.convert import to_responses_items
from synopsis.memory import SQLiteStore


class ScriptedModel(Model):
    async def get_response(self, system_instructions, input, *args, **kwargs):
        found = [item["output"] for item in input if item.get("type") == "function_call_output"]
        if not found:
            call = ResponseFunctionToolCall(
                type="function_call", call_id="call-1", name="search_history",
                arguments=json.dumps({"query": "vault code"}),
            )  # fmt: skip
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text=found[-1], annotations=[])
        message = ResponseOutputMessage(
            id="msg-1", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


async def main(path: str = "agents.db") -> None:
    store = SQLiteStore(path)  # the session's items and its archive, in one database
    compactor = AsyncCompactor(
        archive=StoreArchive(store, "acme", user_id="user-1"),
        trigger_messages=30, keep_tail=4, session_id="chat-42",
    )  # fmt: skip
    session = SynopsisSession(
        "chat-42", store=store, tenant="acme", user_id="user-1", compactor=compactor
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
    await session.add_items(to_responses_items(history))
    agent = Agent(name="helper", model=ScriptedModel(), tools=[search_history_tool(compactor)])
    result = await Runner.run(
        agent, "What was the vault code?", session=session,
        run_config=RunConfig(tracing_disabled=True),
    )  # fmt: skip
    print(result.final_output.splitlines()[2])
    store.close()


if __name__ == "__main__":
    import asyncio
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(main(f"{directory}/agents.db"))
