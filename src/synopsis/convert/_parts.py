"""What every converter does with a message's content: map its parts, tell a text part.

Content is a string, None or a list of parts; only a list has parts to convert. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["is_text_part", "map_parts"]


def map_parts(content: Any, convert: Callable[[Any], Any]) -> Any:
    """``convert`` applied to each part of a content list; other content passes unchanged."""
    if not isinstance(content, list):
        return content
    return [convert(part) for part in content]


def is_text_part(part: Any) -> bool:
    """A ``{"type": "text", "text": str}`` part."""
    return (
        isinstance(part, Mapping)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    )
