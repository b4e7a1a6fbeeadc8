"""Chat messages in the OpenAI chat-completions shape, validated, plus pure helpers.

A message is a plain ``dict``: ``role`` (system, developer, user, assistant, tool), ``content``
(a string, ``None`` or a list of parts), ``tool_calls``, ``tool_call_id``, ``name``. One
extension key is read on input: ``usage`` on assistant messages (what the provider reported
for the call that produced it).

A message synopsis injects (a summary, preserved skills, a truncation notice, recalled notes)
says so in its text, where every framework and wire format keeps it::

    <synopsis:summary version="2" tokens_after="5210">
    ...the body...
    </synopsis:summary>

User words quoted inside a body have any marker text escaped (:func:`escape_markers`), so they
can never open or close one. Histories saved by older versions marked such messages with a
``meta`` key instead; it is still read (:func:`marker_of`) but never produced.

Messages stay dicts on purpose: agents already hold them in this shape, and converting every
message of a 10,000-message history on every model call would cost more than the decision
whether to compact at all. Everything here is pure: no I/O, no clock.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal, NotRequired, TypedDict

from synopsis._markers import (
    Marker,
    closing_tag,
    escape_markers,
    is_marker_name,
    mark,
    marked_elements,
    opening_tag,
    parse_marked,
    unescape_markers,
)
from synopsis.errors import InvalidMessage

__all__ = [
    "EXTENSION_KEYS",
    "INTERNAL_CONTENT_TYPES",
    "MAX_NESTING",
    "ROLES",
    "Marker",
    "Message",
    "ToolCall",
    "content_type",
    "escape_markers",
    "is_internal",
    "is_real_user_message",
    "is_system",
    "mark",
    "marked_body",
    "marked_elements",
    "marker_of",
    "media_parts",
    "normalize_message",
    "open_tool_calls",
    "safe_cut_points",
    "split_leading_system",
    "strip_extensions",
    "text_of",
    "tool_call_ids",
    "total_tokens_of",
    "unescape_markers",
    "validate_messages",
    "with_meta",
    "without_meta",
]

Role = Literal["system", "developer", "user", "assistant", "tool"]
ROLES: Final = frozenset({"system", "developer", "user", "assistant", "tool"})
SYSTEM_ROLES: Final = frozenset({"system", "developer"})
EXTENSION_KEYS: Final = frozenset({"usage", "meta"})
#: Marker kinds (and legacy ``meta.content_type`` values) of injected, internal messages.
INTERNAL_CONTENT_TYPES: Final = frozenset(
    {"summary", "skills", "notice", "reminder", "internal", "memory"}
)
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
_TEXT_PART_TYPES: Final = frozenset({"text", "input_text", "output_text", "refusal"})
_MEDIA_PART_TYPES: Final = frozenset(
    {"image_url", "input_image", "image", "input_audio", "audio", "file", "input_file", "video"}
)
#: The deepest nesting of objects and lists accepted inside a message. Real messages nest a
#: few levels; the bound keeps later recursive steps (deep copies, JSON encoding) well below
#: Python's recursion limit.
MAX_NESTING: Final = 100
# An integer of at most this many bits always converts to text (Python refuses beyond 4,300
# digits by default, and never allows a limit below 640 digits, about 2,126 bits).
_SAFE_INT_BITS: Final = 2_000
_FIELD_CHARS: Final = 80


class FunctionCall(TypedDict):
    name: str
    arguments: str


class ToolCall(TypedDict):
    id: str
    type: str
    function: FunctionCall


class Message(TypedDict, total=False):
    """Typing aid for the OpenAI message shape; at run time messages are plain dicts."""

    role: Role
    content: str | list[dict[str, Any]] | None
    tool_calls: list[ToolCall]
    tool_call_id: str
    name: str
    usage: dict[str, int]
    meta: dict[str, Any]
    reasoning_content: NotRequired[str]


# ---------------------------------------------------------------------------------------------
# Reading messages


def text_of(message: Mapping[str, Any]) -> str:
    """The text of a message: its string content, or its text parts joined by newlines."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part.get("text", "")
            for part in content
            if isinstance(part, Mapping) and part.get("type") in _TEXT_PART_TYPES
        ]
        return "\n".join(t for t in texts if isinstance(t, str) and t)
    return ""


