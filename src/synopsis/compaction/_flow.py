"""One compaction, written once: a pure generator of steps that both compactors drive.

:func:`compaction` decides (count + trigger, with the regrowth guard), validates, plans
(emitting ``compaction_skipped`` when there is nothing worth summarizing), emits
``before_summarize``, asks for a summary, degrades on :class:`ModelError` (extractive, truncate
or keep) and emits ``summarize_failed``, archives what leaves the history, builds the new
history and emits ``after_summarize``. It does no I/O: the summarizer call, the archive write
and event delivery are steps (:class:`Summarize`, :class:`SummarizeOffline`,
:class:`WriteArchive`, :class:`Emit`) that a driver performs, synchronously or awaiting, so
both compactors deliver the same events in the same order (see :mod:`synopsis._flow`).

The new history is ``[leading system messages] + [preserved skills] + [summary] + [tail]``,
always a new list; the caller's history is never mutated. It is sendable as it is: messages
carry only the keys of the input's message schema (a legacy ``meta`` marker moves into the
text, see :func:`synopsis.messages.without_meta`), and the facts of a compaction live in the
summary's marker and in the :class:`CompactionResult`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from synopsis._flow import Flow
from synopsis.compaction._events import CompactionEvent, CompactionSkipped
from synopsis.compaction.options import CompactionOptions
from synopsis.compaction.plan import CompactionPlan, Truncation, plan_compaction, plan_truncation
from synopsis.compaction.skills import preserve_skills
from synopsis.compaction.summary import (
    NOTICE_KIND,
    SUMMARY_KIND,
    collect_user_messages,
    finalize_summary,
    user_messages_block,
)
from synopsis.compaction.trigger import TriggerDecision
from synopsis.errors import CompactionError, ModelError, describe_error
from synopsis.events import AfterSummarize, BeforeSummarize, SummarizeFailed
from synopsis.messages import mark, marked_body, marker_of, without_meta
from synopsis.models._base import Usage
from synopsis.summarizer import SummaryResult, strip_summary_wrapping
from synopsis.tokens import TokenCounter
from synopsis.validation import require_mappings, validate_messages

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
#: The truncation fallback keeps at most this share of the trigger's limit (or of the history,
#: if that is smaller), so the very next call does not trigger again.
_TRUNCATE_TO = 0.5


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
    events: tuple[CompactionEvent, ...] = field(default_factory=tuple)
    version: int | None = None
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
            "version": self.version,
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

    event: CompactionEvent


CompactionStep = Summarize | SummarizeOffline | WriteArchive | Emit


# -- deciding ---------------------------------------------------------------------------------


def decide(
    options: CompactionOptions,
    counter: TokenCounter,
    messages: Messages,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[int, TriggerDecision]:
    """Count tokens (baseline + increment) and evaluate the trigger. O(new messages)."""
    require_mappings(messages)
    tokens = counter.count(messages, tools=tools).total
    decision = options.trigger.evaluate(tokens, len(messages))
    if decision.fired and _regrowth_guard(options, messages, tokens):
        decision = options.trigger.evaluate(0, 0)
    return tokens, decision


def _regrowth_guard(options: CompactionOptions, messages: Messages, tokens: int) -> bool:
    """True when the newest summary could not get below the trigger and the history has not
    grown enough since to make another try worth a model call."""
    for message in reversed(messages):
        marker = marker_of(message)
        if marker is None or marker.kind != SUMMARY_KIND:
            continue
        after = marker.integer("tokens_after")
        limit = options.trigger.threshold_tokens()
        if after is None or limit is None or after <= limit:
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
        events: Sequence[CompactionEvent] = (),
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
        events: Sequence[CompactionEvent],
        version: int | None = None,
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
    events: list[CompactionEvent] = []
    if not plan.worthwhile:
        yield from _emit(events, _skipped(run, plan.skip_reason or "nothing to summarize"))
        return run.unchanged(skipped=plan.skip_reason, events=events)
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
    body = strip_summary_wrapping(marked_body(previous), options.prompts)
    if options.incremental:
        return plan.to_summarize, body
    return ({"role": "user", "content": body}, *plan.to_summarize), None


def _degrade(
    run: _Run, exc: ModelError, offline: SummarizeOffline, events: list[CompactionEvent]
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
    events: list[CompactionEvent],
) -> Flow[CompactionStep, CompactionResult]:
    """Archive what leaves the history, build the new history, report ``after_summarize``."""
    if summary is None:
        return (yield from _truncate(run, plan, events))
    try:
        archive = yield from _write_archive(run, plan.replaced)
    except CompactionError as exc:
        return run.unchanged(error=describe_error(exc), events=events)
    version = _previous_version(plan) + 1
    new = build(run.options, run.counter, plan, summary, archive=archive)
    after = run.counter.count(new).total
    yield from _emit(events, _after(run, summary, new, after, archive))
    return run.compacted(
        new, after, summary, archive=archive, fallback=fallback, events=events, version=version
    )


def _truncate(
    run: _Run, plan: CompactionPlan, events: list[CompactionEvent]
) -> Flow[CompactionStep, CompactionResult]:
    """The truncation fallback: archive the messages it drops, then build without them."""
    truncation = _truncation(run, plan)
    if not truncation.dropped:
        nothing = CompactionError("the truncation fallback found nothing it may drop")
        return run.unchanged(error=describe_error(nothing), events=events)
    try:
        archive = yield from _write_archive(run, truncation.dropped)
    except CompactionError as exc:
        return run.unchanged(error=describe_error(exc), events=events)
    new = truncated(run.options, run.counter, plan, truncation, archive)
    after = run.counter.count(new).total
    return run.compacted(new, after, None, archive=archive, fallback="truncate", events=events)


def _write_archive(
    run: _Run, messages: Sequence[Mapping[str, Any]]
) -> Flow[CompactionStep, str | None]:
    if run.options.archive is None:
        return None
    where: str = yield WriteArchive(tuple(messages), run.options.session_id)
    return where


def _emit(events: list[CompactionEvent], event: CompactionEvent) -> Flow[CompactionStep, None]:
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
) -> list[dict[str, Any]]:
    """``[system] + [skills] + [summary] + [tail]``. The summary's marker carries its version
    and the tokens just after it (which the regrowth guard reads on later calls)."""
    message = _summary_message(options, counter, plan, summary, archive=archive)
    skills = None
    if options.skills is not None:
        skills = preserve_skills(
            plan.replaced, options.skills, estimate=counter.estimate_text, prompts=options.prompts
        )
    new = [*map(_kept_system, plan.system), *([skills] if skills else [])]
    new += [message, *map(_kept, plan.tail)]
    marker = marker_of(message)
    attributes = {**(marker.attributes if marker else {}), "tokens_after": counter.count(new).total}
    body = marked_body(message, unescape=False)
    message["content"] = mark(SUMMARY_KIND, body, attributes, raw=True)
    return new


def _summary_message(
    options: CompactionOptions,
    counter: TokenCounter,
    plan: CompactionPlan,
    summary: SummaryResult,
    *,
    archive: str | None,
) -> dict[str, Any]:
    return finalize_summary(
        summary.text,
        context_messages=plan.replaced,
        prompts=options.prompts,
        estimate=counter.estimate_text,
        user_budget_tokens=options.user_budget,
        transcript_path=archive or options.transcript_path,
        extra_meta={"version": _previous_version(plan) + 1},
    )


def _previous_version(plan: CompactionPlan) -> int:
    marker = marker_of(plan.previous_summary) if plan.previous_summary is not None else None
    version = marker.integer("version") if marker is not None else None
    return version or 0


def _truncation(run: _Run, plan: CompactionPlan) -> Truncation:
    """What the truncation fallback drops: the oldest unprotected messages, until the history
    is at most half the trigger's limit (or half its size, if smaller), messages and tokens."""
    estimate, trigger = run.counter.estimate, run.options.trigger
    total = sum(estimate(m) for m in run.messages)
    limit = trigger.threshold_tokens()
    max_messages = None
    if trigger.messages:
        max_messages = int(min(len(run.messages), trigger.messages) * _TRUNCATE_TO)
    # The notice's quotes of the user's words are not reserved: each stands for a dropped
    # message at most its size, so the result stays well below the limit all the same.
    reserved = _fallback_messages(run.options, run.counter, plan.replaced, quote=False)
    return plan_truncation(
        plan,
        estimate=estimate,
        max_tokens=int(min(total, total if limit is None else limit) * _TRUNCATE_TO),
        max_messages=max_messages,
        reserved_tokens=sum(estimate(m) for m in reserved),
        reserved_messages=len(reserved),
    )


