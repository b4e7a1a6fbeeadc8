"""The marker grammar: how a message synopsis injects says what it is, in its own text.

::

    <synopsis:summary version="2" tokens_after="5210">
    ...the body...
    </synopsis:summary>

A marker wraps the whole text of a message, so it survives every framework conversion and wire
format that keeps the text (a plain string or the text parts of a content list). Attributes
carry the few facts later steps read (a summary's version, the tokens just after it). Marker
text inside a body is escaped (:func:`escape_markers`, reversibly), so words quoted into a body
can never open or close a marker; a body may instead be built "raw" of escaped text and nested
elements (:func:`marked_elements`). Pure text functions, linear in the text: no regular
expression here can backtrack across it. :mod:`synopsis.messages` reads markers off messages.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "Marker",
    "closing_tag",
    "escape_markers",
    "is_marker_name",
    "mark",
    "marked_elements",
    "opening_tag",
    "parse_marked",
    "tag_spans",
    "unescape_markers",
]

_OPENING: Final = re.compile(r'\s*<synopsis:([a-z][a-z_]*)((?: [a-z_]+="[^"]*")*)>\n?')
_ATTRIBUTE: Final = re.compile(r' ([a-z_]+)="([^"]*)"')
_NAME: Final = re.compile(r"[a-z][a-z_]*\Z")
# A "<" that would open or close a marker, and an "&" that starts an escaped one: escaping the
# "&" too makes escaping reversible ("&lt;synopsis:" typed by a person survives a round trip).
_MARKER_TEXT: Final = re.compile(r"<(?=/?synopsis:)|&(?=(?:amp;)*lt;/?synopsis:)")
_ESCAPED_MARKER: Final = re.compile(r"&lt;(?=/?synopsis:)|&amp;(?=(?:amp;)*lt;/?synopsis:)")
_MAX_INTEGER_DIGITS: Final = 18
# Any opening or closing tag; escaped text holds none, so every match is a real tag.
_TAG: Final = re.compile(r'</?synopsis:[a-z][a-z_]*(?: [a-z_]+="[^"]*")*>')


@dataclass(frozen=True, slots=True)
class Marker:
    """What an injected message is (``kind``) and the facts later steps read (``attributes``)."""

    kind: str
    attributes: Mapping[str, str] = field(default_factory=dict)

    def integer(self, name: str) -> int | None:
        """The attribute ``name`` as a non-negative integer, or None."""
        value = self.attributes.get(name, "")
        ok = value.isascii() and value.isdigit() and len(value) <= _MAX_INTEGER_DIGITS
        return int(value) if ok else None


def is_marker_name(name: str) -> bool:
    """Whether ``name`` may name a marker kind or attribute: lowercase letters and "_"."""
    return _NAME.match(name) is not None


def escape_markers(text: str) -> str:
    """``text`` with any marker text escaped, so that quoting it can never open or close one."""
    return _MARKER_TEXT.sub(lambda m: "&lt;" if m.group() == "<" else "&amp;", text)


def unescape_markers(text: str) -> str:
    """The inverse of :func:`escape_markers`."""
    return _ESCAPED_MARKER.sub(lambda m: "<" if m.group() == "&lt;" else "&", text)


def opening_tag(kind: str, attributes: Mapping[str, object] | None = None) -> str:
    """``<synopsis:kind name="value" ...>``; attributes whose value is None are left out."""
    pairs = [(name, value) for name, value in (attributes or {}).items() if value is not None]
    bad = [name for name in (kind, *(name for name, _ in pairs)) if not is_marker_name(name)]
    if bad:
        raise ValueError(f"marker names are lowercase letters and '_', got {bad[0]!r}")
    quoted = "".join(f' {name}="{html.escape(str(value))}"' for name, value in pairs)
    return f"<synopsis:{kind}{quoted}>"


def closing_tag(kind: str) -> str:
    return f"</synopsis:{kind}>"


def mark(
    kind: str, body: str, attributes: Mapping[str, object] | None = None, *, raw: bool = False
) -> str:
    """``body`` inside the marker of ``kind``. Marker text in ``body`` is escaped, unless
    ``raw``: a body built of escaped text and nested marked elements."""
    inner = body if raw else escape_markers(body)
    return f"{opening_tag(kind, attributes)}\n{inner}\n{closing_tag(kind)}"


def parse_marked(text: str) -> tuple[Marker, str] | None:
    """The marker that wraps all of ``text`` (blank space around it aside) and its raw body."""
    opening = _OPENING.match(text)
    if opening is None:
        return None
    closing = closing_tag(opening.group(1))
    end = len(text.rstrip()) - len(closing)
    if end < opening.end() - 1 or not text.startswith(closing, end):
        return None
    body = text[opening.end() : max(end, opening.end())]
    marker = Marker(opening.group(1), _attributes(opening.group(2)))
    return marker, body.removesuffix("\n")


def marked_elements(body: str, kind: str) -> Iterator[tuple[Marker, str]]:
    """The elements of ``kind`` nested in a raw body, in order, each with its unescaped body.

    A linear scan: escaped text holds no marker text, so every tag found is a real one.
    """
    if not is_marker_name(kind):
        raise ValueError(f"marker names are lowercase letters and '_', got {kind!r}")
    opening = re.compile(rf'<synopsis:{kind}((?: [a-z_]+="[^"]*")*)>\n')
    closing = "\n" + closing_tag(kind)
    position = 0
    while (found := opening.search(body, position)) is not None:
        start = found.end()
        end = body.find(closing, start - 1)  # "- 1": an empty body shares the opening's "\n"
        if end < 0:
            return
        yield Marker(kind, _attributes(found.group(1))), unescape_markers(body[start:end])
        position = end + len(closing)


def tag_spans(text: str) -> list[tuple[int, int]]:
    """Where the marker tags in ``text`` are (start, end), in order: structure, not data, so
    a step that rewrites text (redaction) leaves them alone."""
    if "synopsis:" not in text:
        return []
    return [found.span() for found in _TAG.finditer(text)]


def _attributes(source: str) -> dict[str, str]:
    return {name: html.unescape(value) for name, value in _ATTRIBUTE.findall(source)}
