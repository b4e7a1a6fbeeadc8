"""The summarizer: one resilient, validated call that turns messages into a summary text.

This module holds the contract shared by in-place compaction and session memory; the
concrete :class:`Summarizer` / :class:`AsyncSummarizer` are defined below the protocols.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["AsyncSummarizerLike", "SummarizerLike", "SummaryResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryResult:
    """A validated summary: the kept ``<summary>`` text, and how it was obtained."""

    text: str
    model: str
    attempts: int


@runtime_checkable
class SummarizerLike(Protocol):
    """Anything that can summarize a conversation synchronously."""

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous_summary: str | None = None,
        session_id: str | None = None,
    ) -> SummaryResult: ...


@runtime_checkable
class AsyncSummarizerLike(Protocol):
    """The async twin of :class:`SummarizerLike`."""

    async def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous_summary: str | None = None,
        session_id: str | None = None,
    ) -> SummaryResult: ...