def truncated(
    options: CompactionOptions,
    counter: TokenCounter,
    plan: CompactionPlan,
    truncation: Truncation,
    archive: str | None,
) -> list[dict[str, Any]]:
    """The degraded history: ``[system] + [skills] + [previous summary] + [notice] + [kept] +
    [tail]``. The notice says how many messages went and where they are archived, and quotes
    what the user said in them; the skills loaded in them are preserved."""
    messages = _fallback_messages(options, counter, truncation.dropped, archive=archive)
    previous = [m for m in truncation.kept if m is plan.previous_summary]
    rest = [m for m in truncation.kept if m is not plan.previous_summary]
    skills, notice = messages[:-1], messages[-1]
    head = [*map(_kept_system, plan.system), *skills, *map(_kept, previous), notice]
    return [*head, *map(_kept, rest), *map(_kept, plan.tail)]


def _fallback_messages(
    options: CompactionOptions,
    counter: TokenCounter,
    dropped: Sequence[Mapping[str, Any]],
    *,
    archive: str | None = None,
    quote: bool = True,
) -> list[dict[str, Any]]:
    """The preserved-skills message (if any skill was loaded) and the notice, for ``dropped``."""
    skills = None
    if options.skills is not None:
        skills = preserve_skills(
            dropped, options.skills, estimate=counter.estimate_text, prompts=options.prompts
        )
    where = f" They are archived at {archive}." if archive else ""
    text = f"[{len(dropped)} earlier messages were removed to fit the context window.{where}]"
    block = user_messages_block(
        collect_user_messages(dropped) if quote else [],
        budget_tokens=options.user_budget,
        estimate=counter.estimate_text,
        prompts=options.prompts,
    )
    if block:
        text += "\n\nWhat the user said in them:\n" + block
    notice = {"role": "user", "content": mark(NOTICE_KIND, text, {"dropped": len(dropped)})}
    return [*([skills] if skills else []), notice]


def _kept_system(message: Mapping[str, Any]) -> dict[str, Any]:
    return dict(without_meta(message))


def _kept(message: Mapping[str, Any]) -> dict[str, Any]:
    """A kept message as it is sent: without a legacy ``meta``, and without ``usage``: its
    number measured the old, longer prompt and would make the next count think nothing was
    removed."""
    return {k: v for k, v in without_meta(message).items() if k != "usage"}


def _unchanged(
    messages: Messages,
    tokens: int,
    *,
    reason: str | None,
    triggered: bool,
    skipped: str | None = None,
    error: dict[str, Any] | None = None,
    events: tuple[CompactionEvent, ...] = (),
) -> CompactionResult:
    return CompactionResult(
        messages=[without_meta(m) for m in messages],
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
