"""What redaction covers in a compaction, decided once. Pure.

With ``redact=`` (a :class:`~synopsis.redact.Redactor`) a compaction works on the redacted
history from its first step (:func:`synopsis.redact.redact_history`): the summarizer's request,
the archive, the tier-1 stubs, the back-filled user messages and the kept tail are all built
from it, so none of them can hold a value the redactor finds, and in ``hash`` mode the summary
and the kept messages name one value by one token. The summary a model writes is redacted too
(:func:`redact_summary`), in case it wrote a value of its own (an earlier summary made without
redaction, read back). Redacted text does not change when redacted again, so a history that is
compacted again and again is not redacted twice. The leading run of system messages passes as
it is (:mod:`synopsis.redact.history` says why). Marker tags are never touched (see
:mod:`synopsis.redact`), so summaries, stubs and preserved skills stay readable to later
compactions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from synopsis.redact import Redactor, count_kinds
from synopsis.summarizer import SummaryResult

__all__ = ["merged_counts", "redact_summary"]

Messages = Sequence[Mapping[str, Any]]


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
