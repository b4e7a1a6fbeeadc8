"""Building the new history of a compaction: pure functions of the plan and the summary.

:func:`build` makes ``[system] + [skills] + [summary] + [tail]``; :func:`truncation` decides
what the truncation fallback drops and :func:`truncated` builds its degraded history
``[system] + [skills] + [previous summary] + [notice] + [kept] + [tail]``. Kept messages go
out as they are sent: without a legacy ``meta`` key, and without a stale ``usage``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from synopsis.compaction.options import CompactionOptions
from synopsis.compaction.plan import CompactionPlan, Truncation, plan_truncation
from synopsis.compaction.skills import preserve_skills
from synopsis.compaction.summary import (
    NOTICE_KIND,
    SUMMARY_KIND,
    collect_user_messages,
    finalize_summary,
    user_messages_block,
)
from synopsis.messages import mark, marked_body, marker_of, without_meta
from synopsis.summarizer import SummaryResult
from synopsis.tokens import TokenCounter

__all__ = ["build", "previous_version", "truncated", "truncation"]

#: The truncation fallback keeps at most this share of the trigger's limit (or of the history,
#: if that is smaller), so the very next call does not trigger again.
_TRUNCATE_TO: Final = 0.5


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
            plan.replaced, options.skills, estimate=counter.estimate_text, prompts=options.texts
        )
    new = [*map(_kept_system, plan.system), *([skills] if skills else [])]
    new += [message, *map(_kept, plan.pinned), *map(_kept, plan.tail)]
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
        context_messages=plan.removed,  # the pinned message is in the context: not quoted
        prompts=options.texts,
        estimate=counter.estimate_text,
        user_budget_tokens=options.quote_budget,
        transcript_path=archive or options.transcript_path,
        extra_meta={"version": previous_version(plan) + 1},
        history_tool=options.history_tool if archive else None,
    )


def previous_version(plan: CompactionPlan) -> int:
    marker = marker_of(plan.previous_summary) if plan.previous_summary is not None else None
    version = marker.integer("version") if marker is not None else None
    return version or 0


def truncation(
    options: CompactionOptions,
    counter: TokenCounter,
    messages: Sequence[Mapping[str, Any]],
    plan: CompactionPlan,
) -> Truncation:
    """What the truncation fallback drops: the oldest unprotected messages, until the history
    is at most half the trigger's limit (or half its size, if smaller), messages and tokens."""
    estimate, trigger = counter.estimate, options.trigger
    total = sum(estimate(m) for m in messages)
    limit = trigger.threshold_tokens()
    max_messages = None
    if trigger.messages:
        max_messages = int(min(len(messages), trigger.messages) * _TRUNCATE_TO)
    # The notice's quotes of the user's words are not reserved: each stands for a dropped
    # message at most its size, so the result stays well below the limit all the same.
    reserved = _fallback_messages(options, counter, plan.replaced, quote=False)
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
            dropped, options.skills, estimate=counter.estimate_text, prompts=options.texts
        )
    where = f" They are archived at {archive}." if archive else ""
    if archive and options.history_tool:
        where += f" Call the `{options.history_tool}` tool to search them."
    text = f"[{len(dropped)} earlier messages were removed to fit the context window.{where}]"
    block = user_messages_block(
        collect_user_messages(dropped) if quote else [],
        budget_tokens=options.quote_budget,
        estimate=counter.estimate_text,
        prompts=options.texts,
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
