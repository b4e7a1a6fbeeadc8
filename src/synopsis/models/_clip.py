"""Shortening text for the extractive summary without cutting words in half.

A clipped text keeps its head and its tail around `` … ``. The head ends before a space or
after CJK punctuation, the tail starts after one, so words stay whole. Text with no boundary
near the cut (a long identifier, a run of Chinese without punctuation) is cut between
characters, but never between a character and its combining marks, inside a ZWJ emoji
sequence or inside a surrogate pair. Pure functions; each looks at most at ``limit``
characters around the cut, so a huge text costs no more than a short one.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = ["ELLIPSIS", "clip", "clip_line", "quote"]

ELLIPSIS: Final = " … "
#: A word boundary: whitespace, or punctuation that CJK text uses instead of spaces.
_BREAK: Final = re.compile(r"[\s。，、；：！？）」』》〉】…]")
#: Marks that belong to the character before them (Mn, Mc, Me), e.g. accents, variation selectors.
_MARKS: Final = frozenset({"Mn", "Mc", "Me"})
_ZWJ: Final = "\u200d"
#: How far a cut may move to avoid splitting a grapheme before it gives up.
_GRAPHEME_STEPS: Final = 8


def clip(text: str, limit: int) -> str:
    """At most ``limit`` characters: the head and the tail, cut on word boundaries, joined by
    an ellipsis. A text that fits is only stripped."""
    text = text.strip()
    if len(text) <= limit:
        return text
    if limit < 8:
        return text[: _back_to_grapheme(text, limit)]
    head = text[: _head_end(text, (limit - len(ELLIPSIS)) * 2 // 3)].rstrip()
    room = limit - len(ELLIPSIS) - len(head)
    tail = text[_tail_start(text, room) :].lstrip()
    return f"{head}{ELLIPSIS}{tail}"


def clip_line(text: str, limit: int) -> str:
    """``text`` on one line (whitespace runs become one space), clipped to ``limit``."""
    return clip(" ".join(text.split()), limit)


def quote(text: str, limit: int) -> str:
    """``text`` clipped to ``limit`` and quoted Markdown-style, line by line."""
    return "> " + clip(text, limit).replace("\n", "\n> ")


def _head_end(text: str, room: int) -> int:
    """Where a head of at most ``room`` characters ends: before the last space or after the
    last CJK punctuation, unless that would lose more than half of it."""
    end = 0
    for match in _BREAK.finditer(text, 0, room + 1):
        boundary = match.start() if match.group().isspace() else match.end()
        if boundary <= room:
            end = boundary
    return end if end * 2 >= room else _back_to_grapheme(text, room)


def _tail_start(text: str, room: int) -> int:
    """Where a tail of at most ``room`` characters starts: after the first boundary, unless
    that would lose more than half of it."""
    start = len(text) - room
    if start <= 0 or _BREAK.match(text, start - 1):
        return max(start, 0)
    match = _BREAK.search(text, start, start + room // 2)
    if match is not None:
        return match.end()
    return _forward_to_grapheme(text, start)


def _splits_grapheme(text: str, index: int) -> bool:
    """Whether a cut before ``text[index]`` separates what is drawn as one character."""
    if not 0 < index < len(text):
        return False
    before, after = text[index - 1], text[index]
    return (
        unicodedata.category(after) in _MARKS
        or _ZWJ in (before, after)
        or "\U0001f3fb" <= after <= "\U0001f3ff"  # skin-tone modifiers
        or ("\ud800" <= before <= "\udbff" and "\udc00" <= after <= "\udfff")
    )


def _back_to_grapheme(text: str, index: int) -> int:
    """``index`` moved back to the start of its grapheme (a few steps at most)."""
    for candidate in range(index, max(index - _GRAPHEME_STEPS, 0), -1):
        if not _splits_grapheme(text, candidate):
            return candidate
    return index


def _forward_to_grapheme(text: str, index: int) -> int:
    """``index`` moved forward to the start of the next grapheme (a few steps at most)."""
    for candidate in range(index, min(index + _GRAPHEME_STEPS, len(text))):
        if not _splits_grapheme(text, candidate):
            return candidate
    return index
