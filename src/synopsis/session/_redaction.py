"""What a session job sends and stores, redacted: the one place both twins' jobs go through.

With ``redact=`` a job's request is redacted before it is sent (:func:`summary_request`): the
new messages and the previous summary read back from the store, which may predate redaction.
The summary the model answers is redacted before it is stored (:func:`redacted_text`), so the
stored version, its long-term memory copy and any outbox replay of it hold no value the
redactor finds. A session keeps no other copy of the conversation.

The context built for the next model call is redacted too (:func:`context_inputs`), as the
compactor's output is: the caller's messages (whose older turns hybrid mode quotes as notes),
the stored summary (which may predate redaction) and the recalled memories (which may have
been written without it). The caller's own system prompt is left as it is. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from synopsis.memory import SearchHit, SessionSummary
from synopsis.redact import Redactor, count_kinds

__all__ = [
    "SummaryRequest",
    "context_inputs",
    "redacted_text",
    "summary_request",
]


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """What one job sends the summarizer, and how many values of each kind were redacted."""

    messages: Sequence[Mapping[str, Any]]
    previous_summary: str | None
    redacted: dict[str, int] = field(default_factory=dict)


def summary_request(
    redactor: Redactor | None,
    messages: Sequence[Mapping[str, Any]],
    previous: SessionSummary | None,
) -> SummaryRequest:
    """The messages ``[start, end)`` and the previous summary's text, redacted when on."""
    text = previous.text if previous is not None else None
    if redactor is None:
        return SummaryRequest(messages, text)
    clean, findings = redactor.redact_messages(messages)
    if text is not None:
        result = redactor.redact_text(text)
        text, findings = result.text, (*findings, *result.findings)
    return SummaryRequest(clean, text, count_kinds(findings))


def redacted_text(redactor: Redactor | None, text: str) -> str:
    """``text`` without any value ``redactor`` finds (as it is when off)."""
    return text if redactor is None else redactor.redact_text(text).text


def context_inputs(
    redactor: Redactor | None,
    body: list[Mapping[str, Any]],
    summary: SessionSummary | None,
    hits: list[SearchHit],
) -> tuple[list[Mapping[str, Any]], SessionSummary | None, list[SearchHit]]:
    """What a context is built from, redacted when on: messages, summary, recalled memories."""
    if redactor is None:
        return body, summary, hits
    clean: list[Mapping[str, Any]] = list(redactor.redact_messages(body)[0])
    if summary is not None:
        summary = replace(summary, text=redactor.redact_text(summary.text).text)
    hits = [
        replace(hit, item=replace(hit.item, text=redactor.redact_text(hit.item.text).text))
        for hit in hits
    ]
    return clean, summary, hits