def media_parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The non-text parts (images, audio, files) of a message's content."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [p for p in content if isinstance(p, Mapping) and p.get("type") in _MEDIA_PART_TYPES]


def content_type(message: Mapping[str, Any]) -> str | None:
    """The kind of an injected message (``"summary"``, ``"skills"``, ...), read from its text."""
    marker = marker_of(message)
    return marker.kind if marker is not None else None


def is_system(message: Mapping[str, Any]) -> bool:
    return message.get("role") in SYSTEM_ROLES


def is_internal(message: Mapping[str, Any]) -> bool:
    """True for messages injected by synopsis or other middleware, not typed by a person.

    Summaries, preserved skills, notices and recalled notes carry a marker in their text. A
    legacy ``meta`` marker counts too (its ``content_type`` one of
    :data:`INTERNAL_CONTENT_TYPES`, or ``meta.internal = True``).
    """
    return _text_marker(message) is not None or _legacy_marker(message) is not None


def is_real_user_message(message: Mapping[str, Any]) -> bool:
    """A user-role message that a person wrote: not a tool result, not internal."""
    return message.get("role") == "user" and not is_internal(message)


def total_tokens_of(message: Mapping[str, Any]) -> int:
    """``usage.total_tokens`` of an assistant message, or 0 when it has none."""
    if message.get("role") != "assistant":
        return 0
    usage = message.get("usage")
    if not isinstance(usage, Mapping):
        return 0
    total = usage.get("total_tokens")
    if isinstance(total, int) and not isinstance(total, bool) and total > 0:
        return total
    return 0


def tool_call_ids(message: Mapping[str, Any]) -> list[str]:
    """The ids of the tool calls an assistant message makes."""
    calls = message.get("tool_calls") or []
    return [c["id"] for c in calls if isinstance(c, Mapping) and isinstance(c.get("id"), str)]


# ---------------------------------------------------------------------------------------------
# Markers (the grammar is in synopsis._markers)


def _text_marker(message: Mapping[str, Any]) -> tuple[Marker, str] | None:
    content = message.get("content")
    return parse_marked(text_of(message)) if isinstance(content, str | list) else None


def _legacy_marker(message: Mapping[str, Any]) -> Marker | None:
    """The ``meta`` marker of a message saved by an older version, if it marks one internal."""
    meta = message.get("meta")
    if not isinstance(meta, Mapping):
        return None
    kind = meta.get("content_type")
    if kind not in INTERNAL_CONTENT_TYPES:
        kind = "internal" if meta.get("internal") is True else None
    if kind is None:
        return None
    return Marker(kind, {n: str(v) for n, v in meta.items() if _is_legacy_attribute(n, v)})


def _is_legacy_attribute(name: object, value: object) -> bool:
    scalar = isinstance(value, str | int) and not isinstance(value, bool)
    return scalar and isinstance(name, str) and name != "content_type" and is_marker_name(name)


def marker_of(message: Mapping[str, Any]) -> Marker | None:
    """The marker of an injected message: from its text, or from a legacy ``meta`` key."""
    found = _text_marker(message)
    return found[0] if found is not None else _legacy_marker(message)


def marked_body(message: Mapping[str, Any], *, unescape: bool = True) -> str:
    """The text inside a message's marker (unescaped unless asked); the text if unmarked."""
    found = _text_marker(message)
    if found is None:
        return text_of(message)
    return unescape_markers(found[1]) if unescape else found[1]


# ---------------------------------------------------------------------------------------------
# Structure


