"""Memory kinds: what a kind is, a search's kind filter, and the kinds that are not memories.

A kind is non-empty printable text (no control characters) that every backend can store. A
search may keep only some kinds (``kind="fact"`` or ``kind=("fact", "note")``: any of them) and
leave others out (``exclude_kinds=...``); the two combine, an excluded kind staying excluded
even when ``kind`` names it. A filter names at most :data:`MAX_FILTER_KINDS` kinds.

Some memories are not things to recall: an adapter keeps a framework's session items in the
store (inside the user's namespace, so that ``delete_user`` erases them), raw JSON a prompt
must never receive. Their kinds are :data:`TRANSCRIPT_KINDS`; the adapters that write such
items take their kinds from here, and session recall and ``build_context`` leave them out.
Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from synopsis.errors import InvalidInput
from synopsis.memory._types import has_control

__all__ = [
    "AGENTS_ITEM_KIND",
    "AGENTS_SESSION_KIND",
    "ARCHIVED_MESSAGE_KIND",
    "MAX_FILTER_KINDS",
    "TRANSCRIPT_KINDS",
    "KindFilter",
    "check_kind",
    "check_kind_filter",
]

#: The OpenAI Agents session adapter's kind for one stored session item (its JSON).
AGENTS_ITEM_KIND: Final = "agents_item"
#: The OpenAI Agents session adapter's kind for a session's head (generation, item range).
AGENTS_SESSION_KIND: Final = "agents_session"
#: The kind of a message compaction archived in a memory store
#: (:class:`synopsis.compaction.store_archive.StoreArchive`).
ARCHIVED_MESSAGE_KIND: Final = "archived_message"
#: Kinds of stored transcripts and bookkeeping, not memories: recall leaves them out.
TRANSCRIPT_KINDS: Final[frozenset[str]] = frozenset(
    {AGENTS_ITEM_KIND, AGENTS_SESSION_KIND, ARCHIVED_MESSAGE_KIND}
)
#: The most kinds one filter (``kind`` or ``exclude_kinds``) may name.
MAX_FILTER_KINDS: Final = 64

#: ``(kinds, excluded)``: ``kinds`` None keeps every kind; both sorted, without repeats.
KindFilter = tuple[tuple[str, ...] | None, tuple[str, ...]]


def check_kind(kind: object, what: str = "kind") -> str:
    """``kind`` if it is a usable kind (non-empty printable text), else InvalidInput naming why."""
    if not isinstance(kind, str) or not kind:
        raise InvalidInput(f"{what} must be a non-empty string")
    if has_control(kind):
        raise InvalidInput(
            f"{what} must be printable text (no NUL, newline or other control characters): {kind!r}"
        )
    try:
        kind.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{what} must be valid Unicode text (no lone surrogates)") from exc
    return kind


def _kinds(value: object, name: str) -> tuple[str, ...]:
    """One kind (a string) or a collection of kinds, checked, sorted, without repeats."""
    if isinstance(value, str):
        return (check_kind(value, name),)
    if isinstance(value, bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise InvalidInput(
            f"{name} must be a kind (a string) or a collection of kinds, got {type(value).__name__}"
        )
    kinds: set[str] = set()
    for position, kind in enumerate(value):
        if position == MAX_FILTER_KINDS:
            raise InvalidInput(f"{name} may name at most {MAX_FILTER_KINDS} kinds")
        kinds.add(check_kind(kind, f"{name}[{position}]"))
    return tuple(sorted(kinds))


def check_kind_filter(kind: object, exclude_kinds: object) -> KindFilter:
    """The kind filter of a search: the kinds to keep (None: any) and the kinds to leave out.

    ``kind`` is None, a kind, or a non-empty collection of kinds (any of them matches);
    ``exclude_kinds`` is None or empty (nothing left out), a kind, or a collection of kinds.
    """
    kinds = None if kind is None else _kinds(kind, "kind")
    if kinds == ():
        raise InvalidInput("kind must name at least one kind, or be None for any kind")
    excluded = () if exclude_kinds is None else _kinds(exclude_kinds, "exclude_kinds")
    return kinds, excluded
