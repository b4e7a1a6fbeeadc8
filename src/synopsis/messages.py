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

__all__ = [
    "CARRY_KEY",
    "EXTENSION_KEYS",
    "INTERNAL_CONTENT_TYPES",
    "ROLES",
    "TEXT_PART_TYPES",
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
    "part_type",
    "safe_cut_points",
    "split_leading_system",
    "strip_extensions",
    "text_of",
    "tool_call_ids",
    "total_tokens_of",
    "unescape_markers",
    "with_meta",
    "without_meta",
]

Role = Literal["system", "developer", "user", "assistant", "tool"]
ROLES: Final = frozenset({"system", "developer", "user", "assistant", "tool"})
SYSTEM_ROLES: Final = frozenset({"system", "developer"})
#: Where converters carry what a framework cannot hold, so a round trip loses nothing; on a
#: message and on a content part. Ours, like ``usage`` and ``meta``: never sent to a provider.
CARRY_KEY: Final = "_synopsis"
EXTENSION_KEYS: Final = frozenset({"usage", "meta", CARRY_KEY})
#: Marker kinds (and legacy ``meta.content_type`` values) of injected, internal messages.
INTERNAL_CONTENT_TYPES: Final = frozenset(
    {"summary", "skills", "notice", "reminder", "internal", "memory", "recall"}
)
#: Content part types that carry text.
TEXT_PART_TYPES: Final = frozenset({"text", "input_text", "output_text", "refusal"})
_MEDIA_PART_TYPES: Final = frozenset(
    {"image_url", "input_image", "image", "input_audio", "audio", "file", "input_file", "video"}
)


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
            if isinstance(part, Mapping) and part_type(part) in TEXT_PART_TYPES
        ]
        return "\n".join(t for t in texts if isinstance(t, str) and t)
    return ""


def media_parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The non-text parts (images, audio, files) of a message's content."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [p for p in content if isinstance(p, Mapping) and part_type(p) in _MEDIA_PART_TYPES]


def part_type(part: Mapping[str, Any]) -> str | None:
    """A part's ``type`` when it is a string: callers count tokens before validation, and a
    list or dict there (unhashable) must not crash a set lookup."""
    kind = part.get("type")
    return kind if isinstance(kind, str) else None


def content_type(message: Mapping[str, Any]) -> str | None:
    """The kind of an injected message (``"summary"``, ``"skills"``, ...), read from its text."""
    marker = marker_of(message)
    return marker.kind if marker is not None else None


def is_system(message: Mapping[str, Any]) -> bool:
    role = message.get("role")
    return isinstance(role, str) and role in SYSTEM_ROLES


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
    """The message as a provider may see it: without ``usage``, ``meta`` and carried data."""
    result = {k: v for k, v in message.items() if k not in EXTENSION_KEYS}
    content = result.get("content")
    if isinstance(content, list) and any(_carries(part) for part in content):
        result["content"] = [
            {k: v for k, v in part.items() if k != CARRY_KEY} if _carries(part) else part
            for part in content
        ]
    return result


def _carries(part: object) -> bool:
    return isinstance(part, Mapping) and CARRY_KEY in part


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
