"""Conversions between our OpenAI-shape messages and other providers' and frameworks' shapes.

Each converter lives in its own module and is pure; a round trip loses no content, tool calls
or ``meta`` / ``usage`` markers.
"""

from synopsis.convert.anthropic import from_anthropic, to_anthropic

__all__ = ["from_anthropic", "to_anthropic"]
