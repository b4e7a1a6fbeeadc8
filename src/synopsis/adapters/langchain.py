"""LangChain v1 agent middleware: in-place compaction and side-store session memory.

Both go into ``langchain.agents.create_agent(..., middleware=[...])`` and work with the agent's
sync (``invoke``, ``stream``) and async (``ainvoke``, ``astream``) APIs.

:class:`CompactionMiddleware` compacts the agent state's messages before each model call when
the compactor's trigger fires, and writes the compacted list back into the state, so the
summary is made once and every later call builds on it. Messages the compactor keeps stay the
state's own objects (see :mod:`synopsis.adapters._state`); the provider's ``usage_metadata`` on
the newest AI message is the token count's baseline, so the trigger sees what the provider
counted, system prompt and tool schemas included.

:class:`SessionMemoryMiddleware` is the side-store design: the state keeps the full history;
before each model call the request gets the session summary (and, with ``hybrid=True`` on the
memory, recalled notes) appended to its system prompt and a tool-safe window of recent
messages; after each model call a background summary is scheduled when one is due. Tenant,
user and session come from the run's context or config, never from the messages.

:func:`search_history_tool` gives the agent the compactor's archive as a ``search_history``
tool (``create_agent(tools=[...])``), or ``CompactionMiddleware(compactor, history_tool=True)``
registers it itself; the summary's pointer to the archive then names it.

Needs ``synopsis[langchain]``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import SystemMessage
from langgraph.runtime import Runtime

from synopsis.adapters._lc_tool import search_history_tool
from synopsis.adapters._state import (
    acompact_messages,
    check_compactor,
    compact_messages,
    replace_all,
)
from synopsis.compaction.compactor import AsyncCompactor, Compactor
from synopsis.convert import from_langchain, to_langchain
from synopsis.errors import ConfigError, InvalidInput
from synopsis.session.memory import AsyncSessionMemory, SessionMemory

__all__ = [
    "CompactionMiddleware",
    "SessionKeys",
    "SessionMemoryMiddleware",
    "search_history_tool",
    "session_ids",
]


class CompactionMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Compact the agent's messages before a model call when the compactor's trigger fires.

    ``compactor`` is a :class:`~synopsis.Compactor` (sync and async runs; async runs call it in
    a worker thread) or an :class:`~synopsis.AsyncCompactor` (async runs only). With
    ``history_tool=True`` the middleware gives the agent the ``search_history`` tool over the
    compactor's archive (:func:`search_history_tool`).
    """

    def __init__(
        self, compactor: Compactor | AsyncCompactor, *, history_tool: bool = False
    ) -> None:
        check_compactor(compactor)
        self.compactor = compactor
        self.tools = [search_history_tool(compactor)] if history_tool else []

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Replace the state's messages with the compacted ones, if a compaction happened."""
        messages = compact_messages(self.compactor, state["messages"])
        return None if messages is None else replace_all(messages)

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """The async twin of :meth:`before_model`."""
        messages = await acompact_messages(self.compactor, state["messages"])
        return None if messages is None else replace_all(messages)


@dataclass(frozen=True, slots=True)
class SessionKeys:
    """Where a run names its tenant, user and session: keys of ``context`` (a mapping or an
    object with these attributes) or of ``config["configurable"]``, looked up in that order.
    The session falls back to the run's ``thread_id``."""

    tenant: str = "tenant"
    user_id: str = "user_id"
    session_id: str = "session_id"


def session_ids(runtime: Runtime[Any], keys: SessionKeys = SessionKeys()) -> tuple[str, str, str]:
    """(tenant, user, session) of the current run, from its context or config only."""
    configurable = _configurable()
    info = getattr(runtime, "execution_info", None)  # not on every LangGraph 1.x Runtime
    thread = getattr(info, "thread_id", None) or configurable.get("thread_id")
    found = []
    for name in ("tenant", "user_id", "session_id"):
        key = getattr(keys, name)
        value = _lookup(runtime.context, key)
        value = value if value is not None else configurable.get(key)
        if value is None and name == "session_id":
            value = thread
        if not isinstance(value, str) or not value:
            raise InvalidInput(
                f"the run names no {name} under {key!r}: pass context={{{key!r}: ...}} to "
                f"invoke/ainvoke, or config={{'configurable': {{{key!r}: ...}}}}"
            )
        found.append(value)
    return found[0], found[1], found[2]


def _lookup(context: Any, key: str) -> Any:
    if context is None:
        return None
    if isinstance(context, Mapping):
        return context.get(key)
    return getattr(context, key, None)


