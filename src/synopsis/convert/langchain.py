"""Conversion between our OpenAI-shape messages and LangChain messages (``langchain-core``).

Mapping (chunk classes convert like their message classes):

- ``SystemMessage`` <-> ``system`` (``developer`` when ``additional_kwargs["__openai_role__"]``
  says so, LangChain's own convention); ``HumanMessage`` <-> ``user``; ``AIMessage`` <->
  ``assistant``; ``ToolMessage`` <-> ``tool`` (``tool_call_id``, ``name``; ``status="error"``
  <-> ``meta["is_error"]``, as for Anthropic tool results); ``ChatMessage`` -> its role;
- ``tool_calls`` (name, args dict, id) <-> our tool calls (``function.arguments`` as JSON text);
  ``invalid_tool_calls`` (args that are not a JSON object) <-> tool calls with that raw text;
- ``usage_metadata`` <-> ``usage`` (input/output/total tokens <-> prompt/completion/total,
  cache reads, reasoning and audio details <-> OpenAI's ``*_tokens_details``);
- content: a string stays a string (``None`` becomes ``""``); content blocks become parts: text
  blocks <-> ``text`` parts, LangChain and Anthropic image blocks -> ``image_url`` parts, bare
  strings -> ``text`` parts, ``tool_use``/``tool_call`` blocks repeating a tool call are dropped,
  other blocks pass through; our parts go to LangChain unchanged (it reads OpenAI parts);
- ``additional_kwargs`` ``refusal``, ``reasoning_content``, ``audio``, ``function_call`` <->
  the same message keys, as ``langchain-openai`` does.

By default :func:`from_langchain` returns only message fields (plus our ``usage``/``meta``
extensions), so the result may go to a strict provider after
:func:`~synopsis.messages.strip_extensions`. With ``keep_extras=True`` everything else a
LangChain message holds (``id``, ``response_metadata``, other ``additional_kwargs``,
``artifact``, the chunk class, invalid-call errors, the exact content blocks) rides under
``CARRY_KEY`` and :func:`to_langchain` puts it back. :func:`to_langchain` keeps what LangChain
has no field for (``meta``, a ``None`` content, argument text that is not canonical JSON) in
``additional_kwargs[CARRY_KEY]``, which chat-model integrations do not send. See
:mod:`synopsis.convert._carry` for how carried data yields to later edits.

``langchain-core`` is an optional dependency, imported when a function is called.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from synopsis.convert._carry import (
    CARRY_KEY,
    Fields,
    carried,
    diff,
    parse_object,
    restore,
    with_carried,
    without,
)
from synopsis.convert.anthropic import _part_from as _anthropic_part
from synopsis.errors import InvalidMessage

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

__all__ = ["from_langchain", "to_langchain"]

_FRAMEWORK: Final = "langchain"
_KW: Final = "additional_kwargs."  # additional_kwargs are flattened into the fields
_OURS: Final = _KW + CARRY_KEY
_PASSED: Final = ("refusal", "reasoning_content", "audio", "function_call")
_ROLE_OF_TYPE: Final = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}
_TYPE_OF_ROLE: Final = {
    "system": "system",
    "developer": "system",
    "user": "human",
    "assistant": "ai",
    "tool": "tool",
}
_CHAT_ROLES: Final = {"human": "user", "ai": "assistant"}
_CALL_BLOCKS: Final = frozenset({"tool_use", "tool_call", "function_call"})


def to_langchain(
    messages: Sequence[Mapping[str, Any]], *, keep_extras: bool = True
) -> list[BaseMessage]:
    """LangChain messages for our messages.

    ``keep_extras`` keeps what LangChain has no field for in ``additional_kwargs[CARRY_KEY]``,
    so :func:`from_langchain` gives the same messages back.
    """
    result = []
    for index, message in enumerate(messages):
        if message.get("role") not in _TYPE_OF_ROLE:
            raise InvalidMessage(
                f"cannot convert role {message.get('role')!r} to LangChain", index=index
            )
        result.append(_build(_to_fields(message, keep_extras)))
    return result


def from_langchain(
    messages: Sequence[BaseMessage], *, keep_extras: bool = False
) -> list[dict[str, Any]]:
    """Our messages for LangChain messages (their chunks too).

    ``keep_extras`` carries every LangChain field without an OpenAI equivalent under
    ``CARRY_KEY``, so :func:`to_langchain` rebuilds equal messages.
    """
    from langchain_core.messages import BaseMessage

    result = []
    for index, message in enumerate(messages):
        fields = _fields_of(message) if isinstance(message, BaseMessage) else {}
        if _role_of(fields) is None:
            raise InvalidMessage(
                f"cannot convert a {type(message).__name__} to a chat message", index=index
            )
        result.append(_from_fields(fields, keep_extras))
    return result


def _to_fields(message: Mapping[str, Any], keep_extras: bool) -> Fields:
    own = without(message, CARRY_KEY)
    base = _std_to(own)
    fields = restore(base, carried(message, _FRAMEWORK), lambda f: _std_to(_std_from(f)))
    extras = diff(own, _std_from(base)) if keep_extras else {}
    if extras:
        fields[_OURS] = extras
    return fields


def _from_fields(fields: Fields, keep_extras: bool) -> dict[str, Any]:
    base = _std_from(fields)
    message = restore(base, fields.get(_OURS), lambda m: _std_from(_std_to(m)))
    if keep_extras:
        with_carried(message, _FRAMEWORK, diff(without(fields, _OURS), _std_to(message)))
    return message


# ---------------------------------------------------------------------------------------------
# LangChain objects <-> flat fields (only values that differ from the field's default)


@cache
def _classes() -> dict[str, type[BaseMessage]]:
    from langchain_core import messages as lc

    classes: tuple[type[BaseMessage], ...] = (
        lc.SystemMessage,
        lc.SystemMessageChunk,
        lc.HumanMessage,
        lc.HumanMessageChunk,
        lc.AIMessage,
        lc.AIMessageChunk,
        lc.ToolMessage,
        lc.ToolMessageChunk,
        lc.ChatMessage,
        lc.ChatMessageChunk,
    )
    return {cls.model_fields["type"].default: cls for cls in classes}


def _fields_of(message: BaseMessage) -> Fields:
    fields: Fields = {}
    for name, default in _defaults(type(message)).items():
        value = getattr(message, name)
        if name == "additional_kwargs":
            fields.update((_KW + key, item) for key, item in value.items())
        elif name == "type" or value != default:
            fields[name] = value
    fields.update(message.model_extra or {})
    return fields


@cache
def _defaults(cls: type[BaseMessage]) -> dict[str, Any]:
    """Each field's default (computed once per class: default factories are slow to inspect)."""
    return {
        name: info.get_default(call_default_factory=True) for name, info in cls.model_fields.items()
    }


