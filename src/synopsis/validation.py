"""Validation of chat messages: a clear error naming the message and the field, or a copy.

Checked: roles, content shapes, tool calls and their results (no orphaned result, no unknown
call id), the ``usage`` extension, and every value anywhere in a message (JSON types only,
valid UTF-8, bounded nesting, printable integers), so nothing invalid reaches a summarizer, an
archive or a store. A framework's message object is refused with the name of its converter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from synopsis.errors import InvalidMessage
from synopsis.messages import ROLES, TEXT_PART_TYPES

__all__ = ["MAX_NESTING", "orphan_results", "require_mappings", "validate_messages"]

_KNOWN_KEYS: Final = frozenset(
    {
        "role",
        "content",
        "tool_calls",
        "tool_call_id",
        "name",
        "usage",
        "meta",
        "refusal",
        "reasoning_content",
        "audio",
        "function_call",
    }
)
#: The deepest nesting of objects and lists accepted inside a message. Real messages nest a
#: few levels; the bound keeps later recursive steps (deep copies, JSON encoding) well below
#: Python's recursion limit.
MAX_NESTING: Final = 100
# An integer of at most this many bits always converts to text (Python refuses beyond 4,300
# digits by default, and never allows a limit below 640 digits, about 2,126 bits).
_SAFE_INT_BITS: Final = 2_000
_FIELD_CHARS: Final = 80


def validate_messages(
    messages: object,
    *,
    start: int = 0,
    pending: set[str] | None = None,
    orphans: Literal["raise", "allow"] = "raise",
) -> list[dict[str, Any]]:
    """Check that ``messages`` is a list of well-formed chat messages and return it as a list.

    Raises :class:`~synopsis.errors.InvalidMessage` naming the index and field at fault:
    an unknown role, content of the wrong type, malformed tool calls, a tool result whose
    call is not earlier in the history, bad ``usage`` or ``meta``. Every value, extra keys
    included, must be JSON (objects with string keys, lists, strings, numbers, booleans,
    null) nested at most :data:`MAX_NESTING` levels, and every string and key valid UTF-8
    (no lone surrogates), so whatever is accepted can be archived and written back out.
    ``start`` offsets the reported index and ``pending`` carries open tool-call ids across
    calls, so a growing history can be validated incrementally. ``orphans="allow"`` accepts
    a tool result whose call is missing (everything else about it is still checked): the
    compactors use it, as they heal such a history (:func:`orphan_results` finds them); the
    default reports it.
    """
    if not isinstance(messages, list | tuple):
        raise InvalidMessage(
            f"expected a list of messages, got {type(messages).__name__}", index=None
        )
    open_calls = pending if pending is not None else set()
    strict = orphans == "raise"
    for offset, message in enumerate(messages):
        _validate_one(message, start + offset, open_calls, strict)
    return list(messages)


def orphan_results(messages: Sequence[Mapping[str, Any]]) -> tuple[int, ...]:
    """The indices of tool results whose call is not in an earlier assistant message (or
    was already answered). One pass over well-formed messages; anything else is skipped."""
    open_calls: set[str] = set()
    found: list[int] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            for call in message.get("tool_calls") or ():
                if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                    open_calls.add(call["id"])
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if call_id in open_calls:
                open_calls.discard(call_id)
            else:
                found.append(index)
    return tuple(found)


def require_mappings(messages: Sequence[object]) -> None:
    """Refuse a history holding anything but mappings (e.g. a framework's message objects),
    before any work reads it; the error names the converter to use. O(n) isinstance checks."""
    for index, message in enumerate(messages):
        # A plain dict first: the ABC check costs ten times a type test, per message per call.
        if type(message) is not dict and not isinstance(message, Mapping):
            raise InvalidMessage(_not_a_message(message), index=index)


def _not_a_message(message: object) -> str:
    """Why ``message`` is refused, naming the converter when it is a framework's message."""
    from synopsis.convert import foreign_message_hint  # the converters load on first refusal

    hint = foreign_message_hint(message)
    if hint is not None:
        return f"expected a message dict, got {hint}"
    return f"expected an object, got {type(message).__name__}"


def _validate_one(message: object, index: int, open_calls: set[str], strict: bool) -> None:
    if not isinstance(message, Mapping):
        raise InvalidMessage(_not_a_message(message), index=index)
    role = message.get("role")
    if "role" not in message:
        keys = ", ".join(repr(k)[:40] for k in list(message)[:5]) or "none"
        raise InvalidMessage(
            f"missing the 'role' key (one of {', '.join(sorted(ROLES))}); its keys: {keys}",
            index=index,
            field="role",
        )
    if not isinstance(role, str) or role not in ROLES:
        allowed = ", ".join(sorted(ROLES))
        shown = repr(role) if isinstance(role, str | None) else f"of type {type(role).__name__}"
        raise InvalidMessage(
            f"unknown role {shown} (expected one of {allowed})", index=index, field="role"
        )
    _validate_content(message, index)
    if role == "assistant":
        for call_id in _validate_tool_calls(message.get("tool_calls"), index):
            open_calls.add(call_id)
    elif message.get("tool_calls"):
        raise InvalidMessage(
            f"only assistant messages may have tool_calls, not {role}",
            index=index,
            field="tool_calls",
        )
    if role == "tool":
        _validate_tool_result(message, index, open_calls, strict)
    _validate_extensions(message, index)
    for key in ("name",):
        if key in message and message[key] is not None and not isinstance(message[key], str):
            raise InvalidMessage("must be a string", index=index, field=key)
    _check_values(message, index)


def _check_text(text: str, index: int, field: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidMessage(
            f"text is not valid UTF-8 (unpaired surrogate at position {exc.start})",
            index=index,
            field=field,
        ) from None


def _validate_content(message: Mapping[str, Any], index: int) -> None:
    content = message.get("content")
    if content is None:
        if message.get("role") in {"user", "system", "developer"}:
            raise InvalidMessage("content is required for this role", index=index, field="content")
        return
    if isinstance(content, str):
        _check_text(content, index, "content")
        return
    if not isinstance(content, list):
        raise InvalidMessage(
            f"content must be a string, null or a list of parts, got {type(content).__name__}",
            index=index,
            field="content",
        )
    for position, part in enumerate(content):
        field = f"content[{position}]"
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise InvalidMessage(
                "each content part must be an object with a string 'type'", index=index, field=field
            )
        if part["type"] in TEXT_PART_TYPES:
            text = part.get("text", part.get("refusal"))
            if not isinstance(text, str):
                raise InvalidMessage("a text part needs a string 'text'", index=index, field=field)
            _check_text(text, index, field)


def _validate_tool_calls(calls: object, index: int) -> list[str]:
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise InvalidMessage("tool_calls must be a list", index=index, field="tool_calls")
    ids: list[str] = []
    for position, call in enumerate(calls):
        field = f"tool_calls[{position}]"
        if not isinstance(call, Mapping):
            raise InvalidMessage("a tool call must be an object", index=index, field=field)
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessage(
                "a tool call needs a non-empty string 'id'", index=index, field=f"{field}.id"
            )
        function = call.get("function")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise InvalidMessage(
                "a tool call needs function.name (a string)", index=index, field=f"{field}.function"
            )
        if not isinstance(function.get("arguments", ""), str):
            raise InvalidMessage(
                "function.arguments must be a JSON string",
                index=index,
                field=f"{field}.function.arguments",
            )
        ids.append(call_id)
    return ids


def _validate_tool_result(
    message: Mapping[str, Any], index: int, open_calls: set[str], strict: bool
) -> None:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessage(
            "a tool result needs a string tool_call_id", index=index, field="tool_call_id"
        )
    if call_id not in open_calls and strict:
        raise InvalidMessage(
            f"tool result for {call_id!r} has no matching assistant tool call before it",
            index=index,
            field="tool_call_id",
        )
    open_calls.discard(call_id)


def _validate_extensions(message: Mapping[str, Any], index: int) -> None:
    usage = message.get("usage")
    if usage is not None:
        if not isinstance(usage, Mapping):
            raise InvalidMessage("usage must be an object", index=index, field="usage")
        for key, value in usage.items():
            if (
                isinstance(key, str)
                and key.endswith("_tokens")
                and (not isinstance(value, int) or isinstance(value, bool) or value < 0)
            ):
                raise InvalidMessage(
                    "token counts must be non-negative integers", index=index, field=f"usage.{key}"
                )
    meta = message.get("meta")
    if meta is not None and not isinstance(meta, Mapping):
        raise InvalidMessage("meta must be an object", index=index, field="meta")


def _check_values(message: Mapping[str, Any], index: int) -> None:
    """Every value in ``message`` is JSON with valid UTF-8 text, nested at most MAX_NESTING deep.

    A walk that builds no paths says whether there is a fault; only then does the walk that
    names it run, so a valid message costs one visit per value.
    """
    if not _faulty(message):
        return
    _locate_fault(message, index)


def _faulty(message: Mapping[str, Any]) -> bool:
    """Whether some value of ``message`` is not JSON, not valid UTF-8 or nested too deep.
    Iterative, so no input can exhaust the stack. Exact types only: anything else (a
    subclass too) is left to the exact walk."""
    stack: list[tuple[Any, int]] = [(message, 0)]
    while stack:
        value, depth = stack.pop()
        kind = type(value)
        if kind is str:
            if not _utf8(value):
                return True
        elif kind is dict or kind is list or kind is tuple:
            if depth >= MAX_NESTING or not _push_children(stack, value, depth + 1):
                return True
        elif kind is int:
            if value.bit_length() > _SAFE_INT_BITS:
                return True
        elif kind not in _SCALARS:
            return True
    return False


_SCALARS: Final = frozenset({float, bool, type(None)})


def _push_children(stack: list[tuple[Any, int]], value: Any, depth: int) -> bool:
    """Push a container's items; False when a key is not valid text."""
    if type(value) is not dict:
        stack.extend((item, depth) for item in value)
        return True
    for key, item in value.items():
        if type(key) is not str or not _utf8(key):
            return False
        stack.append((item, depth))
    return True


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _locate_fault(message: Mapping[str, Any], index: int) -> None:
    """The exact walk: raises for the first fault in document order, with its path
    (``tool_calls[0].function.name``); returns when there is none after all."""
    stack: list[tuple[str, object, int]] = []
    _push_items(stack, "", message, 1, index)
    while stack:
        path, value, depth = stack.pop()
        if isinstance(value, str):
            _check_text(value, index, path)
        elif isinstance(value, int):
            _check_integer(value, index, path)
        elif value is None or isinstance(value, float):
            continue
        elif isinstance(value, dict | list | tuple) and depth >= MAX_NESTING:
            raise InvalidMessage(
                f"nested more than {MAX_NESTING} levels deep", index=index, field=_clip(path)
            )
        elif isinstance(value, dict):
            _push_items(stack, path, value, depth + 1, index)
        elif isinstance(value, list | tuple):
            items = [(f"{path}[{i}]", item, depth + 1) for i, item in enumerate(value)]
            stack.extend(reversed(items))
        else:
            raise InvalidMessage(
                f"a value of type {type(value).__name__} is not JSON (use an object, list, "
                "string, number, boolean or null)",
                index=index,
                field=path,
            )


def _push_items(
    stack: list[tuple[str, object, int]],
    path: str,
    mapping: Mapping[Any, Any],
    depth: int,
    index: int,
) -> None:
    items = []
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise InvalidMessage(
                f"object keys must be strings, got {type(key).__name__}",
                index=index,
                field=path or None,
            )
        child = _child_path(path, key)
        _check_text(key, index, child)
        items.append((child, value, depth))
    stack.extend(reversed(items))


def _child_path(path: str, key: str) -> str:
    """``path.key``, or ``path["odd key"]`` (escaped to ASCII) when the key is not a plain name."""
    if key.isascii() and key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def _check_integer(value: int, index: int, field: str) -> None:
    if value.bit_length() <= _SAFE_INT_BITS:
        return
    try:
        str(value)
    except ValueError:
        raise InvalidMessage(
            "integer has too many digits to write as JSON", index=index, field=field
        ) from None


def _clip(path: str) -> str:
    return path if len(path) <= _FIELD_CHARS else path[: _FIELD_CHARS - 3] + "..."