def _configurable() -> Mapping[str, Any]:
    from langgraph.config import get_config

    try:
        configurable = get_config().get("configurable")
    except RuntimeError:  # called outside a run (a test calling the hook directly)
        return {}
    return configurable if isinstance(configurable, Mapping) else {}


class SessionMemoryMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Session summary (and recalled notes) in the system prompt; summaries in the background.

    ``memory`` is a :class:`~synopsis.SessionMemory` (sync and async runs; async runs call it
    in a worker thread) or an :class:`~synopsis.AsyncSessionMemory` (async runs only). The
    memory's own options decide the window, the budget, recall and how often to summarize.
    ``keys`` says where the run names its tenant, user and session (see :class:`SessionKeys`).
    The middleware never closes the memory; its owner does.
    """

    def __init__(
        self, memory: SessionMemory | AsyncSessionMemory, *, keys: SessionKeys = SessionKeys()
    ) -> None:
        if not callable(getattr(memory, "build_context", None)):
            raise ConfigError(
                f"expected a SessionMemory or an AsyncSessionMemory, got {type(memory).__name__}"
            )
        self.memory = memory
        self.keys = keys
        self._async = inspect.iscoroutinefunction(memory.build_context)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Send the request with the session context built by the memory."""
        memory = self._sync_memory()
        history, system = _request_history(request)
        built = memory.build_context(*session_ids(request.runtime, self.keys), history)
        return handler(_with_context(request, history, system, built))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """The async twin of :meth:`wrap_model_call`."""
        tenant, user, session = session_ids(request.runtime, self.keys)
        history, system = _request_history(request)
        if self._async:
            memory = cast("AsyncSessionMemory", self.memory)
            built = await memory.build_context(tenant, user, session, history)
        else:
            build = cast("SessionMemory", self.memory).build_context
            built = await asyncio.to_thread(build, tenant, user, session, history)
        return await handler(_with_context(request, history, system, built))

    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Schedule a background summary of the session when one is due (returns at once)."""
        memory = self._sync_memory()
        memory.after_turn(*session_ids(runtime, self.keys), from_langchain(state["messages"]))
        return None

    async def aafter_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """The async twin of :meth:`after_model`."""
        tenant, user, session = session_ids(runtime, self.keys)
        history = from_langchain(state["messages"])
        if self._async:
            memory = cast("AsyncSessionMemory", self.memory)
            await memory.after_turn(tenant, user, session, history)
        else:
            after_turn = cast("SessionMemory", self.memory).after_turn
            await asyncio.to_thread(after_turn, tenant, user, session, history)
        return None

    def _sync_memory(self) -> SessionMemory:
        if self._async:
            raise ConfigError(
                "an AsyncSessionMemory needs the agent's async API (ainvoke, astream); "
                "give a SessionMemory to run the agent with invoke or stream"
            )
        return cast("SessionMemory", self.memory)


def _request_history(request: ModelRequest[Any]) -> tuple[list[dict[str, Any]], int]:
    """The request as our messages (system message first), and how many are system ones."""
    system = [request.system_message] if request.system_message is not None else []
    converted = from_langchain(system, keep_extras=True) + from_langchain(request.messages)
    return converted, len(system)


def _with_context(
    request: ModelRequest[Any],
    history: Sequence[Mapping[str, Any]],
    system_count: int,
    built: Sequence[Mapping[str, Any]],
) -> ModelRequest[Any]:
    """``request`` with the built context: one system message, and the window's originals.

    The window is a suffix of the request's messages (its copies, in order), so the request
    keeps its own message objects; everything before it is system text, merged into one
    system message because not every provider accepts several.
    """
    window = _common_suffix(built, history[system_count:])
    head = list(built[: len(built) - window])
    originals = request.messages[len(request.messages) - window :] if window else []
    if head == history[:system_count]:
        return request.override(messages=list(originals))
    system = cast("SystemMessage", to_langchain([_merged(head)])[0]) if head else None
    return request.override(system_message=system, messages=list(originals))


def _common_suffix(built: Sequence[Mapping[str, Any]], body: Sequence[Mapping[str, Any]]) -> int:
    size = 0
    while size < min(len(built), len(body)) and built[-1 - size] == body[-1 - size]:
        size += 1
    return size


def _merged(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One system message holding the text of ``messages`` in order."""
    merged = dict(messages[0])
    for message in messages[1:]:
        merged["content"] = _joined(merged.get("content"), message.get("content"))
    return merged


def _joined(first: Any, second: Any) -> Any:
    if isinstance(first, str) and isinstance(second, str):
        return f"{first}\n\n{second}" if first else second
    return [*_parts(first), *_parts(second)]


def _parts(content: Any) -> list[Any]:
    if isinstance(content, list):
        return list(content)
    return [{"type": "text", "text": content}] if content else []
