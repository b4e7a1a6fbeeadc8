"""One compaction, written once: a pure generator of steps that both compactors drive.

:func:`compaction` decides (count + trigger, with the regrowth guard: :mod:`.decision`),
validates (an orphan tool result is healed, not refused: :mod:`.orphans`), picks the
summary's language when none is set (:mod:`.language`), with ``redact`` redacts the history
once (every later step, and so the summarizer's request, the
archive and the result, sees only the redacted messages; see :mod:`.redaction`), and with
``clear_tool_outputs`` runs tier 1 first: old tool output is archived and replaced by stubs
(:mod:`.clear`), ``tool_outputs_cleared`` is emitted, the history is counted again, and the
summary (tier 2) follows only if the history is still over budget (the trigger fires, or it
is above ``ToolClearing.target`` of the limit; and always when the trigger had not fired: a
compaction asked for without budget pressure runs every tier). Tier 2 plans
(emitting ``compaction_skipped`` when there is nothing worth summarizing), emits
``before_summarize``, asks for a summary, degrades on :class:`ModelError` (extractive, truncate
or keep) and emits ``summarize_failed``, archives what leaves the history, builds the new
history and emits ``after_summarize``, then drops orphan tool results from what it sends
(``orphan_tool_results_dropped``); with ``redact``, ``values_redacted`` comes last with the
counts by kind (the result's ``redacted``). It does no I/O: the summarizer call, the archive write
and event delivery are steps (``Summarize``, :class:`SummarizeOffline`,
:class:`WriteArchive`, ``Emit``) that a driver performs, synchronously or awaiting, so
both compactors deliver the same events in the same order (see :mod:`synopsis._flow`).

The new history is ``[leading system messages] + [preserved skills] + [summary] + [tail]``,
always a new list; the caller's history is never mutated. It is sendable as it is: messages
carry only the keys of the input's message schema (a legacy ``meta`` marker moves into the
text, see :func:`synopsis.messages.without_meta`), and the facts of a compaction live in the
summary's marker and in the :class:`~synopsis.compaction.result.CompactionResult`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from synopsis._flow import Emit, Flow
from synopsis.compaction._build import build, previous_version, truncated
from synopsis.compaction._build import truncation as plan_fallback
from synopsis.compaction.clear import (
    ClearingPlan,
    apply_clearing,
    clearing_is_enough,
    kept_facts,
    plan_clearing,
)
from synopsis.compaction.decision import decide, decide_counted
from synopsis.compaction.language import detect_prompts
from synopsis.compaction.options import CompactionOptions
from synopsis.compaction.orphans import as_notes, drop_orphans, input_positions
from synopsis.compaction.plan import CompactionPlan, plan_compaction
from synopsis.compaction.recall import SearchArchive, recalling
from synopsis.compaction.redaction import merged_counts, redact_summary
from synopsis.compaction.result import CompactionResult, Tier, unchanged_result
from synopsis.errors import CompactionError, ModelError, describe_error
from synopsis.events import (
    AfterSummarize,
    BeforeSummarize,
    CompactionSkipped,
    Event,
    OrphanToolResultsDropped,
    SummarizeFailed,
    ToolOutputsCleared,
    ValuesRedacted,
)
from synopsis.messages import marked_body
from synopsis.prompts import PromptSet
from synopsis.redact import redact_history
from synopsis.summarizer import Summarize, SummaryResult, strip_summary_wrapping
from synopsis.tokens import TokenCounter
from synopsis.validation import validate_messages

__all__ = [
    "CompactionResult",
    "CompactionStep",
    "SearchArchive",
    "SummarizeOffline",
    "Tier",
    "WriteArchive",
    "build",
    "compaction",
    "decide",
    "summarizer_input",
    "truncated",
]

_log = logging.getLogger("synopsis.compaction.compactor")

Messages = Sequence[Mapping[str, Any]]


# -- steps: what a driver carries out ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SummarizeOffline:
    """Every model failed and the fallback is extractive: summarize with the offline model
    (in ``prompts``' language when the compaction detected one)."""

    context: tuple[Mapping[str, Any], ...]
    previous_summary: str | None
    prompts: PromptSet | None = None


@dataclass(frozen=True, slots=True)
class WriteArchive:
    """Archive the replaced messages; the result is where they went (a path or URI)."""

    messages: tuple[Mapping[str, Any], ...]
    session_id: str | None


CompactionStep = Summarize | SummarizeOffline | WriteArchive | SearchArchive | Emit[Event]


# -- the flow ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    """One compaction under way: its configuration and what was decided."""

    options: CompactionOptions
    counter: TokenCounter
    messages: Messages
    tokens: int
    reason: str
    triggered: bool
    #: What the summarizer reads in place of a message tier 1 stubbed (by id of the stub):
    #: the original, so a fact in an old tool output can still reach the summary.
    originals: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    #: The prompts detected from the history's language (None when the options fix them).
    detected: PromptSet | None = None

    def unchanged(
        self,
        *,
        skipped: str | None = None,
        error: dict[str, Any] | None = None,
        events: Sequence[Event] = (),
    ) -> CompactionResult:
        return unchanged_result(
            self.messages,
            self.tokens,
            reason=self.reason,
            triggered=self.triggered,
            skipped=skipped,
            error=error,
            events=tuple(events),
        )

    def compacted(
        self,
        new: list[dict[str, Any]],
        tokens_after: int,
        summary: SummaryResult | None,
        *,
        archive: str | None,
        fallback: str | None,
        events: Sequence[Event],
        version: int | None = None,
        tier: Tier | None = None,
    ) -> CompactionResult:
        return CompactionResult(
            messages=new,
            triggered=self.triggered,
            compacted=True,
            reason=self.reason,
            tokens_before=self.tokens,
            tokens_after=tokens_after,
            model=summary.model if summary else None,
            attempts=summary.attempts if summary else 0,
            summary=summary.text if summary else None,
            archive=archive,
            fallback=fallback,
            events=tuple(events),
            version=version,
            usage=summary.usage if summary else None,
            calls=summary.calls if summary else 0,
            tiers=(tier,) if tier else (),
        )


def compaction(
    options: CompactionOptions,
    counter: TokenCounter,
    messages: Messages,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    force: bool = True,
    reason: str = "manual",
) -> Flow[CompactionStep, CompactionResult]:
    """Compact ``messages`` if the trigger fires (or always, with ``force``)."""
    if options.recall is not None:  # the compaction without recall, then the recall block
        once = replace(options, recall=None)
        return (
            yield from recalling(
                options.recall,
                budget=options.trigger.threshold_tokens(),
                session_id=options.session_id,
                counter=counter,
                messages=messages,
                compact=lambda base: compaction(
                    once, counter, base, tools=tools, force=force, reason=reason
                ),
            )
        )
    tokens, decision, plain = decide_counted(options, counter, messages, tools)
    if not (force or decision.fired):
        return unchanged_result(messages, tokens, reason=None, triggered=False, plain=plain)
    validate_messages(list(messages), orphans="allow")
    detected = detect_prompts(messages) if options.prompts is None else None
    if detected is not None:
        options = replace(options, prompts=detected)
    clean, redacted = redact_history(options.redact, messages)
    run = _Run(
        detected=detected,
        options=options,
        counter=counter,
        messages=clean,
        tokens=tokens,
        reason=decision.reason or reason,
        triggered=decision.fired,
    )
    if options.clear_tool_outputs is None:
        result = yield from _compact(run)
    else:
        result = yield from _tiered(run, tools, pressed=decision.fired)
    result = yield from _without_orphans(run, result)
    if options.redact is None:
        return result
    return (yield from _redaction_reported(run, result, redacted))


def _without_orphans(run: _Run, result: CompactionResult) -> Flow[CompactionStep, CompactionResult]:
    """A compacted history without tool results whose call it no longer holds (see
    :mod:`.orphans`), and ``orphan_tool_results_dropped`` when there were any."""
    if not result.compacted:
        return result
    kept, dropped = drop_orphans(result.messages)
    if not dropped:
        return result
    event = OrphanToolResultsDropped(
        reason=run.reason,
        tool_call_ids=tuple(str(m.get("tool_call_id")) for m in dropped),
        indices=input_positions(run.messages, dropped),
        session_id=run.options.session_id,
    )
    yield Emit(event)
    after = run.counter.count(kept).total
    return replace(result, messages=kept, tokens_after=after, events=(*result.events, event))


def _redaction_reported(
    run: _Run, result: CompactionResult, redacted: Mapping[str, int]
) -> Flow[CompactionStep, CompactionResult]:
    """The counts of everything redacted (history and summary) in the result and, when there
    were any, in a ``values_redacted`` event, the last one."""
    counts = merged_counts(redacted, result.redacted)
    if not counts:
        return result
    event = ValuesRedacted(
        reason=run.reason,
        counts=counts,
        total=sum(counts.values()),
        session_id=run.options.session_id,
    )
    yield Emit(event)
    return replace(result, redacted=counts, events=(*result.events, event))


def _tiered(
    run: _Run, tools: Sequence[Mapping[str, Any]] | None, *, pressed: bool
) -> Flow[CompactionStep, CompactionResult]:
    """Tier 1, then tier 2 unless tier 1 alone brought a history the trigger fired on well
    under budget (:func:`~synopsis.compaction.clear.clearing_is_enough`)."""
    plan = plan_clearing(run.messages, run.options, run.counter.estimate)
    if not plan.worthwhile:
        return (yield from _compact(run))
    try:
        archive = yield from _write_archive(run, [run.messages[i] for i in plan.indices])
    except CompactionError as exc:
        return run.unchanged(error=describe_error(exc))
    where = archive or run.options.transcript_path
    digest = run.options.clear_tool_outputs.digest_tokens if run.options.clear_tool_outputs else 0
    cleared = apply_clearing(
        run.messages, plan, run.counter.estimate, archive=where, digest_tokens=digest
    )
    after = run.counter.count(cleared, tools=tools).total
    events: list[Event] = []
    yield from _emit(events, _cleared_event(run, plan, after, archive))
    tier = Tier(name="clear", tokens_before=run.tokens, tokens_after=after, messages=plan.results)
    originals = {id(cleared[i]): run.messages[i] for i in plan.indices}
    rest = replace(run, messages=cleared, tokens=after, originals=originals)
    if pressed and clearing_is_enough(run.options, after, len(cleared)):
        second = rest.unchanged()
    else:
        second = yield from _compact(rest)
    return replace(
        second,
        compacted=True,
        tokens_before=run.tokens,
        archive=second.archive or archive,
        events=(*events, *second.events),
        tiers=(tier, *second.tiers),
    )


def _compact(run: _Run) -> Flow[CompactionStep, CompactionResult]:
    plan = plan_compaction(
        run.messages,
        keep_tail=run.options.keep_tail,
        estimate=run.counter.estimate,
        min_new_messages=run.options.min_new_messages,
        budget=run.options.trigger.threshold_tokens(),
        budget_messages=run.options.trigger.messages,
    )
    events: list[Event] = []
    if not plan.worthwhile:
        yield from _emit(events, _skipped(run, plan.skip_reason or "nothing to summarize"))
        return run.unchanged(skipped=plan.skip_reason, events=events)
    yield from _emit(events, _before(run))
    context, previous = summarizer_input(plan, run.options, run.originals)
    try:
        summary: SummaryResult | None = yield Summarize(
            context, previous, run.options.session_id, prompts=run.detected
        )
    except ModelError as exc:
        offline = SummarizeOffline(context, previous, run.detected)
        summary = yield from _degrade(run, exc, offline, events)
        if summary is None and run.options.fallback != "truncate":
            return run.unchanged(error=describe_error(exc), events=events)
        return (yield from _finish(run, plan, summary, run.options.fallback, events))
    return (yield from _finish(run, plan, summary, None, events))


def summarizer_input(
    plan: CompactionPlan,
    options: CompactionOptions,
    originals: Mapping[int, Mapping[str, Any]] | None = None,
) -> tuple[tuple[Mapping[str, Any], ...], str | None]:
    """What the summarizer reads, and the previous summary text (incremental mode).

    Tier 1 decides what stays in the context, not what the summary may know: a message it
    stubbed in this compaction is read as it was (``originals``, by id of the stub), one
    stubbed earlier as the facts its stub kept; never a stub. The summarizer bounds the
    originals by its window (clipping and chunking)."""
    to_summarize = tuple(_original(m, originals or {}) for m in plan.to_summarize)
    to_summarize = as_notes(to_summarize)
    previous = plan.previous_summary
    if previous is None:
        return to_summarize, None
    body = strip_summary_wrapping(marked_body(previous), options.texts)
    if options.incremental:
        return to_summarize, body
    return ({"role": "user", "content": body}, *to_summarize), None


def _original(
    message: Mapping[str, Any], originals: Mapping[int, Mapping[str, Any]]
) -> Mapping[str, Any]:
    """What the summarizer reads for ``message``: the original of a result stubbed in this
    compaction, the facts an earlier stub kept (:func:`~.clear.kept_facts`; a bare stub
    reads as nothing), else the message."""
    if id(message) in originals:
        return originals[id(message)]
    return kept_facts(message) or message


def _degrade(
    run: _Run, exc: ModelError, offline: SummarizeOffline, events: list[Event]
) -> Flow[CompactionStep, SummaryResult | None]:
    """The fallback's summary (extractive only; None otherwise), then ``summarize_failed``."""
    fallback = run.options.fallback
    _log.warning("summarization failed (%s); fallback=%s", exc, fallback)
    summary: SummaryResult | None = None
    if fallback == "extractive":
        summary = yield offline
    failed = SummarizeFailed(
        reason=run.reason,
        error=describe_error(exc),
        attempts=len(getattr(exc, "exceptions", ())) or 1,
        fallback=fallback,
        session_id=run.options.session_id,
    )
    yield from _emit(events, failed)
    return summary


def _finish(
    run: _Run,
    plan: CompactionPlan,
    summary: SummaryResult | None,
    fallback: str | None,
    events: list[Event],
) -> Flow[CompactionStep, CompactionResult]:
    """Archive what leaves the history, build the new history, report ``after_summarize``."""
    if summary is None:
        return (yield from _truncate(run, plan, events))
    summary, redacted = redact_summary(run.options.redact, summary)
    try:
        archive = yield from _write_archive(run, plan.removed)
    except CompactionError as exc:
        return run.unchanged(error=describe_error(exc), events=events)
    version = previous_version(plan) + 1
    new = build(run.options, run.counter, plan, summary, archive=archive)
    after = run.counter.count(new).total
    yield from _emit(events, _after(run, summary, new, after, archive))
    replaced = _positions(run.messages, plan.removed)
    tier = Tier(name="summarize", tokens_before=run.tokens, tokens_after=after, messages=replaced)
    result = run.compacted(
        new,
        after,
        summary,
        archive=archive,
        fallback=fallback,
        events=events,
        version=version,
        tier=tier,
    )
    return replace(result, redacted=redacted)


def _truncate(
    run: _Run, plan: CompactionPlan, events: list[Event]
) -> Flow[CompactionStep, CompactionResult]:
    """The truncation fallback: archive the messages it drops, then build without them."""
    truncation = plan_fallback(run.options, run.counter, run.messages, plan)
    if not truncation.dropped:
        nothing = CompactionError("the truncation fallback found nothing it may drop")
        return run.unchanged(error=describe_error(nothing), events=events)
    try:
        archive = yield from _write_archive(run, truncation.dropped)
    except CompactionError as exc:
        return run.unchanged(error=describe_error(exc), events=events)
    new = truncated(run.options, run.counter, plan, truncation, archive)
    after = run.counter.count(new).total
    dropped = _positions(run.messages, truncation.dropped)
    tier = Tier(name="truncate", tokens_before=run.tokens, tokens_after=after, messages=dropped)
    return run.compacted(
        new, after, None, archive=archive, fallback="truncate", events=events, tier=tier
    )


def _write_archive(
    run: _Run, messages: Sequence[Mapping[str, Any]]
) -> Flow[CompactionStep, str | None]:
    if run.options.archive is None:
        return None
    where: str = yield WriteArchive(tuple(messages), run.options.session_id)
    return where


def _positions(messages: Messages, subset: Sequence[Mapping[str, Any]]) -> tuple[int, ...]:
    """Where the messages of ``subset`` (the same objects) stand in ``messages``."""
    wanted = {id(message) for message in subset}
    return tuple(i for i, message in enumerate(messages) if id(message) in wanted)


def _emit(events: list[Event], event: Event) -> Flow[CompactionStep, None]:
    events.append(event)
    yield Emit(event)


def _skipped(run: _Run, why: str) -> CompactionSkipped:
    return CompactionSkipped(
        reason=run.reason,
        skipped=why,
        tokens=run.tokens,
        message_count=len(run.messages),
        session_id=run.options.session_id,
    )


def _cleared_event(
    run: _Run, plan: ClearingPlan, after: int, archive: str | None
) -> ToolOutputsCleared:
    return ToolOutputsCleared(
        reason=run.reason,
        cleared=len(plan.results),
        arguments_cleared=len(plan.calls),
        tokens_before=run.tokens,
        tokens_after=after,
        tokens_saved=run.tokens - after,
        archive=archive,
        session_id=run.options.session_id,
    )


def _before(run: _Run) -> BeforeSummarize:
    return BeforeSummarize(
        reason=run.reason,
        tokens=run.tokens,
        message_count=len(run.messages),
        session_id=run.options.session_id,
    )


def _after(
    run: _Run, summary: SummaryResult, new: list[dict[str, Any]], after: int, archive: str | None
) -> AfterSummarize:
    return AfterSummarize(
        reason=run.reason,
        tokens_before=run.tokens,
        tokens_after=after,
        messages_before=len(run.messages),
        messages_after=len(new),
        model=summary.model,
        attempts=summary.attempts,
        archive=archive,
        session_id=run.options.session_id,
        usage=summary.usage.as_dict() if summary.usage else None,
        calls=summary.calls,
    )
