"""A Pydantic AI agent whose history is compacted before model requests, offline.

Run it with ``python examples/pydantic_ai_history.py``. The agent's model is Pydantic AI's own
``TestModel`` (it calls every tool, then answers), so no API key is needed: give the agent a
real model (``Agent("openai:gpt-4o", ...)``) and the summarizer one
(``model="openai:gpt-4o-mini"``) in an application.
"""

import asyncio

from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from synopsis import AsyncCompactor
from synopsis.adapters.pydantic_ai import compaction_capability
from synopsis.convert import from_pydantic_ai
from synopsis.messages import content_type

compactor = AsyncCompactor(model="extractive", trigger_messages=8, keep_tail=3)
agent = Agent(
    TestModel(),
    system_prompt="You look things up.",
    capabilities=[compaction_capability(compactor)],  # Pydantic AI 1.x: history_processors=[...]
)


@agent.tool_plain
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"notes on {topic}"


async def main() -> None:
    history = []
    for turn in range(5):
        result = await agent.run(f"Tell me about topic {turn}.", message_history=history)
        history = result.all_messages()
        kinds = [content_type(m) or m["role"] for m in from_pydantic_ai(history)]
        print(f"after turn {turn}: {len(kinds)} messages: {' '.join(kinds)}")


if __name__ == "__main__":
    asyncio.run(main())