def _build(fields: Fields) -> BaseMessage:
    cls = _classes()[fields["type"]]
    kwargs = {k: v for k, v in fields.items() if not k.startswith(_KW)}
    kwargs["additional_kwargs"] = {k[len(_KW) :]: v for k, v in fields.items() if k.startswith(_KW)}
    # A chunk derives tool calls from explicit tool_call_chunks (parsing partial JSON) and the
    # chunks from tool calls otherwise: pass the chunks only when the derived ones differ.
    chunks = kwargs.pop("tool_call_chunks", None)
    message = cls(**kwargs)
    if chunks is not None and getattr(message, "tool_call_chunks", None) != chunks:
        message = cls(**kwargs, tool_call_chunks=chunks)
    return message


def _role_of(fields: Mapping[str, Any]) -> str | None:
    kind = str(fields.get("type", "")).removesuffix("MessageChunk").lower()
    if kind == "chat":
        role = fields.get("role")
        role = _CHAT_ROLES.get(role, role) if isinstance(role, str) else None
        return role if role in _TYPE_OF_ROLE else None
    role = _ROLE_OF_TYPE.get(kind)
    if role == "system" and fields.get(_KW + "__openai_role__") == "developer":
        return "developer"
    return role


# ---------------------------------------------------------------------------------------------
# The standard mapping


def _std_to(message: Mapping[str, Any]) -> Fields:
    role = message.get("role")
    kind = _TYPE_OF_ROLE.get(str(role), "chat")
    fields: Fields = {"type": kind, "content": _content_to(message)}
    if kind == "chat":
        fields["role"] = role
    if message.get("name") is not None:
        fields["name"] = message["name"]
    if role == "developer":
        fields[_KW + "__openai_role__"] = "developer"
    fields.update((_KW + k, message[k]) for k in _PASSED if message.get(k) is not None)
    if role == "assistant":
        fields.update(_calls_to(message.get("tool_calls") or []))
        usage = _usage_to(message.get("usage"))
        if usage is not None:
            fields["usage_metadata"] = usage
    if role == "tool":
        fields["tool_call_id"] = message.get("tool_call_id")
        meta = message.get("meta")
        if isinstance(meta, Mapping) and meta.get("is_error"):
            fields["status"] = "error"
    return fields


