"""One compaction, written once: a pure generator of steps that both compactors drive.

:func:`compaction` decides (count + trigger, with the regrowth guard), validates, plans,
emits ``before_summarize``, asks for a summary, degrades on :class:`ModelError` (extractive,
truncate or keep) and emits ``summarize_failed``, archives the replaced part, builds the new
history and emits ``after_summarize``. It does no I/O: the summarizer call, the archive write
and event delivery are steps (:class:`Summarize`, :class:`SummarizeOffline`,
:class:`WriteArchive`, :class:`Emit`) that a driver performs, synchronously or awaiting, so
both compactors deliver the same events in the same order (see :mod:`synopsis._flow`).

The new history is ``[leading system messages] + [preserved skills] + [summary] + [tail]``,
always a new list; the caller's history is never mutated.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from synopsis._flow import Flow
from synopsis.compaction.options import CompactionOptions
from synopsis.compaction.plan import CompactionPlan, plan_compaction
from synopsis.compaction.skills import preserve_skills
from synopsis.compaction.summary import finalize_summary
from synopsis.compaction.trigger import TriggerDecision
from synopsis.errors import CompactionError, ModelError, describe_error
from synopsis.events import AfterSummarize, BeforeSummarize, Event, SummarizeFailed
from synopsis.messages import content_type, text_of, validate_messages
from synopsis.models._base import Usage
from synopsis.summarizer import SummaryResult, strip_summary_wrapping
from synopsis.tokens import TokenCounter

__all__ = [
    "CompactionResult",
    "CompactionStep",
    "Emit",
    "Summarize",
    "SummarizeOffline",
    "WriteArchive",
    "build",
    "compaction",
    "decide",
    "summarizer_input",
    "truncated",
]

_log = logging.getLogger("synopsis.compaction.compactor")

Messages = Sequence[Mapping[str, Any]]
#: A summary that could not get below the trigger is retried only after this much regrowth.
_MIN_REGROWTH = 0.10


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionResult:
    """What one compaction did. ``messages`` is always a new list."""

    messages: list[dict[str, Any]]
    triggered: bool
    compacted: bool
    reason: str | None
    tokens_before: int
    tokens_after: int
    model: str | None = None
    attempts: int = 0
    summary: str | None = None
    archive: str | None = None
    skipped: str | None = None
    fallback: str | None = None
    error: dict[str, Any] | None = None
    events: tuple[Event, ...] = field(default_factory=tuple)
    usage: Usage | None = None  # what the summary cost, summed over its calls
    calls: int = 0

    def report(self) -> dict[str, Any]:
        """A JSON-ready summary of the result (without the messages)."""
        return {
            "triggered": self.triggered,
            "compacted": self.compacted,
            "reason": self.reason,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "model": self.model,
            "attempts": self.attempts,
            "archive": self.archive,
            "skipped": self.skipped,
            "fallback": self.fallback,
            "error": self.error,
            "usage": self.usage.as_dict() if self.usage else None,
            "calls": self.calls,
        }


# -- steps: what a driver carries out ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Summarize:
    """Summarize ``context`` with the configured summarizer (retries, failover); the result
    is a :class:`SummaryResult`, or the :class:`ModelError` is thrown back."""

    context: tuple[Mapping[str, Any], ...]
    previous_summary: str | None
    session_id: str | None


@dataclass(frozen=True, slots=True)
class SummarizeOffline:
    """Every model failed and the fallback is extractive: summarize with the offline model."""

    context: tuple[Mapping[str, Any], ...]
    previous_summary: str | None


@dataclass(frozen=True, slots=True)
class WriteArchive:
    """Archive the replaced messages; the result is where they went (a path or URI)."""

    messages: tuple[Mapping[str, Any], ...]
    session_id: str | None


@dataclass(frozen=True, slots=True)
class Emit:
    """Deliver ``event`` to the ``on_event`` handlers."""

    event: Event


CompactionStep = Summarize | SummarizeOffline | WriteArchive | Emit


# -- deciding ---------------------------------------------------------------------------------


def decide(
    options: CompactionOptions,
    counter: TokenCounter,
    messages: Messages,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[int, TriggerDecision]:
    """Count tokens (baseline + increment) and evaluate the trigger. O(new messages)."""
    tokens = counter.count(messages, tools=tools).total
    decision = options.trigger.evaluate(tokens, len(messages))
    if decision.fired and _regrowth_guard(options, messages, tokens):
        decision = options.trigger.evaluate(0, 0)
    return tokens, decision


def _regrowth_guard(options: CompactionOptions, messages: Messages, tokens: int) -> bool:
    """True when the newest summary could not get below the trigger and the history has not
    grown enough since to make another try worth a model call."""
    for message in reversed(messages):
        if content_type(message) != "summary":
            continue
        after = (message.get("meta") or {}).get("tokens_after")
        limit = options.trigger.threshold_tokens()
        if not isinstance(after, int) or limit is None or after <= limit:
            return False
        return tokens - after < _MIN_REGROWTH * limit
    return False


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

    def unchanged(
        self,
        *,
        skipped: str | None = None,
        error: dict[str, Any] | None = None,
        events: Sequence[Event] = (),
    ) -> CompactionResult:
        return _unchanged(
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
            usage=summary.usage if summary else None,
            calls=summary.calls if summary else 0,
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
    tokens, decision = decide(options, counter, messages, tools)
    if not (force or decision.fired):
        return _unchanged(messages, tokens, reason=None, triggered=False)
    run = _Run(
        options=options,
        counter=counter,
        messages=messages,
        tokens=tokens,
        reason=decision.reason or reason,
        triggered=decision.fired,
    )
    return (yield from _compact(run))


def _compact(run: _Run) -> Flow[CompactionStep, CompactionResult]:
    validate_messages(list(run.messages))
    plan = plan_compaction(
        run.messages,
        keep_tail=run.options.keep_tail,
        estimate=run.counter.estimate,
        min_new_messages=run.options.min_new_messages,
    )
    if not plan.worthwhile:
        return run.unchanged(skipped=plan.skip_reason)
    events: list[Event] = []
    yield from _emit(events, _before(run))
    context, previous = summarizer_input(plan, run.options)
    try:
        summary: SummaryResult | None = yield Summarize(context, previous, run.options.session_id)
    except ModelError as exc:
        summary = yield from _degrade(run, exc, SummarizeOffline(context, previous), events)
        if summary is None and run.options.fallback != "truncate":
            return run.unchanged(error=describe_error(exc), events=events)
        return (yield from _finish(run, plan, summary, run.options.fallback, events))
    return (yield from _finish(run, plan, summary, None, events))


def summarizer_input(
    plan: CompactionPlan, options: CompactionOptions
) -> tuple[tuple[Mapping[str, Any], ...], str | None]:
    """What the summarizer reads, and the previous summary text (incremental mode)."""
    previous = plan.previous_summary
    if previous is None:
        return plan.to_summarize, None
    body = strip_summary_wrapping(text_of(previous), options.prompts)
    if options.incremental:
        return plan.to_summarize, body
    return ({"role": "user", "content": body}, *plan.to_summarize), None


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
    """Archive the replaced part, build the new history, report ``after_summarize``."""
    archive: str | None = None
    try:
        if run.options.archive is not None:
            archive = yield WriteArchive(plan.replaced, run.options.session_id)
    except CompactionError as exc:
        return run.unchanged(error=describe_error(exc), events=events)
    if summary is None:
        new = truncated(plan, archive)
    else:
        new = build(run.options, run.counter, plan, summary, archive=archive, tokens=run.tokens)
    after = run.counter.count(new).total
    if summary is not None:
        yield from _emit(events, _after(run, summary, new, after, archive))
    return run.compacted(new, after, summary, archive=archive, fallback=fallback, events=events)


def _emit(events: list[Event], event: Event) -> Flow[CompactionStep, None]:
    events.append(event)
    yield Emit(event)


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


# -- building the new history -----------------------------------------------------------------


def build(
    options: CompactionOptions,
    counter: TokenCounter,
    plan: CompactionPlan,
    summary: SummaryResult,
    *,
    archive: str | None,
    tokens: int,
) -> list[dict[str, Any]]:
    """``[system] + [skills] + [summary] + [tail]`` with the summary's meta filled in."""
    message = _summary_message(options, counter, plan, summary, archive=archive, tokens=tokens)
    skills = None
    if options.skills is not None:
        skills = preserve_skills(
            plan.replaced, options.skills, estimate=counter.estimate_text, prompts=options.prompts
        )
    new = [dict(m) for m in plan.system] + ([skills] if skills else [])
    new += [message, *(_without_stale_usage(m) for m in plan.tail)]
    message["meta"]["tokens_after"] = counter.count(new).total
    message["meta"]["messages_after"] = len(new)
    return new


