"""The ``search_history`` tool as a LangChain tool, for the LangChain and LangGraph adapters.

Only ``langchain_core`` is needed, so both extras can use it. A bad call (an empty query, a
limit out of range) comes back to the model as the tool's answer, ``Error: ...``, so it can
correct itself; the run goes on.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException

from synopsis.compaction.compactor import AsyncCompactor, Compactor
from synopsis.compaction.history import DESCRIPTION, SEARCH_HISTORY, HistoryTool, history_tool
from synopsis.errors import InvalidInput

__all__ = ["langchain_history_tool", "search_history_tool"]


def search_history_tool(
    compactor: Compactor | AsyncCompactor,
    *,
    name: str = SEARCH_HISTORY,
    description: str = DESCRIPTION,
    max_chars: int = 6_000,
) -> BaseTool:
    """A LangChain tool searching what ``compactor`` archived of its session.

    The compactor's summaries name the tool from then on (see
    :func:`synopsis.compaction.history.history_tool`); its archive must be searchable.
    """
    found = history_tool(compactor, name=name, description=description, max_chars=max_chars)
    return langchain_history_tool(found)


def langchain_history_tool(tool: HistoryTool) -> BaseTool:
    """``tool`` as a LangChain ``StructuredTool`` (sync and async)."""

    def search(query: str, limit: int | None = None) -> str:
        try:
            return tool.run(query, limit)
        except InvalidInput as exc:
            raise ToolException(f"Error: {exc}") from exc

    async def asearch(query: str, limit: int | None = None) -> str:
        try:
            return await tool.arun(query, limit)
        except InvalidInput as exc:
            raise ToolException(f"Error: {exc}") from exc

    schema: dict[str, Any] = {"title": tool.name, **tool.parameters}
    return StructuredTool.from_function(
        func=None if tool.is_async else search,
        coroutine=asearch,
        name=tool.name,
        description=tool.description,
        args_schema=schema,
        handle_tool_error=True,
    )