def _std_from(fields: Mapping[str, Any]) -> dict[str, Any]:
    role = _role_of(fields)
    calls = _calls_from(fields) if role == "assistant" else []
    ids = {call["id"] for call in calls}
    message: dict[str, Any] = {"role": role, "content": _content_from(fields.get("content"), ids)}
    if fields.get("name") is not None:
        message["name"] = fields["name"]
    for key in _PASSED:
        if fields.get(_KW + key) is not None:
            message[key] = fields[_KW + key]
    if calls:
        message["tool_calls"] = calls
    usage = _usage_from(fields.get("usage_metadata"))
    if role == "assistant" and usage is not None:
        message["usage"] = usage
    if role == "tool":
        message["tool_call_id"] = fields.get("tool_call_id")
        if fields.get("status") == "error":
            message["meta"] = {"is_error": True}
    return message


def _content_to(message: Mapping[str, Any]) -> Any:
    content = message.get("content")
    if content is None:
        return ""
    return (
        [dict(p) if isinstance(p, Mapping) else p for p in content]
        if isinstance(content, list)
        else content
    )


def _content_from(content: Any, call_ids: set[Any]) -> Any:
    if not isinstance(content, list):
        return "" if content is None else content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append({"type": "text", "text": block})
        elif not isinstance(block, Mapping):
            parts.append(block)
        elif block.get("type") not in _CALL_BLOCKS or _block_call_id(block) not in call_ids:
            parts.append(_part_from(block))
    return parts


def _block_call_id(block: Mapping[str, Any]) -> Any:
    return block.get("call_id") if block.get("type") == "function_call" else block.get("id")


def _part_from(block: Mapping[str, Any]) -> Any:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    if kind == "image_url" and isinstance(block.get("image_url"), str):
        return {"type": "image_url", "image_url": {"url": block["image_url"]}}
    if kind == "image" and isinstance(block.get("source"), Mapping):
        return _anthropic_part(block)
    if kind == "image" and ("url" in block or "base64" in block or "data" in block):
        from langchain_core.messages import convert_to_openai_image_block

        try:
            return convert_to_openai_image_block(dict(block))
        except (KeyError, ValueError):
            return dict(block)
    return dict(block)


# ---------------------------------------------------------------------------------------------
# Tool calls and usage


def _calls_to(calls: list[Mapping[str, Any]]) -> Fields:
    valid: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for call in calls:
        function = call.get("function") or {}
        raw = function.get("arguments")
        args = {} if raw in ("", None) else parse_object(raw)
        entry = {"name": function.get("name"), "id": call.get("id")}
        if args is None:
            invalid.append({**entry, "args": raw, "error": None, "type": "invalid_tool_call"})
        else:
            valid.append({**entry, "args": args, "type": "tool_call"})
    fields: Fields = {}
    if valid:
        fields["tool_calls"] = valid
    if invalid:
        fields["invalid_tool_calls"] = invalid
    return fields


def _calls_from(fields: Mapping[str, Any]) -> list[dict[str, Any]]:
    calls = [
        _call(
            c.get("id"),
            c.get("name"),
            json.dumps(c.get("args") or {}, ensure_ascii=False, default=str),
        )
        for c in fields.get("tool_calls") or []
    ]
    calls += [
        _call(c.get("id"), c.get("name"), c.get("args") or "")
        for c in fields.get("invalid_tool_calls") or []
    ]
    return calls


def _call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# (our details key, LangChain details key, ((our token key, LangChain token key), ...))
_DETAILS: Final = (
    (
        "prompt_tokens_details",
        "input_token_details",
        (("cached_tokens", "cache_read"), ("audio_tokens", "audio")),
    ),
    (
        "completion_tokens_details",
        "output_token_details",
        (("reasoning_tokens", "reasoning"), ("audio_tokens", "audio")),
    ),
)


def _usage_to(usage: Any) -> dict[str, Any] | None:
    if not isinstance(usage, Mapping):
        return None
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    total = usage.get("total_tokens")
    result: dict[str, Any] = {
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": _count(total) if total is not None else prompt + completion,
    }
    for ours, theirs, keys in _DETAILS:
        details = _rename(usage.get(ours), keys)
        if details:
            result[theirs] = details
    return result


def _usage_from(metadata: Any) -> dict[str, Any] | None:
    if not isinstance(metadata, Mapping):
        return None
    result: dict[str, Any] = {
        "prompt_tokens": metadata.get("input_tokens", 0),
        "completion_tokens": metadata.get("output_tokens", 0),
        "total_tokens": metadata.get("total_tokens", 0),
    }
    for ours, theirs, keys in _DETAILS:
        details = _rename(metadata.get(theirs), tuple((b, a) for a, b in keys))
        if details:
            result[ours] = details
    return result


def _rename(details: Any, keys: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    if not isinstance(details, Mapping):
        return {}
    return {new: details[old] for old, new in keys if details.get(old) is not None}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
