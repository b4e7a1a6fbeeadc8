"""A compacting OpenAI Agents SDK session, offline: six turns, compacted when they cross 6 messages.

Run it with ``python examples/openai_agents_session.py``. The agent's model is the SDK's own
scripted test model, so no API key is needed: give the agent a real one (``model="gpt-4.1"``)
and the summarizer a real one (``model="openai:gpt-4o-mini"``) in an application.
"""

import asyncio
import sys

from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message

from synopsis import AsyncCompactor
from synopsis.adapters.openai_agents import SynopsisSession
from synopsis.memory import AsyncSQLiteStore


async def main(db_path: str = "agents.db") -> None:
    store = AsyncSQLiteStore(db_path)
    compactor = AsyncCompactor(model="extractive", trigger_messages=6, keep_tail=2)
    session = SynopsisSession(
        "chat-42", store=store, tenant="acme", user_id="u-7", compactor=compactor
    )
    model = ScriptedModel([[assistant_message(f"Answer {turn}.")] for turn in range(6)])
    agent = Agent(name="assistant", instructions="Be brief.", model=model)
    for turn in range(6):
        await Runner.run(
            agent, f"Question {turn}?", session=session,
            run_config=session.run_config(tracing_disabled=True),  # bounds every model call
        )
        items = await session.get_items(limit=100)  # a peek at what is stored
        print(f"after turn {turn}: {len(items)} items stored")
    generations = await session.generations()  # every compaction keeps the history it replaced
    print(f"compactions: {len(generations) - 1}")
    print("first item now:", generations[-1][0]["content"].splitlines()[0])
    await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
