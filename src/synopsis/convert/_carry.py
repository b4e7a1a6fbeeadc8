"""Carrying what a conversion cannot map, so a round trip through a framework loses nothing.

A framework converter maps each of our messages to a *unit* of the framework (a LangChain
message, a Pydantic AI part or response, a group of Responses items) with a standard mapping.
Both sides are seen as flat ``{field: value}`` dicts. What the standard mapping does not
reproduce is *carried*: :func:`diff` keeps the fields of the original that the rebuilt unit
lacks or holds differently, and :func:`restore` puts them back on the way home.

A carried field is put back only when it does not change what the message says: the restored
unit, converted to the other shape and back, must read the same as the rebuilt unit converted
the same way. So an edit made in between (redacted text, a cleared tool output) always wins
over stale carried data, while fields that do not touch the meaning (message ids, timestamps)
survive the edit. Items that a provider may look up by id (Responses items, Pydantic AI
response parts) are *sealed*: their carried fields come back only when that recreates the
item exactly, never next to edited content. All of this is pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from synopsis.messages import CARRY_KEY

__all__ = [
    "CARRY_KEY",
    "UNSET",
    "carried",
    "diff",
    "group_fields",
    "parse_object",
    "patch",
    "restore",
    "ungroup_fields",
    "with_carried",
    "without",
]

#: Key of a carried delta listing the fields the original did not have.
UNSET: Final = "__unset__"

Fields = dict[str, Any]


def parse_object(raw: Any) -> dict[str, Any] | None:
    """Tool-call arguments as the JSON object their text holds; None when it holds none."""
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def diff(
    original: Mapping[str, Any], rebuilt: Mapping[str, Any], *, sealed: bool = False
) -> Fields:
    """The fields of ``original`` that ``rebuilt`` lacks or holds differently.

    ``sealed`` is for grouped fields (:func:`group_fields`): each changed item also gets a
    digest, and :func:`restore` brings its fields back only if that recreates the item exactly.
    An item id next to edited content would make a provider use its stored copy of the item.
    """
    changed = {k: v for k, v in original.items() if k not in rebuilt or rebuilt[k] != v}
    absent = [k for k in rebuilt if k not in original]
    if sealed:
        for tag in {_tag(k) for k in [*changed, *absent]} - {None}:
            changed[f"{tag}:{_DIGEST}"] = _digest(original, str(tag))
    if absent:
        changed[UNSET] = absent
    return changed


def patch(rebuilt: Mapping[str, Any], delta: Mapping[str, Any]) -> Fields:
    """``rebuilt`` with the fields of a :func:`diff` delta put back."""
    absent = delta.get(UNSET) or ()
    result = {k: v for k, v in rebuilt.items() if k not in absent}
    result.update((k, v) for k, v in delta.items() if k != UNSET and not _is_digest(k))
    return result


def restore(rebuilt: Fields, delta: object, meaning: Callable[[Fields], object]) -> Fields:
    """``rebuilt`` with the carried fields that leave its ``meaning`` unchanged.

    All fields are tried together first, then one by one (a sealed item as a whole), so a
    stale field is left out while the others still come back.
    """
    if not isinstance(delta, Mapping) or not delta:
        return rebuilt
    expected = meaning(rebuilt)
    pieces = _pieces(delta)
    whole = patch(rebuilt, delta)
    if all(_intact(whole, p) for p in pieces) and meaning(whole) == expected:
        return whole
    kept: Fields = {}
    for piece in pieces:
        candidate = patch(rebuilt, piece)
        if _intact(candidate, piece) and meaning(candidate) == expected:
            kept = _merge(kept, piece)
    partial = patch(rebuilt, kept)
    return partial if kept and meaning(partial) == expected else rebuilt


_DIGEST: Final = "#"


def _tag(key: str) -> str | None:
    tag, colon, _ = key.partition(":")
    return tag if colon and "#" in tag else None


def _is_digest(key: str) -> bool:
    return key.endswith(":" + _DIGEST)


def _digest(fields: Mapping[str, Any], tag: str) -> str:
    item = {k: v for k, v in fields.items() if _tag(k) == tag and not _is_digest(k)}
    text = json.dumps(item, sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _pieces(delta: Mapping[str, Any]) -> list[Fields]:
    """Each sealed item's fields together (with its digest), every other field alone."""
    sealed = {str(_tag(k)) for k in delta if _is_digest(k)}
    items: dict[str, Fields] = {
        tag: {f"{tag}:{_DIGEST}": delta[f"{tag}:{_DIGEST}"]} for tag in sealed
    }
    pieces: list[Fields] = []
    for key, value in delta.items():
        if key == UNSET or _is_digest(key):
            continue
        if _tag(key) in sealed:
            items[str(_tag(key))][key] = value
        else:
            pieces.append({key: value})
    for key in delta.get(UNSET) or ():
        if _tag(key) in sealed:
            items[str(_tag(key))].setdefault(UNSET, []).append(key)
        else:
            pieces.append({UNSET: [key]})
    return pieces + list(items.values())


