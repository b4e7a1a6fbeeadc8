"""In-place compaction: before a model call, replace old history with one structured summary.

``Compactor`` (sync) and ``AsyncCompactor`` share one pure core. Use either as a before-model
hook (``messages = compactor(messages)``), call ``compact()`` on demand, or wrap a model in
:class:`CompactingModel` to also compact and retry when the provider says the context is too
long. The result is ``[leading system messages] + [preserved skills] + [summary] + [tail]``,
always a new list; the caller's history is never mutated. When summarizing fails the history
comes back unchanged (or degraded as configured), an event says why, and the agent goes on.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from synopsis.compaction.archive import Archive, JsonlArchive
from synopsis.compaction.plan import CompactionPlan, KeepTail, plan_compaction
from synopsis.compaction.skills import SkillConfig, preserve_skills
from synopsis.compaction.summary import DEFAULT_USER_MESSAGES_BUDGET, finalize_summary
from synopsis.compaction.trigger import Trigger, TriggerDecision
from synopsis.errors import (
    CompactionError,
    ConfigError,
    ContextLengthExceeded,
    ModelError,
    describe_error,
)
from synopsis.events import (
    AfterSummarize,
    BeforeSummarize,
    Event,
    EventHandler,
    SummarizeFailed,
    aemit,
    check_sync_handlers,
    emit,
)
from synopsis.messages import content_type, text_of, validate_messages
from synopsis.models._base import ModelResponse, ModelSettings
from synopsis.models.retry import Cooldown, RetryPolicy
from synopsis.prompts import PromptSet, prompt_set
from synopsis.summarizer import AsyncSummarizer, Summarizer, SummaryResult, strip_summary_wrapping
from synopsis.tokens import TokenCounter

__all__ = [
    "AsyncCompactingModel",
    "AsyncCompactor",
    "CompactingModel",
    "CompactionResult",
    "Compactor",
    "Fallback",
]

_log = logging.getLogger("synopsis.compaction.compactor")

#: What to do when every model failed: keep the history as it is, summarize it with the
#: offline extractive summarizer, or drop the oldest messages (they are archived first).
Fallback = Literal["keep", "extractive", "truncate"]
_MIN_REGROWTH = 0.10
_DEFAULT_SKILLS = SkillConfig()


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
        }


def _coerce_trigger(
    trigger: Trigger | None,
    tokens: int | None,
    messages: int | None,
    fraction: float | None,
    context_window: int | None,
    reserve_output: int,
) -> Trigger:
    if trigger is not None:
        if any(v is not None for v in (tokens, messages, fraction)):
            raise ConfigError("pass either trigger= or trigger_* options, not both")
        return trigger
    if tokens is None and messages is None and fraction is None:
        return Trigger.default()
    return Trigger(
        tokens=tokens,
        messages=messages,
        fraction=fraction,
        context_window=context_window,
        reserve_output=reserve_output,
    )


def _coerce_archive(archive: Archive | str | None) -> Archive | None:
    if archive is None or not isinstance(archive, str):
        return archive
    return JsonlArchive(archive)


class _CompactorCore:
    """Configuration and the pure steps shared by both compactors."""

    def __init__(
        self,
        *,
        trigger: Trigger,
        keep_tail: KeepTail | int | None,
        counter: TokenCounter,
        prompts: PromptSet,
        user_budget: int,
        skills: SkillConfig | None,
        incremental: bool,
        archive: Archive | None,
        transcript_path: str | None,
        fallback: Fallback,
        min_new_messages: int,
        on_event: Sequence[EventHandler],
    ) -> None:
        if fallback not in ("keep", "extractive", "truncate"):
            raise ConfigError(f"fallback must be keep, extractive or truncate, not {fallback!r}")
        if user_budget < 0:
            raise ConfigError("user_budget must be >= 0")
        self.trigger = trigger
        self.keep_tail = KeepTail.coerce(keep_tail)
        self.counter = counter
        self.prompts = prompts
        self.user_budget = user_budget
        self.skills = skills
        self.incremental = incremental
        self.archive = archive
        self.transcript_path = transcript_path
        self.fallback: Fallback = fallback
        self.min_new_messages = min_new_messages
        self.on_event = tuple(on_event)

    # -- deciding -----------------------------------------------------------------------------

    def decide(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
    ) -> tuple[int, TriggerDecision]:
        """Count tokens (baseline + increment) and evaluate the trigger. O(new messages)."""
        count = self.counter.count(messages, tools=tools)
        decision = self.trigger.evaluate(count.total, len(messages))
        if decision.fired and self._regrowth_guard(messages, count.total):
            decision = self.trigger.evaluate(0, 0)
        return count.total, decision

    def _regrowth_guard(self, messages: Sequence[Mapping[str, Any]], tokens: int) -> bool:
        """True when the newest summary could not get below the trigger and the history has
        not grown enough since to make another try worth a model call."""
        for message in reversed(messages):
            if content_type(message) != "summary":
                continue
            meta = message.get("meta") or {}
            after = meta.get("tokens_after")
            limit = self.trigger.threshold_tokens()
            if not isinstance(after, int) or limit is None or after <= limit:
                return False
            return tokens - after < _MIN_REGROWTH * limit
        return False

    def plan(self, messages: Sequence[Mapping[str, Any]]) -> CompactionPlan:
        return plan_compaction(
            messages,
            keep_tail=self.keep_tail,
            estimate=self.counter.estimate,
            min_new_messages=self.min_new_messages,
        )

    def summarizer_input(self, plan: CompactionPlan) -> tuple[list[Mapping[str, Any]], str | None]:
        """What the summarizer reads, and the previous summary text (incremental mode)."""
        previous = plan.previous_summary
        if previous is None:
            return list(plan.to_summarize), None
        body = strip_summary_wrapping(text_of(previous), self.prompts)
        if self.incremental:
            return list(plan.to_summarize), body
        return [{"role": "user", "content": body}, *plan.to_summarize], None

    # -- building ---------------------------------------------------------------------------

    def build(
        self,
        messages: Sequence[Mapping[str, Any]],
        plan: CompactionPlan,
        summary: SummaryResult,
        archive: str | None,
        tokens_before: int,
    ) -> list[dict[str, Any]]:
        """``[system] + [skills] + [summary] + [tail]`` with the summary's meta filled in."""
        version = self._previous_version(plan) + 1
        meta = {
            "version": version,
            "model": summary.model,
            "kept_tail": len(plan.tail),
            "replaced_messages": len(plan.replaced),
            "tokens_before": tokens_before,
        }
        summary_message = finalize_summary(
            summary.text,
            context_messages=plan.replaced,
            prompts=self.prompts,
            estimate=self.counter.estimate_text,
            user_budget_tokens=self.user_budget,
            transcript_path=archive or self.transcript_path,
            extra_meta=meta,
        )
        skills = None
        if self.skills is not None:
            skills = preserve_skills(
                plan.replaced,
                self.skills,
                estimate=self.counter.estimate_text,
                prompts=self.prompts,
            )
        tail = [_without_stale_usage(m) for m in plan.tail]
        new = [dict(m) for m in plan.system] + ([skills] if skills else [])
        new += [summary_message, *tail]
        summary_message["meta"]["tokens_after"] = self.counter.count(new).total
        summary_message["meta"]["messages_after"] = len(new)
        return new

    @staticmethod
    def _previous_version(plan: CompactionPlan) -> int:
        meta = (plan.previous_summary or {}).get("meta") or {}
        version = meta.get("version")
        return version if isinstance(version, int) else 0

    def truncated(self, plan: CompactionPlan, archive: str | None) -> list[dict[str, Any]]:
        """The degraded history: the replaced part dropped (archived), a notice in its place."""
        where = f" They are archived at {archive}." if archive else ""
        notice = {
            "role": "user",
            "content": f"[{len(plan.replaced)} earlier messages were removed to fit the "
            f"context window.{where}]",
            "meta": {"content_type": "reminder", "truncated": len(plan.replaced)},
        }
        tail = [_without_stale_usage(m) for m in plan.tail]
        return [dict(m) for m in plan.system] + [notice, *tail]

    def unchanged(
        self,
        messages: Sequence[Mapping[str, Any]],
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


def _without_stale_usage(message: Mapping[str, Any]) -> dict[str, Any]:
    """A kept message without ``usage``: its number measured the old, longer prompt and
    would make the next count think nothing was removed."""
    return {k: v for k, v in message.items() if k != "usage"}


def _common_options(
    *,
    trigger: Trigger | None,
    trigger_tokens: int | None,
    trigger_messages: int | None,
    trigger_fraction: float | None,
    context_window: int | None,
    reserve_output: int,
    counter: TokenCounter | str,
    prompts: PromptSet | str,
    archive: Archive | str | None,
) -> dict[str, Any]:
    return {
        "trigger": _coerce_trigger(
            trigger,
            trigger_tokens,
            trigger_messages,
            trigger_fraction,
            context_window,
            reserve_output,
        ),
        "counter": TokenCounter(estimator=counter) if isinstance(counter, str) else counter,
        "prompts": prompt_set(prompts) if isinstance(prompts, str) else prompts,
        "archive": _coerce_archive(archive),
    }


class Compactor(_CompactorCore):
    """Synchronous in-place compaction. See the module docstring.

    The trigger fires when ``trigger_tokens`` or ``trigger_messages`` is exceeded, or tokens
    pass ``trigger_fraction`` of ``context_window`` minus ``reserve_output``; 0 or None turns a
    clause off, and with nothing set the default is 160,000 tokens.
    """

    def __init__(
        self,
        *,
        model: Any = "extractive",
        failover: Sequence[Any] = (),
        summarizer: Summarizer | None = None,
        trigger: Trigger | None = None,
        trigger_tokens: int | None = None,
        trigger_messages: int | None = None,
        trigger_fraction: float | None = None,
        context_window: int | None = None,
        reserve_output: int = 0,
        keep_tail: KeepTail | int | None = None,
        counter: TokenCounter | str = "default",
        prompts: PromptSet | str = "en",
        user_budget: int = DEFAULT_USER_MESSAGES_BUDGET,
        skills: SkillConfig | None = _DEFAULT_SKILLS,
        incremental: bool = True,
        archive: Archive | str | None = None,
        transcript_path: str | None = None,
        fallback: Fallback = "keep",
        min_new_messages: int = 1,
        retry: RetryPolicy | None = None,
        cooldown: Cooldown | None = None,
        summarizer_window: int | None = None,
        on_event: Sequence[EventHandler] = (),
        session_id: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        check_sync_handlers(on_event)
        options = _common_options(
            trigger=trigger,
            trigger_tokens=trigger_tokens,
            trigger_messages=trigger_messages,
            trigger_fraction=trigger_fraction,
            context_window=context_window,
            reserve_output=reserve_output,
            counter=counter,
            prompts=prompts,
            archive=archive,
        )
        super().__init__(
            keep_tail=keep_tail,
            user_budget=user_budget,
            skills=skills,
            incremental=incremental,
            transcript_path=transcript_path,
            fallback=fallback,
            min_new_messages=min_new_messages,
            on_event=on_event,
            **options,
        )
        self.session_id = session_id
        self.summarizer = summarizer or Summarizer(
            model=model,
            failover=failover,
            retry=retry,
            cooldown=cooldown,
            prompts=self.prompts,
            counter=self.counter,
            window=summarizer_window,
            on_event=on_event,
            sleep=sleep,
            rng=rng,
        )
        self._extractive: Summarizer | None = None

    def __call__(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """The before-model hook: the history to send, compacted if the trigger fired."""
        return self.before_model(messages, tools=tools)

    def before_model(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """Compact when the trigger fires; otherwise return a new list of the same messages."""
        tokens, decision = self.decide(messages, tools)
        if not decision.fired:
            return [dict(m) if not isinstance(m, dict) else m for m in messages]
        return self._run(messages, tokens, decision.reason or "tokens", True).messages

    def should_compact(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> TriggerDecision:
        return self.decide(messages, tools)[1]

    def compact(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        force: bool = True,
        reason: str = "manual",
    ) -> CompactionResult:
        """Compact on demand (``force=True``, the default) or only if the trigger fires."""
        tokens, decision = self.decide(messages, tools)
        if not (force or decision.fired):
            return self.unchanged(messages, tokens, reason=None, triggered=False)
        return self._run(messages, tokens, decision.reason or reason, decision.fired)

    def _run(
        self, messages: Sequence[Mapping[str, Any]], tokens: int, reason: str, triggered: bool
    ) -> CompactionResult:
        validate_messages(list(messages))
        plan = self.plan(messages)
        if not plan.worthwhile:
            return self.unchanged(
                messages, tokens, reason=reason, triggered=triggered, skipped=plan.skip_reason
            )
        events: list[Event] = []
        self._emit(
            events,
            BeforeSummarize(
                reason=reason,
                tokens=tokens,
                message_count=len(messages),
                session_id=self.session_id,
            ),
        )
        context, previous = self.summarizer_input(plan)
        try:
            summary: SummaryResult | None = self.summarizer.summarize(
                context, previous_summary=previous, session_id=self.session_id
            )
            fallback = None
        except ModelError as exc:
            summary, fallback = self._degrade(exc, context, previous, reason, events)
            if summary is None and fallback != "truncate":
                return self.unchanged(
                    messages,
                    tokens,
                    reason=reason,
                    triggered=triggered,
                    error=describe_error(exc),
                    events=tuple(events),
                )
        return self._finish(messages, plan, summary, fallback, tokens, reason, triggered, events)

    def _degrade(
        self,
        exc: ModelError,
        context: list[Mapping[str, Any]],
        previous: str | None,
        reason: str,
        events: list[Event],
    ) -> tuple[SummaryResult | None, str | None]:
        _log.warning("summarization failed (%s); fallback=%s", exc, self.fallback)
        summary = None
        if self.fallback == "extractive":
            self._extractive = self._extractive or Summarizer(
                model="extractive", prompts=self.prompts, counter=self.counter
            )
            summary = self._extractive.summarize(context, previous_summary=previous)
        self._emit(
            events,
            SummarizeFailed(
                reason=reason,
                error=describe_error(exc),
                attempts=len(getattr(exc, "exceptions", ())) or 1,
                fallback=self.fallback,
                session_id=self.session_id,
            ),
        )
        return summary, self.fallback

    def _finish(
        self,
        messages: Sequence[Mapping[str, Any]],
        plan: CompactionPlan,
        summary: SummaryResult | None,
        fallback: str | None,
        tokens: int,
        reason: str,
        triggered: bool,
        events: list[Event],
    ) -> CompactionResult:
        try:
            archive = (
                self.archive.write(plan.replaced, session_id=self.session_id)
                if self.archive
                else None
            )
        except CompactionError as exc:
            return self.unchanged(
                messages,
                tokens,
                reason=reason,
                triggered=triggered,
                error=describe_error(exc),
                events=tuple(events),
            )
        if summary is None:
            new = self.truncated(plan, archive)
        else:
            new = self.build(messages, plan, summary, archive, tokens)
        after = self.counter.count(new).total
        if summary is not None:
            self._emit(
                events,
                AfterSummarize(
                    reason=reason,
                    tokens_before=tokens,
                    tokens_after=after,
                    messages_before=len(messages),
                    messages_after=len(new),
                    model=summary.model,
                    attempts=summary.attempts,
                    archive=archive,
                    session_id=self.session_id,
                ),
            )
        return CompactionResult(
            messages=new,
            triggered=triggered,
            compacted=True,
            reason=reason,
            tokens_before=tokens,
            tokens_after=after,
            model=summary.model if summary else None,
            attempts=summary.attempts if summary else 0,
            summary=summary.text if summary else None,
            archive=archive,
            fallback=fallback,
            events=tuple(events),
        )

    def _emit(self, events: list[Event], event: Event) -> None:
        events.append(event)
        emit(self.on_event, event)


class AsyncCompactor(_CompactorCore):
    """The async twin of :class:`Compactor`: same options; ``await compactor(messages)``."""

    def __init__(
        self,
        *,
        model: Any = "extractive",
        failover: Sequence[Any] = (),
        summarizer: AsyncSummarizer | None = None,
        trigger: Trigger | None = None,
        trigger_tokens: int | None = None,
        trigger_messages: int | None = None,
        trigger_fraction: float | None = None,
        context_window: int | None = None,
        reserve_output: int = 0,
        keep_tail: KeepTail | int | None = None,
        counter: TokenCounter | str = "default",
        prompts: PromptSet | str = "en",
        user_budget: int = DEFAULT_USER_MESSAGES_BUDGET,
        skills: SkillConfig | None = _DEFAULT_SKILLS,
        incremental: bool = True,
        archive: Archive | str | None = None,
        transcript_path: str | None = None,
        fallback: Fallback = "keep",
        min_new_messages: int = 1,
        retry: RetryPolicy | None = None,
        cooldown: Cooldown | None = None,
        summarizer_window: int | None = None,
        on_event: Sequence[EventHandler] = (),
        session_id: str | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        options = _common_options(
            trigger=trigger,
            trigger_tokens=trigger_tokens,
            trigger_messages=trigger_messages,
            trigger_fraction=trigger_fraction,
            context_window=context_window,
            reserve_output=reserve_output,
            counter=counter,
            prompts=prompts,
            archive=archive,
        )
        super().__init__(
            keep_tail=keep_tail,
            user_budget=user_budget,
            skills=skills,
            incremental=incremental,
            transcript_path=transcript_path,
            fallback=fallback,
            min_new_messages=min_new_messages,
            on_event=on_event,
            **options,
        )
        self.session_id = session_id
        self.summarizer = summarizer or AsyncSummarizer(
            model=model,
            failover=failover,
            retry=retry,
            cooldown=cooldown,
            prompts=self.prompts,
            counter=self.counter,
            window=summarizer_window,
            on_event=on_event,
            sleep=sleep,
            rng=rng,
        )
        self._extractive: AsyncSummarizer | None = None

    async def __call__(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        return await self.before_model(messages, tools=tools)

    async def before_model(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        tokens, decision = self.decide(messages, tools)
        if not decision.fired:
            return [dict(m) if not isinstance(m, dict) else m for m in messages]
        return (await self._run(messages, tokens, decision.reason or "tokens", True)).messages

    def should_compact(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> TriggerDecision:
        return self.decide(messages, tools)[1]

    async def compact(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        force: bool = True,
        reason: str = "manual",
    ) -> CompactionResult:
        tokens, decision = self.decide(messages, tools)
        if not (force or decision.fired):
            return self.unchanged(messages, tokens, reason=None, triggered=False)
        return await self._run(messages, tokens, decision.reason or reason, decision.fired)

    async def _run(
        self, messages: Sequence[Mapping[str, Any]], tokens: int, reason: str, triggered: bool
    ) -> CompactionResult:
        validate_messages(list(messages))
        plan = self.plan(messages)
        if not plan.worthwhile:
            return self.unchanged(
                messages, tokens, reason=reason, triggered=triggered, skipped=plan.skip_reason
            )
        events: list[Event] = []
        await self._emit(
            events,
            BeforeSummarize(
                reason=reason,
                tokens=tokens,
                message_count=len(messages),
                session_id=self.session_id,
            ),
        )
        context, previous = self.summarizer_input(plan)
        try:
            summary: SummaryResult | None = await self.summarizer.summarize(
                context, previous_summary=previous, session_id=self.session_id
            )
            fallback = None
        except ModelError as exc:
            summary, fallback = await self._degrade(exc, context, previous, reason, events)
            if summary is None and fallback != "truncate":
                return self.unchanged(
                    messages,
                    tokens,
                    reason=reason,
                    triggered=triggered,
                    error=describe_error(exc),
                    events=tuple(events),
                )
        return await self._finish(
            messages, plan, summary, fallback, tokens, reason, triggered, events
        )

    async def _degrade(
        self,
        exc: ModelError,
        context: list[Mapping[str, Any]],
        previous: str | None,
        reason: str,
        events: list[Event],
    ) -> tuple[SummaryResult | None, str | None]:
        _log.warning("summarization failed (%s); fallback=%s", exc, self.fallback)
        summary = None
        if self.fallback == "extractive":
            self._extractive = self._extractive or AsyncSummarizer(
                model="extractive", prompts=self.prompts, counter=self.counter
            )
            summary = await self._extractive.summarize(context, previous_summary=previous)
        await self._emit(
            events,
            SummarizeFailed(
                reason=reason,
                error=describe_error(exc),
                attempts=len(getattr(exc, "exceptions", ())) or 1,
                fallback=self.fallback,
                session_id=self.session_id,
            ),
        )
        return summary, self.fallback

    async def _finish(
        self,
        messages: Sequence[Mapping[str, Any]],
        plan: CompactionPlan,
        summary: SummaryResult | None,
        fallback: str | None,
        tokens: int,
        reason: str,
        triggered: bool,
        events: list[Event],
    ) -> CompactionResult:
        try:
            archive = (
                await asyncio.to_thread(
                    self.archive.write, plan.replaced, session_id=self.session_id
                )
                if self.archive
                else None
            )
        except CompactionError as exc:
            return self.unchanged(
                messages,
                tokens,
                reason=reason,
                triggered=triggered,
                error=describe_error(exc),
                events=tuple(events),
            )
        new = (
            self.truncated(plan, archive)
            if summary is None
            else self.build(messages, plan, summary, archive, tokens)
        )
        after = self.counter.count(new).total
        if summary is not None:
            await self._emit(
                events,
                AfterSummarize(
                    reason=reason,
                    tokens_before=tokens,
                    tokens_after=after,
                    messages_before=len(messages),
                    messages_after=len(new),
                    model=summary.model,
                    attempts=summary.attempts,
                    archive=archive,
                    session_id=self.session_id,
                ),
            )
        return CompactionResult(
            messages=new,
            triggered=triggered,
            compacted=True,
            reason=reason,
            tokens_before=tokens,
            tokens_after=after,
            model=summary.model if summary else None,
            attempts=summary.attempts if summary else 0,
            summary=summary.text if summary else None,
            archive=archive,
            fallback=fallback,
            events=tuple(events),
        )

    async def _emit(self, events: list[Event], event: Event) -> None:
        events.append(event)
        await aemit(self.on_event, event)


class CompactingModel:
    """A model that compacts its input first, and once more if the provider still answers
    "context length exceeded". It satisfies the Model protocol, so it stacks with others."""

    def __init__(self, model: Any, compactor: Compactor) -> None:
        self.model = model
        self.compactor = compactor

    @property
    def name(self) -> str:
        return str(getattr(self.model, "name", "model"))

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        history = self.compactor(messages)
        try:
            return self.model.complete(history, settings=settings)  # type: ignore[no-any-return]
        except ContextLengthExceeded:
            result = self.compactor.compact(history, reason="overflow")
            if not result.compacted:
                raise
            return self.model.complete(result.messages, settings=settings)  # type: ignore[no-any-return]


class AsyncCompactingModel:
    """The async twin of :class:`CompactingModel`."""

    def __init__(self, model: Any, compactor: AsyncCompactor) -> None:
        self.model = model
        self.compactor = compactor

    @property
    def name(self) -> str:
        return str(getattr(self.model, "name", "model"))

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        history = await self.compactor(messages)
        try:
            return await self.model.complete(history, settings=settings)  # type: ignore[no-any-return]
        except ContextLengthExceeded:
            result = await self.compactor.compact(history, reason="overflow")
            if not result.compacted:
                raise
            return await self.model.complete(result.messages, settings=settings)  # type: ignore[no-any-return]
