"""A dry run of a compaction: what it would clear, summarize, keep and back-fill. Pure.

:func:`preview_compaction` drives the very flow a compactor runs
(:func:`synopsis.compaction._flow.compaction`) with a driver of its own: it answers
:class:`~synopsis.compaction._flow.Summarize` with the summary the offline ``extractive``
summarizer writes of the same context (with the compactor's prompts, counter and output
budget), and :class:`~synopsis.compaction._flow.WriteArchive` with where the archive would
write, and delivers no event. No model is called and nothing is written, and the prediction
cannot drift from the real run: the same steps decide the same sets. With
``model="extractive"`` the counts are the real run's exactly; with a model, the extractive
summary (the same nine sections, the user's words quoted) stands in for the one the model
would write, so the counts after tier 2 are an estimate of the summary's own length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from synopsis._flow import drive
from synopsis.compaction._flow import (
    CompactionResult,
    CompactionStep,
    SummarizeOffline,
    Tier,
    WriteArchive,
    compaction,
)
from synopsis.compaction.archive import Archive, LocatedArchive
from synopsis.compaction.options import CompactionOptions
from synopsis.compaction.summary import (
    SUMMARY_KIND,
    collect_user_messages,
    parse_user_messages_block,
)
from synopsis.messages import content_type, is_real_user_message, marked_body
from synopsis.redact import redact_history
from synopsis.summarizer import Summarize, Summarizer, SummaryResult
from synopsis.tokens import TokenCounter

__all__ = ["CompactionPreview", "preview_compaction"]

#: The model a preview's summary is reported as: the offline stand-in, never the real one.
_PREVIEW_MODEL: Final = "preview"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPreview:
    """What a compaction of the same history with the same options would do.

    The index sets refer to the input messages: ``cleared`` (tier 1 stubs them),
    ``summarized`` (tier 2 replaces them by the summary), ``kept`` (sent verbatim, stubs
    aside) and ``backfilled`` (user messages the summary would quote word for word). The
    preview assumes the summarizer succeeds, so no fallback appears in it. ``tiers`` has the
    counts before and after each tier; after tier 2 they count the placeholder instead of the
    summary.
    """

    triggered: bool
    reason: str | None
    compacts: bool
    tokens_before: int
    tokens_after: int
    cleared: tuple[int, ...]
    summarized: tuple[int, ...]
    kept: tuple[int, ...]
    backfilled: tuple[int, ...]
    tiers: tuple[Tier, ...]
    #: Tokens the summarizer would be sent (its context), if tier 2 runs.
    summarizer_tokens: int
    archive: str | None
    skipped: str | None
    events: tuple[str, ...]
    #: With ``redact=``: how many values of each kind the run would redact.
    redacted: Mapping[str, int] = field(default_factory=dict)

    @property
    def calls_model(self) -> bool:
        """Whether the real run would call the summarizer."""
        return any(tier.name == "summarize" for tier in self.tiers)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with every index set as a list."""
        return {
            "triggered": self.triggered,
            "reason": self.reason,
            "compacts": self.compacts,
            "calls_model": self.calls_model,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tiers": [{**tier.to_dict(), "messages": list(tier.messages)} for tier in self.tiers],
            "summarizer_tokens": self.summarizer_tokens,
            "cleared": list(self.cleared),
            "summarized": list(self.summarized),
            "kept": list(self.kept),
            "backfilled": list(self.backfilled),
            "archive": self.archive,
            "skipped": self.skipped,
            "events": list(self.events),
            "redacted": dict(self.redacted),
        }


@dataclass(slots=True)
class _PreviewDriver:
    """Performs a compaction's steps without doing any of them."""

    archive: Archive | None
    counter: TokenCounter
    stand_in: Summarizer
    summarizer_tokens: int = 0

    def perform(self, step: CompactionStep) -> Any:
        match step:
            case Summarize(context, previous, prompts=prompts) | SummarizeOffline(
                context, previous, prompts
            ):
                self.summarizer_tokens += self.counter.count(list(context)).total
                stand_in = self.stand_in.speaking(prompts)
                written = stand_in.summarize(context, previous_summary=previous)
                return SummaryResult(text=written.text, model=_PREVIEW_MODEL, attempts=0)
            case WriteArchive(_, session_id):
                return self._would_write(session_id)
        return None  # Emit: nobody is told of a compaction that does not happen

    def _would_write(self, session_id: str | None) -> str:
        if isinstance(self.archive, LocatedArchive):
            return str(self.archive.path_for(session_id))
        return f"(would be written to the {type(self.archive).__name__})"


def preview_compaction(
    options: CompactionOptions,
    counter: TokenCounter,
    archive: Archive | None,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    force: bool = True,
    reason: str = "manual",
) -> CompactionPreview:
    """What ``compaction(options, ...)`` would do to ``messages``; no model, no write."""
    stand_in = Summarizer(
        model="extractive",
        prompts=options.texts,
        counter=counter,
        window=options.summarizer_window,
        max_output_tokens=options.summarizer_max_output_tokens,
        output_cap=options.summary_cap,
    )
    driver = _PreviewDriver(archive, counter, stand_in)
    flow = compaction(options, counter, messages, tools=tools, force=force, reason=reason)
    result = drive(flow, driver.perform)
    # The summary quotes the user's words as redacted: compare them so.
    shown, _ = redact_history(options.redact if result.redacted else None, messages)
    return _preview_of(result, shown, driver.summarizer_tokens)


def _preview_of(
    result: CompactionResult, messages: Sequence[Mapping[str, Any]], summarizer_tokens: int
) -> CompactionPreview:
    touched = {tier.name: tier.messages for tier in result.tiers}
    summarized, cleared = touched.get("summarize", ()), touched.get("clear", ())
    gone = {*summarized, *cleared}
    return CompactionPreview(
        triggered=result.triggered,
        reason=result.reason,
        compacts=result.compacted,
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        cleared=cleared,
        summarized=summarized,
        kept=tuple(i for i in range(len(messages)) if i not in gone),
        backfilled=_backfilled(result, messages, summarized),
        tiers=result.tiers,
        summarizer_tokens=summarizer_tokens,
        archive=result.archive,
        skipped=result.skipped,
        events=tuple(event.name for event in result.events),
        redacted=result.redacted,
    )


def _backfilled(
    result: CompactionResult, messages: Sequence[Mapping[str, Any]], summarized: Sequence[int]
) -> tuple[int, ...]:
    """The summarized user messages that the new summary quotes word for word."""
    if not summarized:
        return ()
    summary = next(m for m in result.messages if content_type(m) == SUMMARY_KIND)
    quoted = {text.strip() for text in parse_user_messages_block(marked_body(summary))}
    return tuple(
        i
        for i in summarized
        if is_real_user_message(messages[i])
        and any(text.strip() in quoted for text in collect_user_messages([messages[i]]))
    )
