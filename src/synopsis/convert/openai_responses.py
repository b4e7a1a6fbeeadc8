"""Conversion between our chat messages and OpenAI Responses API input items.

These are the items the OpenAI Agents SDK keeps in its sessions and returns from
``RunResult.to_input_list()`` (``TResponseInputItem``: plain dicts). Mapping:

- easy messages ``{"role", "content"}`` and ``{"type": "message"}`` input messages <-> user,
  system and developer messages; ``input_text`` parts <-> ``text`` parts, ``input_image`` <->
  ``image_url``, ``input_file`` <-> ``file``;
- an assistant turn, a run of items (an optional ``reasoning`` item, an assistant ``message``
  with ``output_text`` parts, ``function_call`` items) <-> one assistant message: text
  ``content`` (an output message holding one text becomes a string), the reasoning summary as
  ``reasoning_content``, one tool call per ``function_call`` (``call_id`` is the call id);
- ``function_call_output`` <-> a tool message (``call_id`` <-> ``tool_call_id``).

Our assistant messages become easy messages (the API needs ids for output messages and
reasoning items, which only carried data can supply). Other items (web search, computer use,
MCP, ...) have no chat equivalent: by default they are dropped, with ``keep_extras=True`` they
ride with the neighbouring message. Without ``keep_extras`` the items hold only fields the API
accepts; with it, :func:`to_responses_items` keeps our extensions under ``CARRY_KEY`` on the first
item of each message (remove it before sending) and :func:`from_responses_items` carries item
ids, statuses, annotations and the like on our messages. Pure, no SDK import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Final

from synopsis.convert._carry import (
    CARRY_KEY,
    Fields,
    carried,
    diff,
    group_fields,
    restore,
    ungroup_fields,
    with_carried,
    without,
)
from synopsis.convert._parts import is_text_part, map_parts
from synopsis.errors import InvalidMessage

__all__ = ["from_responses_items", "group_items", "to_responses_items"]

_FRAMEWORK: Final = "responses"
_ASSISTANT_KINDS: Final = frozenset({"reasoning", "function_call", "assistant"})
_TEXT_TYPES: Final = frozenset({"input_text", "output_text", "text"})


def from_responses_items(
    items: Sequence[Mapping[str, Any]], *, keep_extras: bool = False
) -> list[dict[str, Any]]:
    """Our messages for Responses input items; a turn's items become one assistant message."""
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidMessage(
                f"expected a Responses item (a dict), got {type(item).__name__}", index=index
            )
    messages = []
    for group in _groups(items):
        message = _from_group(group, keep_extras)
        if message is not None:
            messages.append(message)
    return messages


