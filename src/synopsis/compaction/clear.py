"""Tier 1 of a compaction: clear old tool output before any summary is written.

Coding agents fill their context mostly with tool output (file reads, test logs, search
results) that is stale a few turns later. Replacing it with a short stub costs no model call
and loses little, since the full text is archived first; the summary (tier 2) then runs only
if the history is still over budget (see :mod:`synopsis.compaction._flow`).

:func:`plan_clearing` decides which tool results go: those before the kept tail (the same
tail :func:`~synopsis.compaction.plan.plan_compaction` keeps), except the ``keep_recent``
newest results, results of excluded tools and of the skill tool, results smaller than
``min_tokens``, and results already cleared. :func:`apply_clearing` puts a stub in each
one's place::

    <synopsis:cleared tokens="3412">
    [read_file output cleared (3412 tokens, archived at .synopsis/archive/s1.jsonl); run it
    again if needed]
    Facts kept from it (8 May, 2023):
    - Caroline: I signed up for a pottery class on Friday.
    </synopsis:cleared>

The stub keeps a digest of the output's facts (``ToolClearing.digest_tokens``, 0 for none):
its session date when it opens with one, and the whole sentences that carry names, numbers,
dates, decisions and errors, chosen by the extractive summarizer's own fact selection
(:func:`synopsis.models.extractive.fact_digest`) within the cap. No model is called, so a
fact survives clearing even when no summary is written. A summary that later replaces the
stub reads its facts (:func:`kept_facts`), never the stub.

A stub is marked in its text, so it is recognised after any framework conversion and never
cleared twice; it stays a ``tool`` message with its ``tool_call_id``, so no call loses its
result and the summarizer still reads the pair. System messages, user messages, internal
messages and the kept tail are never touched. With ``clear_arguments`` the arguments of the
calls whose results were cleared are replaced by :data:`CLEARED_ARGUMENTS` too.

:func:`offload_large_tool_result` applies the same stub to one result as it arrives (the
Eino "reduction" idea). It writes to the archive it is given; everything else here is pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from synopsis.compaction.plan import plan_compaction
from synopsis.messages import content_type, mark, marked_body, text_of, without_meta
from synopsis.models.extractive import fact_digest
from synopsis.tokens import MessageEstimator, TokenCounter

if TYPE_CHECKING:
    from synopsis.compaction.archive import Archive
    from synopsis.compaction.options import CompactionOptions

__all__ = [
    "CLEARED_ARGUMENTS",
    "CLEARED_KIND",
    "ClearingPlan",
    "apply_clearing",
    "cleared_stub",
    "clearing_is_enough",
    "is_cleared",
    "kept_facts",
    "offload_large_tool_result",
    "plan_clearing",
]

#: The marker kind of a cleared tool result.
CLEARED_KIND: Final = "cleared"
#: What the arguments of a call whose result was cleared become: still a JSON object, so
#: every provider (and the Anthropic conversion, which parses it) accepts the call.
CLEARED_ARGUMENTS: Final = '{"cleared_by": "synopsis"}'
#: The line of a stub that opens its digest of the cleared output's facts.
FACTS_HEADING: Final = "Facts kept from it"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClearingPlan:
    """What tier 1 clears: tool results (by index) and the calls whose arguments go."""

    results: tuple[int, ...] = ()
    #: Indices of the assistant messages whose call arguments are cleared.
    arguments: tuple[int, ...] = ()
    #: Ids of the calls whose arguments are cleared.
    calls: frozenset[str] = frozenset()

    @property
    def worthwhile(self) -> bool:
        return bool(self.results or self.arguments)

    @property
    def indices(self) -> tuple[int, ...]:
        """Every message the plan changes, in order."""
        return tuple(sorted({*self.results, *self.arguments}))


def clearing_is_enough(options: CompactionOptions, tokens: int, message_count: int) -> bool:
    """Whether a history that tier 1 left at ``tokens`` needs no summary: the trigger no
    longer fires, and it is within ``target`` of the trigger's token limit."""
    clearing = options.clear_tool_outputs
    if clearing is None or options.trigger.evaluate(tokens, message_count).fired:
        return False
    limit = options.trigger.threshold_tokens()
    return limit is None or tokens <= clearing.target * limit


