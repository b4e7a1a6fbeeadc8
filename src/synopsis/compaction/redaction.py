"""What redaction covers in a compaction, decided once. Pure.

With ``redact=`` (a :class:`~synopsis.redact.Redactor`) a compaction works on the redacted
history from its first step (:func:`redact_history`): the summarizer's request, the archive,
the tier-1 stubs, the back-filled user messages and the kept tail are all built from it, so
none of them can hold a value the redactor finds, and in ``hash`` mode the summary and the
kept messages name one value by one token. The summary a model writes is redacted too
(:func:`redact_summary`), in case it wrote a value of its own (an earlier summary made without
redaction, read back). Redacted text does not change when redacted again, so a history that
is compacted again and again is not redacted twice.

The leading run of system messages passes as it is: it is the caller's own instruction, a
compaction never summarizes, archives or stores it, and changing it would change what the
agent is told and break the provider's prompt cache. A system message later in the history
is summarized like any other, so it is redacted like any other. Marker tags are never touched
(see :mod:`synopsis.redact`), so summaries, stubs and preserved skills stay readable to later
compactions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from synopsis.messages import split_leading_system
from synopsis.redact import Redactor, count_kinds
from synopsis.summarizer import SummaryResult

__all__ = ["merged_counts", "redact_history", "redact_summary"]

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


def redact_summary(
    redactor: Redactor | None, summary: SummaryResult
) -> tuple[SummaryResult, dict[str, int]]:
    """The summary without any value ``redactor`` finds in it, and the counts by kind."""
    if redactor is None:
        return summary, {}
    result = redactor.redact_text(summary.text)
    if not result.findings:
        return summary, {}
    return replace(summary, text=result.text), count_kinds(result.findings)


def merged_counts(*counts: Mapping[str, int]) -> dict[str, int]:
    """Counts by kind added up, sorted by kind."""
    total: dict[str, int] = {}
    for each in counts:
        for kind, number in each.items():
            total[kind] = total.get(kind, 0) + number
    return dict(sorted(total.items()))
