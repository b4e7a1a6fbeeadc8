"""How a LangGraph item lives in a synopsis store, and how LangGraph filters read it (pure).

A LangGraph value is a JSON object; a synopsis memory is a text with a kind and string tags.
An item put through :class:`~synopsis.adapters.langgraph.SynopsisStore` is stored as:

- ``text``: what keyword (and vector) search reads: the string and number leaves of the value,
  one per line (``index=[paths]`` picks the fields, in LangGraph's path syntax; ``index=False``
  stores no text, so no query finds the item, while listings and filters still do);
- tag :data:`VALUE_TAG`: the value as JSON, which :func:`value_of` reads back exactly;
- one tag per top-level string field (``{"color": "red"}`` -> tag ``color=red``), so an exact
  string filter runs in the store, before paging, instead of after it.

A memory written by synopsis itself (a session summary, say) has no :data:`VALUE_TAG`; LangGraph
sees it as ``{**tags, "text": text, "kind": kind}``. Field names ``text`` and ``kind`` are
therefore never pushed down as tags: for such a memory they come from its text and kind.
Every filter is also checked on the decoded value, with LangGraph's semantics (exact match,
nested objects, ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from synopsis.errors import InvalidInput

__all__ = [
    "VALUE_TAG",
    "encode_value",
    "literal_prefix",
    "matches",
    "namespace_matches",
    "split_filter",
    "value_of",
]

#: The tag holding the LangGraph value as JSON.
VALUE_TAG: Final = "langgraph:value"
#: Field names a synopsis-written memory fills from its own columns, never from tags.
_COLUMNS: Final = frozenset({"text", "kind"})
_WHOLE: Final = "$"
_NUMERIC: Final[dict[str, Callable[[float, float], bool]]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


# --- writing ---------------------------------------------------------------------------------


def encode_value(
    value: Mapping[str, Any], index: Sequence[str] | bool | None, fields: Sequence[str] | None
) -> tuple[str, dict[str, str]]:
    """The text and tags that store ``value``; ``index`` is the op's, ``fields`` the default."""
    if not isinstance(value, Mapping):
        raise InvalidInput(f"a LangGraph value must be a mapping, got {type(value).__name__}")
    try:
        document = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"a LangGraph value must be JSON-serializable: {exc}") from exc
    tags = {name: text for name, text in value.items() if _pushable(name, text)}
    tags[VALUE_TAG] = document
    return _indexed_text(value, index, fields), tags


def _indexed_text(
    value: Mapping[str, Any], index: Sequence[str] | bool | None, fields: Sequence[str] | None
) -> str:
    if index is False:
        return ""
    paths = fields if index is None or index is True else index
    pieces = []
    for path in paths or (_WHOLE,):
        pieces += _leaves(value) if path == _WHOLE else _at_path(value, path)
    # NUL has no place in a store's text; the value itself keeps it (JSON escapes it).
    return "\n".join(pieces).replace("\x00", " ")


def _at_path(value: Mapping[str, Any], path: str) -> list[str]:
    from langgraph.store.base.embed import get_text_at_path

    return get_text_at_path(dict(value), path)


def _leaves(value: Any) -> list[str]:
    """Every string and number in ``value``, depth first (what the whole value says)."""
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int | float):
        return [str(value)]
    if isinstance(value, Mapping):
        return [text for item in value.values() for text in _leaves(item)]
    if isinstance(value, list | tuple):
        return [text for item in value for text in _leaves(item)]
    return []


def _pushable(name: object, text: object) -> bool:
    """Whether field ``name`` with value ``text`` is mirrored as a tag (and so filtered there)."""
    return (
        isinstance(name, str)
        and name not in _COLUMNS
        and name != VALUE_TAG
        and _storable(name)
        and isinstance(text, str)
        and (_storable(text) or text == "")
    )


def _storable(text: str) -> bool:
    if not text or "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# --- reading ---------------------------------------------------------------------------------


def value_of(text: str, kind: str, tags: Mapping[str, str]) -> dict[str, Any]:
    """The LangGraph value of a stored memory (see the module docstring)."""
    document = tags.get(VALUE_TAG)
    if document is not None:
        try:
            value = json.loads(document)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    return {**tags, "text": text, "kind": kind}


# --- filters ---------------------------------------------------------------------------------


def split_filter(
    conditions: Mapping[str, Any] | None,
) -> tuple[dict[str, str], dict[str, Any]]:
    """(exact string matches the store can check as tags, everything else)."""
    pushed: dict[str, str] = {}
    rest: dict[str, Any] = {}
    for name, wanted in (conditions or {}).items():
        target = wanted
        if isinstance(wanted, Mapping) and list(wanted) == ["$eq"]:
            target = wanted["$eq"]
        if _pushable(name, target):
            pushed[name] = target
        else:
            rest[name] = wanted
    return pushed, rest


def matches(value: Mapping[str, Any], conditions: Mapping[str, Any]) -> bool:
    """Whether ``value`` passes a LangGraph filter."""
    return all(_compare(value.get(name), wanted) for name, wanted in conditions.items())


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(name).startswith("$") for name in wanted):
            return all(_apply(actual, name, operand) for name, operand in wanted.items())
        return isinstance(actual, Mapping) and matches(actual, wanted)
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(wanted)
            and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


def _apply(actual: Any, name: str, operand: Any) -> bool:
    if name == "$eq":
        return bool(actual == operand)
    if name == "$ne":
        return bool(actual != operand)
    compare = _NUMERIC.get(name)
    if compare is None:
        raise InvalidInput(f"unsupported filter operator {name!r}")
    try:
        return compare(float(actual), float(operand))
    except (TypeError, ValueError):  # a missing or non-numeric field is not greater than 3
        return False


# --- namespaces ------------------------------------------------------------------------------


def literal_prefix(conditions: Sequence[Any]) -> tuple[str, ...]:
    """The labels every match must start with: the first prefix condition up to a wildcard."""
    for condition in conditions:
        if condition.match_type == "prefix":
            labels = list(condition.path)
            return tuple(labels[: labels.index("*")] if "*" in labels else labels)
    return ()


def namespace_matches(condition: Any, namespace: tuple[str, ...]) -> bool:
    """LangGraph's ``MatchCondition``: a prefix or suffix, ``"*"`` matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise InvalidInput(f"unsupported namespace match type {condition.match_type!r}")
    return all(wanted in ("*", label) for label, wanted in pairs)
