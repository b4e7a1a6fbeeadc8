"""LangChain's own ``SummarizationMiddleware`` as a bench strategy, with synopsis's summarizer.

``ExtractiveChatModel`` is a LangChain chat model whose answer is written by synopsis's offline
extractive ``Summarizer``. The middleware prompts its model as it would any chat model: one
human message, its summary prompt with the history to summarize serialized as XML
(``get_buffer_string(..., format="xml")``). The model reads that history back into messages
(a tool result takes the id of the call it follows) and summarizes those, so the summary
comes from the same messages a language model would be shown.

``langchain_middleware_hook`` drives the real middleware the way an agent does: the state's
messages are LangChain messages, the system prompt stays outside the state (an agent's
``system_prompt``), ``before_model`` is called before every model call and its update
(``RemoveMessage(REMOVE_ALL_MESSAGES)``, the summary, the kept messages) replaces the state.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from langchain.agents.middleware.summarization import SummarizationMiddleware
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict

from synopsis.convert.langchain import from_langchain, to_langchain
from synopsis.messages import split_leading_system
from synopsis.summarizer import Summarizer

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
_MARKER = "<messages>"


def history_from_prompt(prompt: str) -> list[dict[str, Any]]:
    """The messages a summary prompt of the middleware carries, as OpenAI-shape messages."""
    start, end = prompt.rfind(_MARKER), prompt.rfind("</messages>")
    if start < 0 or end < start:
        raise ValueError("the prompt holds no <messages> block to summarize")
    body = prompt[start + len(_MARKER) : end]
    first = body.find("<message ")
    root = ET.fromstring(f"<root>{body[first:] if first >= 0 else ''}</root>")
    messages: list[dict[str, Any]] = []
    pending: list[str] = []  # ids of tool calls still waiting for their result
    for number, element in enumerate(root.iter("message")):
        role = _ROLES.get(element.get("type", ""), "user")
        text = "".join([element.text or "", *((child.tail or "") for child in element)]).strip()
        calls = [
            {
                "id": child.get("id") or f"call{number}",
                "type": "function",
                "function": {"name": child.get("name", ""), "arguments": child.text or "{}"},
            }
            for child in element
            if child.tag == "tool_call"
        ]
        if role == "tool":
            if pending:
                messages.append({"role": "tool", "tool_call_id": pending.pop(0), "content": text})
            else:  # a result whose call was cut away: keep its text as the user saw it
                messages.append({"role": "user", "content": text})
            continue
        message: dict[str, Any] = {"role": role, "content": text or None}
        if calls:
            message["tool_calls"] = calls
            pending = [str(call["id"]) for call in calls]
        messages.append(message)
    return messages


class ExtractiveChatModel(BaseChatModel):
    """A LangChain chat model answering summary prompts with synopsis's extractive summarizer."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    summarizer: Summarizer

    @property
    def _llm_type(self) -> str:
        return "synopsis-extractive"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        history = history_from_prompt(str(messages[-1].text))
        _, rest = split_leading_system(history)
        summary = self.summarizer.summarize(rest or history).text
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=summary))])


def langchain_middleware_hook(budget: int, summarizer: Summarizer) -> Any:
    """A before-model hook (``history -> history``) running LangChain's middleware, defaults
    but the trigger (``("tokens", budget)``)."""
    middleware: SummarizationMiddleware[Any, Any] = SummarizationMiddleware(
        model=ExtractiveChatModel(summarizer=summarizer), trigger=("tokens", budget)
    )
    state: list[BaseMessage] = []
    system: list[Any] = []  # the agent's system prompt, outside the state
    sent: list[dict[str, Any]] = []  # what the hook returned last

    def hook(history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        nonlocal system, sent
        if len(history) < len(sent) or any(
            a is not b for a, b in zip(history[: len(sent)], sent, strict=True)
        ):
            state.clear()
            sent = []
        new: Sequence[Mapping[str, Any]] = history[len(sent) :]
        if not sent:
            system, new = split_leading_system(history)
        state.extend(to_langchain(new))
        state_ = {"messages": state}
        update = middleware.before_model(state_, None)  # type: ignore[arg-type]
        if update is None:
            sent = [*history]
        else:
            state[:] = [m for m in update["messages"] if not isinstance(m, RemoveMessage)]
            sent = [*system, *from_langchain(state)]
        return list(sent)

    return hook
