"""Conversion between our OpenAI-shape messages and Anthropic Messages API messages.

Mapping:

- system messages -> the top-level ``system`` string (joined with blank lines);
- text parts <-> ``text`` blocks; ``image_url`` parts <-> ``image`` blocks (base64 data URLs
  <-> ``base64`` sources, other URLs <-> ``url`` sources); other parts pass through unchanged;
- assistant ``tool_calls`` <-> ``tool_use`` blocks (``arguments`` JSON string <-> ``input``);
- a run of ``tool`` messages <-> one user message of ``tool_result`` blocks (split back);
- Anthropic ``thinking`` blocks -> ``reasoning_content``.

With ``keep_meta`` everything Anthropic has no field for (our ``meta`` and ``usage``, a tool
message's ``name``, tool arguments that are not a JSON object) rides along under the
:data:`CARRY_KEY` key of the message or block, so a round trip loses nothing. The Anthropic
adapter sends with ``keep_meta=False`` (and :func:`strip_carry` removes the key otherwise),
because the API rejects unknown fields. All of this is pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Final

from synopsis.convert._carry import parse_object
from synopsis.convert._parts import map_parts
from synopsis.messages import CARRY_KEY, is_system

__all__ = ["CARRY_KEY", "from_anthropic", "strip_carry", "to_anthropic"]

_STRUCTURAL: Final = frozenset({"role", "content", "tool_calls", "tool_call_id"})
# A private flag on user messages made of tool results, so that the next tool result joins
# them; removed before to_anthropic returns.
_TOOL_RUN: Final = "__tool_run__"


# ---------------------------------------------------------------------------------------------
# OpenAI shape -> Anthropic


def to_anthropic(
    messages: Sequence[Mapping[str, Any]], *, keep_meta: bool = True
) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system, messages)`` for the Anthropic Messages API from our messages.

    System messages anywhere in the history join the ``system`` string, as Anthropic has no
    system role. Consecutive tool results become one user message.
    """
    system = [_text(m.get("content")) for m in messages if is_system(m)]
    converted: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if is_system(message):
            continue
        if role == "tool":
            _append_tool_result(converted, message, keep_meta)
            continue
        converted.append(_convert(message, keep_meta))
    for item in converted:
        item.pop(_TOOL_RUN, None)
    return ("\n\n".join(system) if system else None), converted


def _convert(message: Mapping[str, Any], keep_meta: bool) -> dict[str, Any]:
    content = _blocks(message.get("content"), keep_meta)
    calls = message.get("tool_calls") or []
    if calls:
        blocks = [] if content is None else _as_list(content)
        content = blocks + [_tool_use(call, keep_meta) for call in calls]
    result: dict[str, Any] = {"role": message.get("role"), "content": content}
    return _carry(result, message, keep_meta)


def _append_tool_result(
    converted: list[dict[str, Any]], message: Mapping[str, Any], keep_meta: bool
) -> None:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": message.get("tool_call_id"),
        "content": _blocks(message.get("content"), keep_meta),
    }
    meta = message.get("meta")
    if isinstance(meta, Mapping) and meta.get("is_error"):
        block["is_error"] = True
    block = _carry(block, message, keep_meta)
    last = converted[-1] if converted else None
    if last is not None and last.get(_TOOL_RUN):
        last["content"].append(block)
    else:
        converted.append({"role": "user", "content": [block], _TOOL_RUN: True})


def _carry(target: dict[str, Any], source: Mapping[str, Any], keep_meta: bool) -> dict[str, Any]:
    extra = {k: v for k, v in source.items() if k not in _STRUCTURAL}
    if keep_meta and extra:
        target[CARRY_KEY] = extra
    return target


def _tool_use(call: Mapping[str, Any], keep_meta: bool) -> dict[str, Any]:
    function = call.get("function") or {}
    raw = function.get("arguments") or ""
    parsed = parse_object(raw)
    block: dict[str, Any] = {
        "type": "tool_use",
        "id": call.get("id"),
        "name": function.get("name"),
        "input": {} if parsed is None else parsed,
    }
    # Keep the exact argument text when re-serializing would not reproduce it.
    if keep_meta and (parsed is None or json.dumps(parsed, ensure_ascii=False) != raw):
        block[CARRY_KEY] = {"arguments": raw}
    return block


def _blocks(content: Any, keep_meta: bool) -> Any:
    return map_parts(content, partial(_block, keep_meta=keep_meta))


def _block(part: Any, keep_meta: bool) -> Any:
    if not isinstance(part, Mapping):
        return part
    if part.get("type") == "image_url":
        return _image_block(part, keep_meta)
    return dict(part)


