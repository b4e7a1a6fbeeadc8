"""Bounds on a session summary: the stored text by characters, the injected text by tokens.

A summarizer can answer with megabytes (a runaway model, a prompt injection, a summary that
only ever grows). Stored whole, such a text is read, estimated and sent on every request, so
it is cut once when saved (``max_summary_chars``) and again, by tokens, when injected into a
request (a summary saved before the cap existed, or a small context budget).

A cut keeps the beginning, ends on a line or sentence boundary when one is near, and closes
with :data:`TRUNCATION_MARKER`, so a reader (and the model) sees that text is missing. Pure:
text and an estimator in, text out.
"""

from __future__ import annotations

import re
from typing import Final

from synopsis.tokens import Estimator

__all__ = [
    "CHARS_PER_TOKEN_CEILING",
    "MIN_SUMMARY_CHARS",
    "TRUNCATION_MARKER",
    "clip_chars",
    "clip_tokens",
]

#: Ends every cut text; says what happened to the model and to a person reading the store.
TRUNCATION_MARKER: Final = "[... summary truncated: the rest did not fit the memory limit ...]"

#: The smallest ``max_summary_chars`` accepted: room for the marker and some text.
MIN_SUMMARY_CHARS: Final = 200

#: Before estimating tokens, text is first cut to this many characters per token allowed, so
#: a huge text is never estimated whole. Real text has far fewer characters per token.
CHARS_PER_TOKEN_CEILING: Final = 32

#: A boundary is looked for in the last part of the allowed length only (a cut that kept a
#: tenth of what was allowed, just to end on a newline, would lose more than it tidies).
_BOUNDARY_WINDOW: Final = 0.5

_SENTENCE_END = re.compile(r"[.!?](?=\s)|[。！？]")


def clip_chars(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else a marked cut of that length."""
    if len(text) <= limit:
        return text
    room = max(limit - len(TRUNCATION_MARKER) - 1, 0)
    return _cut(text, room)


def clip_tokens(text: str, limit: int, estimate: Estimator) -> str:
    """``text`` if it is estimated at ``limit`` tokens or fewer, else a marked cut that is.

    The result may exceed ``limit`` only when even the marker alone does.
    """
    text = clip_chars(text, limit * CHARS_PER_TOKEN_CEILING)
    if estimate(text) <= limit:
        return text
    room = _longest_prefix(text, limit - estimate(f"\n{TRUNCATION_MARKER}"), estimate)
    clipped = _cut(text, room)
    while room and estimate(clipped) > limit:  # estimates do not quite add up: shrink a little
        room = room * 9 // 10
        clipped = _cut(text, room)
    return clipped


def _longest_prefix(text: str, tokens: int, estimate: Estimator) -> int:
    """The length of the longest prefix of ``text`` estimated at ``tokens`` or fewer."""
    low, high = 0, len(text) + 1  # the answer lies in [low, high)
    while high - low > 1:
        middle = (low + high) // 2
        if estimate(text[:middle]) <= tokens:
            low = middle
        else:
            high = middle
    return low


def _cut(text: str, room: int) -> str:
    """At most ``room`` characters of ``text``, ended at a boundary near there, then the marker."""
    head = text[:room]
    floor = int(room * (1 - _BOUNDARY_WINDOW))
    end = _boundary(head, floor)
    kept = head[:end].rstrip()
    return f"{kept}\n{TRUNCATION_MARKER}" if kept else TRUNCATION_MARKER


def _boundary(head: str, floor: int) -> int:
    """The end of the last line, else sentence, else word in ``head[floor:]``; else its end."""
    line = head.rfind("\n", floor)
    if line > 0:
        return line
    sentences = [m.end() for m in _SENTENCE_END.finditer(head, floor)]
    if sentences:
        return sentences[-1]
    space = max(head.rfind(" ", floor), head.rfind("\t", floor))
    return space if space > 0 else len(head)