def _sealed_tag(piece: Mapping[str, Any]) -> str | None:
    return next((str(_tag(k)) for k in piece if _is_digest(k)), None)


def _intact(fields: Mapping[str, Any], piece: Mapping[str, Any]) -> bool:
    tag = _sealed_tag(piece)
    return tag is None or _digest(fields, tag) == piece[f"{tag}:{_DIGEST}"]


def _merge(kept: Fields, piece: Fields) -> Fields:
    merged = {**kept, **piece}
    if UNSET in kept and UNSET in piece:
        merged[UNSET] = [*kept[UNSET], *piece[UNSET]]
    return merged


def without(fields: Mapping[str, Any], *keys: str) -> Fields:
    return {k: v for k, v in fields.items() if k not in keys}


# ---------------------------------------------------------------------------------------------
# Our side: the carried delta of each framework lives under CARRY_KEY, one entry per framework.


def carried(message: Mapping[str, Any], framework: str) -> object:
    """The delta ``framework`` left on one of our messages, if any."""
    box = message.get(CARRY_KEY)
    return box.get(framework) if isinstance(box, Mapping) else None


def with_carried(message: Fields, framework: str, delta: Fields) -> Fields:
    """``message`` with ``delta`` carried for ``framework`` (unchanged when the delta is empty)."""
    if delta:
        message[CARRY_KEY] = {framework: delta}
    return message


# ---------------------------------------------------------------------------------------------
# Groups: a list of dicts seen as one flat dict, fields named "<kind>#<n>:<key>" so that a
# missing or extra item shifts nothing; the order of kinds is one more field.


def group_fields(
    items: Sequence[Mapping[str, Any]], kind: Callable[[Mapping[str, Any]], str]
) -> Fields:
    """One flat dict for a list of dicts (see :func:`ungroup_fields`)."""
    fields: Fields = {}
    kinds: list[str] = []
    for item in items:
        name = kind(item)
        tag = f"{name}#{kinds.count(name)}"
        kinds.append(name)
        fields.update((f"{tag}:{key}", value) for key, value in item.items())
    fields["order"] = kinds
    return fields


def ungroup_fields(fields: Mapping[str, Any]) -> list[Fields]:
    """The list of dicts :func:`group_fields` flattened, in the recorded order of kinds."""
    items: dict[str, Fields] = {}
    for name, value in fields.items():
        tag, colon, key = name.partition(":")
        if colon:
            items.setdefault(tag, {})[key] = value
    order = fields.get("order")
    tags: list[str] = []
    kinds: list[str] = []
    for kind in order if isinstance(order, list) else []:
        tags.append(f"{kind}#{kinds.count(kind)}")
        kinds.append(kind)
    ordered = [items.pop(tag) for tag in tags if tag in items]
    return ordered + list(items.values())
