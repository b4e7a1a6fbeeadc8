"""Recognizing other frameworks' messages: a helpful hint, and one entry point for all of them.

:func:`foreign_message_hint` names the type of a message object we cannot read and the
converter that reads it, looking only at the module the type comes from (no framework is
imported). :func:`to_openai_messages` takes a list of LangChain messages, Pydantic AI messages,
Responses API items or our own dicts and returns our dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from synopsis.convert.langchain import from_langchain
from synopsis.convert.openai_responses import from_responses_items
from synopsis.convert.pydantic_ai import from_pydantic_ai
from synopsis.errors import InvalidMessage
from synopsis.messages import part_type

__all__ = ["foreign_message_hint", "to_openai_messages"]

_CONVERT: Final = "convert with synopsis.convert."
# (module prefix, module to name the type by, what to do)
_FOREIGN: Final = (
    ("langchain_core.messages", "langchain_core.messages", _CONVERT + "from_langchain(messages)"),
    ("pydantic_ai.messages", "pydantic_ai.messages", _CONVERT + "from_pydantic_ai(messages)"),
    (
        "agents.items",
        "agents.items",
        _CONVERT + "from_responses_items(result.to_input_list())",
    ),
    (
        "openai.types.responses",
        "openai.types.responses",
        _CONVERT + "from_responses_items([item.model_dump(exclude_unset=True) for item in items])",
    ),
    (
        "openai.types.chat",
        "openai.types.chat",
        "pass message.model_dump(exclude_none=True), it is already our shape",
    ),
    ("anthropic.types", "anthropic.types", _CONVERT + "from_anthropic(system, messages)"),
)
_ITEM_TYPES: Final = frozenset(
    {"message", "function_call", "function_call_output", "reasoning", "item_reference"}
)
_RESPONSES_PARTS: Final = frozenset({"input_text", "output_text", "input_image", "input_file"})
_CHAT_ONLY_KEYS: Final = frozenset({"tool_calls", "tool_call_id"})


def foreign_message_hint(obj: object) -> str | None:
    """What ``obj`` is and which converter reads it, or ``None`` when it is nothing we know.

    For example ``"a langchain_core.messages.HumanMessage: convert with
    synopsis.convert.from_langchain(messages)"``. Dicts get a hint only when they are
    Responses API items (a ``type`` and no ``role``).
    """
    if isinstance(obj, Mapping):
        kind = obj.get("type")
        if "role" not in obj and isinstance(kind, str) and _is_item_type(kind):
            return f"a Responses API {kind!r} item: {_CONVERT}from_responses_items(items)"
        return None
    cls = type(obj)
    module = getattr(cls, "__module__", "") or ""
    for prefix, public, advice in _FOREIGN:
        if module == prefix or module.startswith(prefix + "."):
            article = "an" if public[0] in "aeiou" else "a"
            return f"{article} {public}.{cls.__qualname__}: {advice}"
    return None


def _is_item_type(kind: str) -> bool:
    return kind in _ITEM_TYPES or kind.endswith(("_call", "_call_output"))


def to_openai_messages(
    messages: Sequence[Any], *, keep_extras: bool = False
) -> list[dict[str, Any]]:
    """Our messages from a list of one framework's messages (or of our own dicts, copied).

    Accepts LangChain messages, Pydantic AI ``ModelRequest``/``ModelResponse``, Responses API
    items (as the OpenAI Agents SDK stores them) or our dicts; a list mixing them is rejected
    with :class:`~synopsis.errors.InvalidMessage`. ``keep_extras`` is passed to the converter.
    """
    items = list(messages)
    shape = _shape_of(items)
    if shape == "langchain":
        return from_langchain(items, keep_extras=keep_extras)
    if shape == "pydantic_ai":
        return from_pydantic_ai(items, keep_extras=keep_extras)
    if shape == "responses":
        return from_responses_items(items, keep_extras=keep_extras)
    return [dict(item) for item in items]


def _shape_of(items: list[Any]) -> str:
    shapes = [_shape(item, index) for index, item in enumerate(items)]
    if any(shape == "responses" for shape in shapes):
        # Easy messages ({"role", "content"}) read the same in both shapes; only our own
        # tool-call keys are certainly not Responses items.
        shapes = ["responses" if shape == "either" else shape for shape in shapes]
    shapes = ["chat" if shape == "either" else shape for shape in shapes]
    for index, shape in enumerate(shapes):
        if shape != shapes[0]:
            raise InvalidMessage(
                f"a list mixing message types ({_name(shapes[0])} and {_name(shape)}); "
                "convert each framework's messages separately",
                index=index,
            )
    return shapes[0] if shapes else "chat"


def _shape(item: Any, index: int) -> str:
    if isinstance(item, Mapping):
        return _dict_shape(item)
    module = getattr(type(item), "__module__", "") or ""
    if module.startswith("langchain_core.messages"):
        return "langchain"
    if module.startswith("pydantic_ai.messages"):
        return "pydantic_ai"
    hint = foreign_message_hint(item)
    raise InvalidMessage(
        hint or f"expected a chat message (a dict), got {type(item).__name__}", index=index
    )


def _dict_shape(item: Mapping[str, Any]) -> str:
    if "type" in item and ("role" not in item or item.get("type") == "message"):
        return "responses"
    if item.get("role") == "tool" or _CHAT_ONLY_KEYS & item.keys():
        return "chat"
    content = item.get("content")
    if isinstance(content, list) and any(
        isinstance(p, Mapping) and part_type(p) in _RESPONSES_PARTS for p in content
    ):
        return "responses"
    return "either"


def _name(shape: str) -> str:
    return {
        "chat": "chat message dicts",
        "responses": "Responses API items",
        "langchain": "LangChain messages",
        "pydantic_ai": "Pydantic AI messages",
    }.get(shape, shape)