def group_items(items: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """``items`` in the runs :func:`from_responses_items` makes one message each of (a run of
    items with no chat equivalent makes none); the runs, joined, are ``items`` in order."""
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidMessage(
                f"expected a Responses item (a dict), got {type(item).__name__}", index=index
            )
    return _groups(items)


def to_responses_items(
    messages: Sequence[Mapping[str, Any]], *, keep_extras: bool = False
) -> list[dict[str, Any]]:
    """Responses input items for our messages; tool calls become ``function_call`` items."""
    items: list[dict[str, Any]] = []
    previous = None
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in {"system", "developer", "user", "assistant", "tool"}:
            raise InvalidMessage(f"cannot convert role {role!r} to Responses items", index=index)
        # Two assistant messages in a row would read back as one; carried data marks the seam.
        seam = keep_extras and role == previous == "assistant"
        items.extend(_to_group(message, keep_extras, seam=seam))
        previous = role
    return items


def _from_group(group: list[Mapping[str, Any]], keep_extras: bool) -> dict[str, Any] | None:
    clean = [without(item, CARRY_KEY) for item in group]
    base = _std_from(clean)
    if base is None:
        return None
    ours = next((item[CARRY_KEY] for item in group if CARRY_KEY in item), None)
    message = restore(base, ours, lambda m: _std_from(_std_to(m)))
    if keep_extras:
        rebuilt = group_fields(_std_to(message), _kind)
        with_carried(message, _FRAMEWORK, diff(group_fields(clean, _kind), rebuilt, sealed=True))
    return message


def _to_group(message: Mapping[str, Any], keep_extras: bool, *, seam: bool) -> list[dict[str, Any]]:
    own = without(message, CARRY_KEY)
    base = group_fields(_std_to(own), _kind)
    fields = restore(base, carried(message, _FRAMEWORK), _fields_round_trip)
    items = ungroup_fields(fields)
    extras = diff(own, _std_from(_std_to(own)) or {}) if keep_extras else {}
    if (extras or seam) and items:
        items[0] = {**items[0], CARRY_KEY: extras}
    return items


def _fields_round_trip(fields: Fields) -> Fields:
    message = _std_from(ungroup_fields(fields))
    return group_fields(_std_to(message) if message else [], _kind)


# ---------------------------------------------------------------------------------------------
# Grouping items into messages


def _kind(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if kind in (None, "message"):
        return "assistant" if item.get("role") == "assistant" else "message"
    return str(kind)


def _groups(items: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Items split into the runs that make one message each; other items join a neighbour."""
    groups: list[list[Mapping[str, Any]]] = []
    waiting: list[Mapping[str, Any]] = []
    for item in items:
        kind = _kind(item)
        last = groups[-1] if groups else None
        if (
            kind in _ASSISTANT_KINDS
            and last is not None
            and _joins(last, kind)
            and CARRY_KEY not in item
        ):
            last.append(item)
        elif kind in _ASSISTANT_KINDS or kind in {"message", "function_call_output"}:
            groups.append([*waiting, item])
            waiting = []
        elif last is not None and _is_assistant(last):
            last.append(item)
        else:
            waiting.append(item)
    if waiting:
        if groups:
            groups[-1].extend(waiting)
        else:
            groups.append(waiting)
    return groups


def _is_assistant(group: list[Mapping[str, Any]]) -> bool:
    return any(_kind(item) in _ASSISTANT_KINDS for item in group)


def _joins(group: list[Mapping[str, Any]], kind: str) -> bool:
    kinds = {_kind(item) for item in group}
    if not kinds & _ASSISTANT_KINDS:
        return False
    if kind == "function_call":
        return True
    return kind == "assistant" and not kinds & {"assistant", "function_call"}


# ---------------------------------------------------------------------------------------------
# The standard mapping


def _std_from(group: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    kinds = [_kind(item) for item in group]
    if any(kind in _ASSISTANT_KINDS for kind in kinds):
        return _assistant_from(group)
    for item in group:
        if _kind(item) == "message":
            return {"role": item.get("role", "user"), "content": _content_from(item)}
        if _kind(item) == "function_call_output":
            return _tool_from(item)
    return None


def _assistant_from(group: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    calls = []
    for item in group:
        kind = _kind(item)
        if kind == "assistant":
            message["content"] = _content_from(item)
        elif kind == "reasoning":
            reasoning = _reasoning_text(item)
            if reasoning:
                message["reasoning_content"] = reasoning
        elif kind == "function_call":
            calls.append(
                {
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")},
                }
            )
    if calls:
        message["tool_calls"] = calls
    return message


def _reasoning_text(item: Mapping[str, Any]) -> str:
    pieces = item.get("summary") or item.get("content") or []
    texts = [p.get("text") for p in pieces if isinstance(p, Mapping)]
    return "\n\n".join(t for t in texts if isinstance(t, str))


def _tool_from(item: Mapping[str, Any]) -> dict[str, Any]:
    output = item.get("output")
    message: dict[str, Any] = {
        "role": "tool",
        "tool_call_id": item.get("call_id"),
        "content": map_parts(output, _part_from),
    }
    if item.get("name") is not None:
        message["name"] = item["name"]
    return message


def _content_from(item: Mapping[str, Any]) -> Any:
    content = item.get("content")
    if not isinstance(content, list):
        return content
    parts = [_part_from(p) for p in content]
    # A model's output message (it has an id) holding one text reads best as a plain string.
    if "id" in item and len(parts) == 1 and is_text_part(parts[0]):
        return parts[0]["text"]
    return parts


def _part_from(part: Any) -> Any:
    if not isinstance(part, Mapping):
        return part
    kind = part.get("type")
    if kind in _TEXT_TYPES and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        image = {"url": part["image_url"]}
        if part.get("detail") not in (None, "auto"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "input_file" and ("file_data" in part or "file_id" in part):
        keys = ("file_data", "file_id", "filename")
        return {"type": "file", "file": {k: part[k] for k in keys if part.get(k) is not None}}
    return dict(part)


def _std_to(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    role = message.get("role")
    if role == "tool":
        content = message.get("content")
        item: dict[str, Any] = {
            "type": "function_call_output",
            "call_id": message.get("tool_call_id"),
            "output": _parts_to(content, "input_text") if content is not None else "",
        }
        if message.get("name") is not None:
            item["name"] = message["name"]
        return [item]
    if role != "assistant":
        return [{"role": role, "content": _parts_to(message.get("content"), "input_text")}]
    calls = message.get("tool_calls") or []
    content = message.get("content")
    items = []
    if not calls or content not in (None, ""):
        items.append({"role": "assistant", "content": _parts_to(content or "", "output_text")})
    items.extend(_function_call(call) for call in calls)
    return items


def _function_call(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    return {
        "type": "function_call",
        "call_id": call.get("id"),
        "name": function.get("name"),
        "arguments": function.get("arguments"),
    }


def _parts_to(content: Any, text_type: str) -> Any:
    return map_parts(content, partial(_part_to, text_type=text_type))


def _part_to(part: Any, text_type: str) -> Any:
    if not isinstance(part, Mapping):
        return part
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        text: dict[str, Any] = {"type": text_type, "text": part["text"]}
        if text_type == "output_text":
            text["annotations"] = []
        return text
    image = part.get("image_url")
    if kind == "image_url" and isinstance(image, Mapping) and isinstance(image.get("url"), str):
        return {
            "type": "input_image",
            "image_url": image["url"],
            "detail": image.get("detail", "auto"),
        }
    if kind == "file" and isinstance(part.get("file"), Mapping):
        return {"type": "input_file", **part["file"]}
    return dict(part)
