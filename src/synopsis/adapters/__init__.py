"""Thin wiring of synopsis into agent frameworks, each module behind its own extra.

Import the module of the framework you use; this package imports none of them.

- :mod:`synopsis.adapters.langchain` (``synopsis[langchain]``): ``CompactionMiddleware`` and
  ``SessionMemoryMiddleware`` for ``langchain.agents.create_agent``.
- :mod:`synopsis.adapters.langgraph` (``synopsis[langgraph]``): ``SynopsisStore``, a LangGraph
  ``BaseStore`` over any synopsis store, and ``pre_model_hook`` for prebuilt graphs.
- :mod:`synopsis.adapters.openai_agents` (``synopsis[openai-agents]``): ``SynopsisSession``,
  an OpenAI Agents SDK session that compacts what it returns.
- :mod:`synopsis.adapters.pydantic_ai` (``synopsis[pydantic-ai]``): ``history_processor`` for
  ``Agent(history_processors=[...])``.
"""