def _image_block(part: Mapping[str, Any], keep_meta: bool) -> dict[str, Any]:
    image = part.get("image_url") or {}
    url = image.get("url", "") if isinstance(image, Mapping) else str(image)
    block: dict[str, Any]
    if url.startswith("data:") and ";base64," in url:
        header, data = url[5:].split(";base64,", 1)
        block = {"type": "image", "source": {"type": "base64", "media_type": header, "data": data}}
    else:
        block = {"type": "image", "source": {"type": "url", "url": url}}
    if keep_meta and isinstance(image, Mapping) and "detail" in image:
        block[CARRY_KEY] = {"detail": image["detail"]}
    return block


def _as_list(content: Any) -> list[Any]:
    if isinstance(content, list):
        return list(content)
    if content == "":
        return []  # Anthropic rejects empty text blocks
    return [{"type": "text", "text": content}]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text"
        )
    return ""


# ---------------------------------------------------------------------------------------------
# Anthropic -> OpenAI shape


def from_anthropic(
    system: str | Iterable[Mapping[str, Any]] | None, messages: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Our messages from an Anthropic ``system`` (string or text blocks) and ``messages``."""
    result: list[dict[str, Any]] = []
    system_text = system if isinstance(system, str) or system is None else _text(list(system))
    if system_text:
        result.append({"role": "system", "content": system_text})
    for message in messages:
        if message.get("role") == "assistant":
            result.append(_assistant_from(message))
        else:
            result.extend(_user_from(message))
    return result


def _restore(target: dict[str, Any], source: Mapping[str, Any]) -> dict[str, Any]:
    carried = source.get(CARRY_KEY)
    if isinstance(carried, Mapping):
        target.update(carried)
    return target


def _assistant_from(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    result: dict[str, Any] = {"role": "assistant"}
    if not isinstance(content, list):
        result["content"] = content
        return _restore(result, message)
    calls = [_tool_call_from(b) for b in content if _type(b) == "tool_use"]
    thinking = [b.get("thinking", "") for b in content if _type(b) == "thinking"]
    others = [_part_from(b) for b in content if _type(b) not in {"tool_use", "thinking"}]
    others = [p for p in others if _type(p) != "redacted_thinking"]
    result["content"] = _assistant_content(others) if calls else others
    if calls:
        result["tool_calls"] = calls
    if thinking:
        result["reasoning_content"] = "\n".join(thinking)
    return _restore(result, message)


def _assistant_content(parts: list[Any]) -> Any:
    # Next to tool calls, OpenAI style is a plain string (or null) rather than a part list.
    if not parts:
        return None
    if len(parts) == 1 and _type(parts[0]) == "text":
        return parts[0].get("text", "")
    return parts


def _tool_call_from(block: Mapping[str, Any]) -> dict[str, Any]:
    carried = block.get(CARRY_KEY)
    if isinstance(carried, Mapping) and "arguments" in carried:
        arguments = carried["arguments"]
    else:
        arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
    return {
        "id": block.get("id"),
        "type": "function",
        "function": {"name": block.get("name"), "arguments": arguments},
    }


def _user_from(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return [_restore({"role": "user", "content": content}, message)]
    results = [b for b in content if _type(b) == "tool_result"]
    rest = [_part_from(b) for b in content if _type(b) != "tool_result"]
    converted = [_tool_message_from(b) for b in results]
    if rest or not results:
        converted.append(_restore({"role": "user", "content": rest}, message))
    return converted


def _tool_message_from(block: Mapping[str, Any]) -> dict[str, Any]:
    content = block.get("content")
    message: dict[str, Any] = {
        "role": "tool",
        "tool_call_id": block.get("tool_use_id"),
        "content": map_parts(content, _part_from),
    }
    restored = _restore(message, block)
    if block.get("is_error") and CARRY_KEY not in block:
        restored["meta"] = {**restored.get("meta", {}), "is_error": True}
    return restored


def _part_from(block: Any) -> Any:
    if not isinstance(block, Mapping):
        return block
    if block.get("type") != "image":
        return {k: v for k, v in block.items() if k != CARRY_KEY}
    source = block.get("source") or {}
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type')};base64,{source.get('data')}"
    else:
        url = source.get("url", "")
    image: dict[str, Any] = {"url": url}
    carried = block.get(CARRY_KEY)
    if isinstance(carried, Mapping) and "detail" in carried:
        image["detail"] = carried["detail"]
    return {"type": "image_url", "image_url": image}


def _type(block: Any) -> Any:
    return block.get("type") if isinstance(block, Mapping) else None


# ---------------------------------------------------------------------------------------------


def strip_carry(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic messages without our carried data, ready to send."""
    return [_strip(m) for m in messages]


def _strip(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip(v) for k, v in value.items() if k not in (CARRY_KEY, _TOOL_RUN)}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