def is_cleared(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` is a tool result already replaced by a stub."""
    return message.get("role") == "tool" and content_type(message) == CLEARED_KIND


def plan_clearing(
    messages: Sequence[Mapping[str, Any]], options: CompactionOptions, estimate: MessageEstimator
) -> ClearingPlan:
    """Which tool results (and call arguments) tier 1 clears. Never mutates its input."""
    clearing = options.clear_tool_outputs
    if clearing is None:
        return ClearingPlan()
    tail = plan_compaction(
        messages,
        keep_tail=options.keep_tail,
        estimate=estimate,
        min_new_messages=options.min_new_messages,
        budget=options.trigger.threshold_tokens(),
        budget_messages=options.trigger.messages,
    ).tail
    names = _tool_names(messages)
    protected = set(clearing.exclude_tools)
    if options.skills is not None:
        protected.add(options.skills.tool_name)
    results = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    recent = set(results[len(results) - clearing.keep_recent :]) if clearing.keep_recent else set()
    end = len(messages) - len(tail)
    chosen = tuple(
        i
        for i in results
        if i < end
        and i not in recent
        and not is_cleared(messages[i])
        and names.get(str(messages[i].get("tool_call_id"))) not in protected
        and estimate(messages[i]) >= clearing.min_tokens
    )
    if not clearing.clear_arguments:
        return ClearingPlan(results=chosen)
    return _with_arguments(messages, chosen, end, protected)


def _tool_names(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Call id -> the name of the tool it calls."""
    names: dict[str, str] = {}
    for message in messages:
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        for call in calls or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping) and isinstance(call.get("id"), str):
                names[call["id"]] = str(function.get("name"))
    return names


def _with_arguments(
    messages: Sequence[Mapping[str, Any]], chosen: tuple[int, ...], end: int, protected: set[str]
) -> ClearingPlan:
    """``chosen`` plus the calls, before ``end``, whose results are (or are being) cleared."""
    gone = {str(messages[i].get("tool_call_id")) for i in chosen}
    gone |= {str(m.get("tool_call_id")) for m in messages[:end] if is_cleared(m)}
    calls: set[str] = set()
    arguments: list[int] = []
    for index, message in enumerate(messages[:end]):
        if message.get("role") != "assistant":
            continue
        found = {
            str(call.get("id"))
            for call in message.get("tool_calls") or ()
            if str(call.get("id")) in gone and _clearable_arguments(call, protected)
        }
        if found:
            calls |= found
            arguments.append(index)
    return ClearingPlan(results=chosen, arguments=tuple(arguments), calls=frozenset(calls))


def _clearable_arguments(call: Mapping[str, Any], protected: set[str]) -> bool:
    function = call.get("function")
    if not isinstance(function, Mapping) or function.get("name") in protected:
        return False
    return function.get("arguments") != CLEARED_ARGUMENTS


def apply_clearing(
    messages: Sequence[Mapping[str, Any]],
    plan: ClearingPlan,
    estimate: MessageEstimator,
    *,
    archive: str | None,
    digest_tokens: int = 0,
) -> list[dict[str, Any]]:
    """A new history with the plan's results stubbed (pointing to ``archive``, each keeping a
    digest of its facts within ``digest_tokens``) and its calls' arguments cleared. ``usage``
    is dropped from every message from the first change on: its number measured the longer
    prompt and would make the next count think nothing went."""
    names = _tool_names(messages)
    results, arguments = set(plan.results), set(plan.arguments)
    first = min(plan.indices, default=len(messages))
    new: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        out = without_meta(message)
        if index in results:
            tool = names.get(str(message.get("tool_call_id")), str(message.get("name") or "tool"))
            date, facts = fact_digest(text_of(message), tokens=digest_tokens, who=tool)
            stub = cleared_stub(tool, estimate(message), archive, facts=facts, date=date)
            out = {**out, "content": stub}
        elif index in arguments:
            out = {**out, "tool_calls": [_cleared_call(c, plan.calls) for c in out["tool_calls"]]}
        if index >= first and "usage" in out:
            out = {k: v for k, v in out.items() if k != "usage"}
        new.append(out)
    return new


def _cleared_call(call: Mapping[str, Any], calls: frozenset[str]) -> Any:
    if call.get("id") not in calls:
        return call
    return {**call, "function": {**call["function"], "arguments": CLEARED_ARGUMENTS}}


def cleared_stub(
    tool: str, tokens: int, archive: str | None, *, facts: Sequence[str] = (), date: str = ""
) -> str:
    """The text that stands in for a cleared tool result: short, as it stays for good, with
    the ``facts`` it keeps (lines ``- ...``) under a heading naming the output's ``date``."""
    where = f"archived at {archive}" if archive else "not archived"
    body = f"[{tool} output cleared ({tokens} tokens, {where}); run it again if needed]"
    if facts:
        heading = f"{FACTS_HEADING} ({date}):" if date else f"{FACTS_HEADING}:"
        body = "\n".join([body, heading, *facts])
    return mark(CLEARED_KIND, body, {"tokens": tokens})


def kept_facts(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a summarizer reads for a stub: a tool result (same ``tool_call_id``) holding the
    facts the stub kept, with their heading (so the session date too), or None when it kept
    none. Never the stub itself: its pointer and marker are no part of the history."""
    if not is_cleared(message):
        return None
    body = marked_body(message)
    start = body.find(f"\n{FACTS_HEADING}")
    if start < 0:
        return None
    heading, *facts = body[start + 1 :].splitlines()
    text = "\n".join([heading, *(line.removeprefix("- ") for line in facts)])
    return {**without_meta(message), "content": text}


def offload_large_tool_result(
    message: Mapping[str, Any],
    archive: Archive,
    max_tokens: int,
    *,
    counter: TokenCounter | None = None,
    tool: str | None = None,
    session_id: str | None = None,
) -> dict[str, Any]:
    """``message`` as it should enter the history: a tool result over ``max_tokens`` is
    written to ``archive`` and replaced by a stub pointing there; anything else is returned
    as it is (a new dict). For adapters, at the moment a tool result arrives."""
    estimate = (counter or TokenCounter()).estimate
    tokens = estimate(message) if message.get("role") == "tool" else 0
    if tokens <= max_tokens or is_cleared(message):
        return dict(message)
    where = archive.write([message], session_id=session_id)
    name = tool or str(message.get("name") or "tool")
    return {**without_meta(message), "content": cleared_stub(name, tokens, where)}