def split_leading_system(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """Split into the leading run of system messages and everything after it."""
    index = 0
    while index < len(messages) and is_system(messages[index]):
        index += 1
    return list(messages[:index]), list(messages[index:])


def open_tool_calls(messages: Iterable[Mapping[str, Any]]) -> set[str]:
    """Ids of tool calls made in ``messages`` whose results are not (yet) among them."""
    pending: set[str] = set()
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            pending.update(tool_call_ids(message))
        elif role == "tool":
            pending.discard(str(message.get("tool_call_id")))
    return pending


def safe_cut_points(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices ``i`` where ``messages[:i]`` / ``messages[i:]`` separates no tool call from a result.

    ``0`` and ``len(messages)`` are always included. A cut is safe when no tool call made
    before it still waits for a result, so the tail never starts with an orphaned tool result
    and the head never ends with a call whose result was kept.
    """
    points = [0]
    pending: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            pending.update(tool_call_ids(message))
        elif role == "tool":
            pending.discard(str(message.get("tool_call_id")))
        if not pending:
            points.append(index + 1)
    if points[-1] != len(messages):
        points.append(len(messages))
    return sorted(set(points))


# ---------------------------------------------------------------------------------------------
# Building and cleaning


def with_meta(message: Mapping[str, Any], **meta: Any) -> dict[str, Any]:
    """A copy of ``message`` whose ``meta`` has the given keys set.

    Legacy: synopsis no longer produces ``meta`` (see :func:`mark` and :func:`without_meta`).
    """
    result = dict(message)
    merged = dict(message.get("meta") or {})
    merged.update(meta)
    result["meta"] = merged
    return result


def strip_extensions(message: Mapping[str, Any]) -> dict[str, Any]:
    """The message as a provider may see it: without ``usage`` and ``meta``."""
    return {k: v for k, v in message.items() if k not in EXTENSION_KEYS}


def without_meta(message: Mapping[str, Any]) -> dict[str, Any]:
    """``message`` without a legacy ``meta`` key, its internal marker moved into the text."""
    if "meta" not in message:
        return message if isinstance(message, dict) else dict(message)
    result = {k: v for k, v in message.items() if k != "meta"}
    legacy = _legacy_marker(message)
    content = message.get("content")
    if legacy is None or _text_marker(message) is not None:
        return result
    if isinstance(content, str):
        result["content"] = mark(legacy.kind, content, legacy.attributes)
    elif isinstance(content, list):
        result["content"] = [
            {"type": "text", "text": opening_tag(legacy.kind, legacy.attributes)},
            *map(_escaped_part, content),
            {"type": "text", "text": closing_tag(legacy.kind)},
        ]
    return result


def _escaped_part(part: object) -> object:
    if isinstance(part, Mapping) and isinstance(part.get("text"), str):
        return {**part, "text": escape_markers(part["text"])}
    return part


def normalize_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy, so that later edits cannot reach the caller's objects."""
    return copy.deepcopy(dict(message))


# ---------------------------------------------------------------------------------------------
# Validation


def validate_messages(
    messages: object, *, start: int = 0, pending: set[str] | None = None
) -> list[dict[str, Any]]:
    """Check that ``messages`` is a list of well-formed chat messages and return it as a list.

    Raises :class:`~synopsis.errors.InvalidMessage` naming the index and field at fault:
    an unknown role, content of the wrong type, malformed tool calls, a tool result whose
    call is not earlier in the history, bad ``usage`` or ``meta``. Every value, extra keys
    included, must be JSON (objects with string keys, lists, strings, numbers, booleans,
    null) nested at most :data:`MAX_NESTING` levels, and every string and key valid UTF-8
    (no lone surrogates), so whatever is accepted can be archived and written back out.
    ``start`` offsets the reported index and ``pending`` carries open tool-call ids across
    calls, so a growing history can be validated incrementally.
    """
    if not isinstance(messages, list | tuple):
        raise InvalidMessage(
            f"expected a list of messages, got {type(messages).__name__}", index=None
        )
    open_calls = pending if pending is not None else set()
    for offset, message in enumerate(messages):
        _validate_one(message, start + offset, open_calls)
    return list(messages)


def _validate_one(message: object, index: int, open_calls: set[str]) -> None:
    if not isinstance(message, Mapping):
        raise InvalidMessage(f"expected an object, got {type(message).__name__}", index=index)
    role = message.get("role")
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
        _validate_tool_result(message, index, open_calls)
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
        if part["type"] in _TEXT_PART_TYPES:
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


def _validate_tool_result(message: Mapping[str, Any], index: int, open_calls: set[str]) -> None:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessage(
            "a tool result needs a string tool_call_id", index=index, field="tool_call_id"
        )
    if call_id not in open_calls:
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

    Iterative, so no input can exhaust the stack while it is being checked; the first fault
    in document order is reported with its path (``tool_calls[0].function.name``).
    """
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
