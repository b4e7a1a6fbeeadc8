"""A history redacted the way every workflow that sends or keeps it needs it. Pure.

The leading run of system messages passes as it is: it is the caller's own instruction, never
summarized, archived or stored, and changing it would change what the agent is told and break
the provider's prompt cache. A system message later in the history is summarized like any
other, so it is redacted like any other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from synopsis.messages import split_leading_system
from synopsis.redact._redactor import Redactor, count_kinds

__all__ = ["redact_history"]

Messages = Sequence[Mapping[str, Any]]


def redact_history(
    redactor: Redactor | None, messages: Messages
) -> tuple[Messages, dict[str, int]]:
    """``messages`` with every value ``redactor`` finds taken out (leading system messages
    aside), and how many values of each kind went; ``messages`` itself when off."""
    if redactor is None:
        return messages, {}
    system, rest = split_leading_system(messages)
    clean, findings = redactor.redact_messages(rest)
    return [*system, *clean], count_kinds(findings)