def _summary_message(
    options: CompactionOptions,
    counter: TokenCounter,
    plan: CompactionPlan,
    summary: SummaryResult,
    *,
    archive: str | None,
    tokens: int,
) -> dict[str, Any]:
    meta = {
        "version": _previous_version(plan) + 1,
        "model": summary.model,
        "kept_tail": len(plan.tail),
        "replaced_messages": len(plan.replaced),
        "tokens_before": tokens,
    }
    return finalize_summary(
        summary.text,
        context_messages=plan.replaced,
        prompts=options.prompts,
        estimate=counter.estimate_text,
        user_budget_tokens=options.user_budget,
        transcript_path=archive or options.transcript_path,
        extra_meta=meta,
    )


def _previous_version(plan: CompactionPlan) -> int:
    version = ((plan.previous_summary or {}).get("meta") or {}).get("version")
    return version if isinstance(version, int) else 0


def truncated(plan: CompactionPlan, archive: str | None) -> list[dict[str, Any]]:
    """The degraded history: the replaced part dropped (archived), a notice in its place."""
    where = f" They are archived at {archive}." if archive else ""
    notice = {
        "role": "user",
        "content": f"[{len(plan.replaced)} earlier messages were removed to fit the "
        f"context window.{where}]",
        "meta": {"content_type": "reminder", "truncated": len(plan.replaced)},
    }
    return [dict(m) for m in plan.system] + [notice, *map(_without_stale_usage, plan.tail)]


def _without_stale_usage(message: Mapping[str, Any]) -> dict[str, Any]:
    """A kept message without ``usage``: its number measured the old, longer prompt and
    would make the next count think nothing was removed."""
    return {k: v for k, v in message.items() if k != "usage"}


def _unchanged(
    messages: Messages,
    tokens: int,
    *,
    reason: str | None,
    triggered: bool,
    skipped: str | None = None,
    error: dict[str, Any] | None = None,
    events: tuple[Event, ...] = (),
) -> CompactionResult:
    return CompactionResult(
        messages=[m if isinstance(m, dict) else dict(m) for m in messages],
        triggered=triggered,
        compacted=False,
        reason=reason,
        tokens_before=tokens,
        tokens_after=tokens,
        skipped=skipped,
        error=error,
        fallback="keep" if error else None,
        events=events,
    )
