"""Benchmark: how much an agent still knows after compaction, on LoCoMo, strategy by strategy.

Each LoCoMo conversation is replayed as one long session (its sessions in order, each opened
with its date), and every strategy of ``_strategies.py`` runs its before-model hook after
every message, so it compacts whenever the history crosses the budget (4k and 8k tokens by
default). After the last message, every question with evidence (categories 1-4) is checked
against the final context (``_retention_measure.py``):

- *strict* (the headline): an evidence utterance of the question, or an answer-bearing
  sentence of it, is in the context with the answer words in the same line or in the session
  date the context gives that line; audited by hand in ``docs/retention-audit.md``;
- *loose*: every content word of the gold answer is anywhere in the context (fooled by
  coincidence; kept as a second column);
- *∪ search top-10*: the same checks over the context plus the 10 archived messages an
  agent's ``search_history`` tool would return for the question (``_archive_search.py``).

Every row gives the final context's real size (synopsis's token counter; mean and largest
over the conversations); a strategy whose context ends over its budget is marked **over**,
and its figures do not compare. Two layouts of the same conversations: ``chat`` (speaker A
is the user, speaker B the assistant) and ``tool`` (an agent reads each session's log through
a ``read_log`` tool call). The six conversations split in two halves, A (1st, 3rd, 5th) and
B (2nd, 4th, 6th), so a default can be chosen on one and reported on the other.

Run ``python bench/bench_retention.py`` (every half, layout and budget; about three minutes at
a load of 3 on 2 cores), ``--half A`` (one half only), ``--quick`` (two conversations, one
budget), ``--strategies default,tiered@0.5,default:tail=0.3/target=0.5`` (``none`` and
``summary`` are always run; ``default:...`` is the library default with some settings
changed, ``_retention_variants.py``), ``--model SPEC`` (another summarizer, e.g. a local model
behind an OpenAI-compatible server,
``openai-compatible:qwen2.5-0.5b-instruct@http://127.0.0.1:8080/v1``), ``--audit N`` (N
questions of one cell, half of each strict verdict, with what the context holds about each,
to check the measure by hand). The data is read from ``../shared/data/locomo`` (CC BY-NC);
nothing from it is copied into the repository.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _archive_search import SEARCH_SOURCE
from _retention_measure import (
    Context,
    Evidence,
    Probe,
    Verdict,
    content_words,
    context_lines,
    judge,
    words,
)
from _retention_variants import PREFIX, make_variant
from _strategies import STRATEGIES, Strategy, chosen, make
from bench_locomo import evidence_ids, turn_text

from synopsis.messages import text_of
from synopsis.tokens import TokenCounter

LAYOUTS = ("chat", "tool")
CATEGORIES = frozenset({1, 2, 3, 4})
HALVES = ("A", "B")
SEARCH_LIMIT = 10
# What a plain run compares (the others of STRATEGIES on request: they add a third of the time).
DEFAULT_RUN = ("none", "truncation", "default", "summary", "tiered", "langchain-mw")


def default_data() -> Path:
    """``shared/data/locomo/locomo_dev6.json`` in the nearest parent directory that has it."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "shared/data/locomo/locomo_dev6.json"
        if candidate.exists():
            return candidate
    return here.parents[2] / "shared/data/locomo/locomo_dev6.json"


@dataclass(frozen=True, slots=True)
class Session:
    number: int
    date: str
    turns: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    half: str
    user: str
    assistant: str
    sessions: tuple[Session, ...]
    probes: tuple[Probe, ...]

    @property
    def dates(self) -> dict[int, str]:
        return {s.number: s.date for s in self.sessions}


def load(path: Path) -> list[Conversation]:
    if not path.exists():
        raise SystemExit(f"no LoCoMo data at {path}; pass --data PATH")
    conversations = []
    for index, sample in enumerate(json.loads(path.read_text(encoding="utf-8"))):
        talk = sample["conversation"]
        sessions = sorted(
            (
                Session(int(m[1]), str(talk.get(f"{name}_date_time", "")), tuple(turns))
                for name, turns in talk.items()
                if (m := re.fullmatch(r"session_(\d+)", name)) and isinstance(turns, list)
            ),
            key=lambda s: s.number,
        )
        said = {
            turn["dia_id"]: Evidence(turn["dia_id"], s.number, turn_text(turn).split(": ", 1)[1])
            for s in sessions
            for turn in s.turns
        }
        probes = []
        for number, qa in enumerate(sample["qa"]):
            answer = content_words(str(qa.get("answer", "")))
            evidence = tuple(
                said[i] for i in dict.fromkeys(evidence_ids(qa.get("evidence", []))) if i in said
            )
            if qa.get("category") in CATEGORIES and evidence and answer:
                ident = f"{sample['sample_id']}#{number}"
                probes.append(
                    Probe(
                        ident,
                        qa["question"],
                        answer,
                        evidence,
                        int(qa["category"]),
                        str(qa["answer"]),
                    )
                )
        conversations.append(
            Conversation(
                sample["sample_id"],
                HALVES[index % 2],
                talk["speaker_a"],
                talk["speaker_b"],
                tuple(sessions),
                tuple(probes),
            )
        )
    return conversations


# --- replaying a conversation as one session ---------------------------------------------------


def messages(conversation: Conversation, layout: str) -> Iterator[dict[str, Any]]:
    """The conversation as the messages of one long session, in order."""
    yield {
        "role": "system",
        "content": f"You are {conversation.assistant}, talking with {conversation.user} "
        "over many sessions. Remember what you learn about them.",
    }
    for session in conversation.sessions:
        if layout == "chat":
            yield from _chat(conversation, session)
        else:
            yield from _tool(session)


def _chat(conversation: Conversation, session: Session) -> Iterator[dict[str, Any]]:
    for index, turn in enumerate(session.turns):
        role = "user" if turn["speaker"] == conversation.user else "assistant"
        text = turn_text(turn)
        yield {"role": role, "content": f"[{session.date}] {text}" if index == 0 else text}


def _tool(session: Session) -> Iterator[dict[str, Any]]:
    call_id = f"log{session.number}"
    arguments = json.dumps({"session": session.number})
    yield {"role": "user", "content": f"Session {session.number} took place on {session.date}."}
    yield {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "read_log", "arguments": arguments},
            }
        ],
    }
    log = "\n".join(turn_text(turn) for turn in session.turns)
    yield {"role": "tool", "tool_call_id": call_id, "content": f"{session.date}\n{log}"}
    yield {"role": "assistant", "content": f"I have read session {session.number}."}


def replay(conversation: Conversation, layout: str, strategy: Strategy) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for message in messages(conversation, layout):
        history.append(message)
        history = strategy.hook(history)
    return history


# --- measuring -------------------------------------------------------------------------------


@dataclass
class Tally:
    questions: int = 0
    strict: int = 0
    loose: int = 0
    strict_search: int = 0
    loose_search: int = 0
    search_tokens: int = 0
    summarizer_calls: int = 0
    final_tokens: list[int] = field(default_factory=list)
    searchable: bool = True
    seconds: float = 0.0
    recent_users: int = 0  # the newest user messages within a fifth of the budget
    recent_verbatim: int = 0  # of them, those the final context holds word for word

    def add(self, other: Tally) -> None:
        for name in (
            "questions",
            "strict",
            "loose",
            "strict_search",
            "loose_search",
            "recent_users",
            "recent_verbatim",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.search_tokens += other.search_tokens
        self.summarizer_calls += other.summarizer_calls
        self.final_tokens += other.final_tokens
        self.searchable = self.searchable and other.searchable
        self.seconds += other.seconds


@dataclass(frozen=True, slots=True)
class Outcome:
    """One question after one strategy's run: the verdicts, and the context they came from."""

    probe: Probe
    in_context: Verdict
    with_search: Verdict


def recent_user_messages(
    conversation: Conversation, layout: str, budget: int, counter: TokenCounter
) -> list[str]:
    """The newest user messages of the replay whose tokens add up to at most a fifth of the
    budget (the quote share the library caps its quotes at): the seed's guarantee says the
    final context holds each of them word for word."""
    said = [text_of(m) for m in messages(conversation, layout) if m["role"] == "user"]
    recent: list[str] = []
    used = 0
    for text in reversed(said):
        used += counter.estimate_text(text)
        if used > budget // 5:
            break
        recent.append(text)
    return recent


def measure(
    conversation: Conversation, layout: str, strategy: Strategy, budget: int | None = None
) -> tuple[Tally, list[dict[str, Any]], list[Outcome]]:
    started = time.perf_counter()
    history = replay(conversation, layout, strategy)
    counter = TokenCounter()
    dates = conversation.dates
    lines = context_lines(history)
    context = Context(lines, dates)
    tally = Tally(searchable=strategy.archive is not None)
    outcomes = []
    asked: list[int] = []
    for probe in conversation.probes:
        if strategy.ask is not None:  # the question's own model call (recall depends on it)
            seen = strategy.ask(history, probe.text)
            asked.append(counter.count(seen).total)
            lines = context_lines(seen)
            context = Context(lines, dates)
        here = judge(probe, context, dates)
        found = strategy.search(probe.text, SEARCH_LIMIT)
        tally.search_tokens += counter.count(found).total if found else 0
        both = (
            judge(probe, Context([*lines, *context_lines(found)], dates), dates) if found else here
        )
        tally.questions += 1
        tally.strict += here.strict
        tally.loose += here.loose
        tally.strict_search += both.strict
        tally.loose_search += both.loose
        outcomes.append(Outcome(probe, here, both))
    if budget is not None:
        shown = "\n".join(text_of(m) for m in history)
        recent = recent_user_messages(conversation, layout, budget, counter)
        tally.recent_users = len(recent)
        tally.recent_verbatim = sum(1 for text in recent if text in shown)
    tally.summarizer_calls = strategy.costs.calls
    # With ``ask``: the largest context of a question's call (the recall block included).
    tally.final_tokens = [max(asked, default=counter.count(history).total)]
    tally.seconds = time.perf_counter() - started
    return tally, history, outcomes


Key = tuple[str, int, str, str]  # layout, budget, strategy, half


def strategy(name: str, budget: int, model: Any = "extractive") -> Strategy:
    """A fresh strategy: one of ``_strategies.py``, or a variant of the default
    (``default:tail=0.3/target=0.5``, ``_retention_variants.py``)."""
    if name.startswith(PREFIX):
        return make_variant(name, budget, model)
    return make(name, budget, model)


def run(
    conversations: list[Conversation],
    layouts: list[str],
    budgets: list[int],
    model: str,
    names: list[str],
) -> dict[Key, Tally]:
    tallies: dict[Key, Tally] = {}
    for layout in layouts:
        for budget in budgets:
            for name in names:
                seconds = 0.0
                for conversation in conversations:
                    made = strategy(name, budget, model)
                    tally, _, _ = measure(conversation, layout, made, budget)
                    key = (layout, budget, name, conversation.half)
                    tallies.setdefault(key, Tally()).add(tally)
                    seconds += tally.seconds
                print(f"  {layout} {budget:>6,} {name:<15} {seconds:6.1f} s", file=sys.stderr)
    return tallies


def report(
    tallies: dict[Key, Tally],
    layouts: list[str],
    budgets: list[int],
    names: list[str],
    halves: list[str],
) -> None:
    for half in halves:
        for layout in layouts:
            for budget in budgets:
                _table(tallies, layout, budget, names, half)
    for half in halves:
        _grid(tallies, layouts, budgets, names, half)


def _total(tallies: dict[Key, Tally], layout: str, budget: int, name: str, half: str) -> Tally:
    """One cell's tally over ``half`` (``both``: the two halves added)."""
    sum_ = Tally()
    for h in HALVES if half == "both" else (half,):
        if (layout, budget, name, h) in tallies:
            sum_.add(tallies[(layout, budget, name, h)])
    return sum_


def _grid(
    tallies: dict[Key, Tally], layouts: list[str], budgets: list[int], names: list[str], half: str
) -> None:
    """Every cell of one half in one table: strict / loose in context; final context tokens
    mean / max (**over** the budget marked); summarizer calls; then strict in context ∪ the
    search top 10 and its ratio to the no-compaction ceiling."""
    cells = [(layout, budget) for layout in layouts for budget in budgets]
    print(f"\n### half {half}: strict / loose; context mean / max; calls; ∪ search (ratio)\n")
    print("| strategy | " + " | ".join(f"{lay} {b // 1000}k" for lay, b in cells) + " |")
    print("|---|" + "---|" * len(cells))
    for name in names:
        row = []
        for layout, budget in cells:
            t = _total(tallies, layout, budget, name, half)
            ceiling = _total(tallies, layout, budget, "none", half)
            if not t.questions:
                row.append("-")
                continue
            mean, top = sum(t.final_tokens) // len(t.final_tokens), max(t.final_tokens)
            over = " **over**" if name != "none" and top > budget else ""
            cell = (
                f"{_share(t.strict, t.questions)} / {_share(t.loose, t.questions)}; "
                f"{mean:,} / {top:,}{over}; {t.summarizer_calls} calls"
            )
            if t.recent_users:
                cell += f"; recent users verbatim {_share(t.recent_verbatim, t.recent_users)}"
            if t.searchable and name != "none":
                cell += (
                    f"; ∪ {_share(t.strict_search, t.questions)} "
                    f"({_ratio(t.strict_search, ceiling.strict)})"
                )
            row.append(cell)
        print(f"| {name} | " + " | ".join(row) + " |")


def _table(
    tallies: dict[Key, Tally], layout: str, budget: int, names: list[str], half: str
) -> None:
    def total(name: str) -> Tally:
        return _total(tallies, layout, budget, name, half)

    ceiling = total("none")
    if not ceiling.questions:
        return
    print(
        f"\n### half {half}, {layout} layout, budget {budget:,} tokens "
        f"({ceiling.questions} questions)\n"
    )
    print(
        "| strategy | strict | vs ceiling | loose | strict ∪ search | vs ceiling "
        "| loose ∪ search | search tokens (mean) | summarizer calls "
        "| final context, tokens (mean / max) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in names:
        t = total(name)
        mean, top = sum(t.final_tokens) // len(t.final_tokens), max(t.final_tokens)
        over = " **over**" if name != "none" and top > budget else ""
        searched = t.searchable and name != "none"
        print(
            f"| {name} | {_share(t.strict, t.questions)} | {_ratio(t.strict, ceiling.strict)} "
            f"| {_share(t.loose, t.questions)} "
            f"| {_share(t.strict_search, t.questions) if searched else '-'} "
            f"| {_ratio(t.strict_search, ceiling.strict) if searched else '-'} "
            f"| {_share(t.loose_search, t.questions) if searched else '-'} "
            f"| {t.search_tokens // t.questions:,} "
            f"| {t.summarizer_calls:,} | {mean:,} / {top:,}{over} |"
        )


def choose(
    tallies: dict[Key, Tally], layouts: list[str], budgets: list[int], names: list[str]
) -> None:
    """Item 7 of issue 23: on each half, the candidate default (``default`` and its variants)
    with the best mean strict figure over the cells among those at least as good as ``summary``
    in every cell, then how it does on the other half."""
    cells = [(layout, budget) for layout in layouts for budget in budgets]
    candidates = [n for n in names if n == "default" or n.startswith(PREFIX)]

    def strict(name: str, half: str, cell: tuple[str, int]) -> float:
        t = _total(tallies, cell[0], cell[1], name, half)
        return t.strict / t.questions if t.questions else 0.0

    def holds(name: str, half: str) -> bool:
        return all(strict(name, half, c) >= strict("summary", half, c) for c in cells)

    print("\n### choosing the default by halves (strict in context, mean over the cells)\n")
    print("| tuned on | chosen | mean there | holds there | other half: mean | holds there |")
    print("|---|---|---:|---|---:|---|")
    for tuned, other in (("A", "B"), ("B", "A")):

        def mean(name: str, half: str) -> float:
            return sum(strict(name, half, c) for c in cells) / len(cells)

        fit = [n for n in candidates if holds(n, tuned)] or candidates
        best = max(fit, key=lambda n: mean(n, tuned))
        print(
            f"| {tuned} | `{best}` | {100 * mean(best, tuned):.1f}% | {holds(best, tuned)} "
            f"| {100 * mean(best, other):.1f}% | {holds(best, other)} |"
        )


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _ratio(part: int, ceiling: int) -> str:
    return f"{part / ceiling:.3f}" if ceiling else "-"


# --- the hand audit ----------------------------------------------------------------------------


def audit(
    conversations: list[Conversation], layout: str, budget: int, name: str, count: int, seed: int
) -> None:
    """``count`` questions, half of each strict verdict (in context), with what the context
    holds about each: the lines sharing words with the question or its answer."""
    outcomes: list[tuple[Outcome, list[str]]] = []
    for conversation in conversations:
        _, history, found = measure(conversation, layout, strategy(name, budget))
        lines = context_lines(history)
        outcomes += [(outcome, lines) for outcome in found]
    # A fixed order of the questions (by a hash of the seed and the question), so a change
    # to the measure that flips a few verdicts changes the sample by only those few.
    outcomes.sort(key=lambda o: hashlib.sha256(f"{seed}/{o[0].probe.ident}".encode()).digest())
    kept = [o for o in outcomes if o[0].in_context.strict]
    lost = [o for o in outcomes if not o[0].in_context.strict]
    sample = kept[: count // 2]
    sample += lost[: count - len(sample)]
    sample.sort(key=lambda o: o[0].probe.ident)
    for outcome, lines in sample:
        probe, verdict = outcome.probe, outcome.in_context
        print(f"\n## {probe.ident} (category {probe.category}) {probe.text}")
        print(
            f"gold: {probe.gold!r}; strict {verdict.strict} ({verdict.reason}); "
            f"loose {verdict.loose}"
        )
        for evidence in probe.evidence:
            at = [
                f"L{i}"
                for i, line in enumerate(lines)
                if f" {' '.join(words(evidence.text))} " in f" {' '.join(words(line))} "
            ]
            where = f"verbatim at {', '.join(at)}" if at else "not verbatim"
            print(
                f"  evidence {evidence.dia_id} (session {evidence.session}, {where}): "
                f"{evidence.text}"
            )
        wanted = set().union(*(content_words(e.text) for e in probe.evidence)) | probe.answer
        ranked = sorted(
            range(len(lines)),
            key=lambda i: (
                -len(content_words(lines[i]) & wanted)
                - 3 * len(content_words(lines[i]) & probe.answer)
            ),
        )
        for number in sorted(ranked[:5]):
            print(f"  L{number}: {lines[number][:240]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=default_data())
    parser.add_argument("--budgets", default="4000,8000", help="comma-separated token budgets")
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--half", choices=[*HALVES, "both"], help="one half only (default: each)")
    parser.add_argument("--model", default="extractive", help="the summarizer (a model spec)")
    parser.add_argument("--quick", action="store_true", help="two conversations, one budget")
    parser.add_argument(
        "--strategies",
        default=",".join(DEFAULT_RUN),
        help=f"e.g. tiered@0.5; known: {', '.join(STRATEGIES)} (default: {', '.join(DEFAULT_RUN)})",
    )
    parser.add_argument("--audit", type=int, metavar="N", help="print N questions to check by hand")
    parser.add_argument("--audit-cell", default="tool,4000,default", help="layout,budget,strategy")
    parser.add_argument("--seed", type=int, default=23)
    args = parser.parse_args()
    conversations = load(args.data)
    budgets = [int(b) for b in args.budgets.split(",")]
    if args.quick:
        conversations, budgets = conversations[:2], budgets[:1]
    if args.half in HALVES:
        conversations = [c for c in conversations if c.half == args.half]
    if args.audit:
        layout, budget, name = args.audit_cell.split(",")
        audit(conversations, layout, int(budget), name, args.audit, args.seed)
        return
    layouts = args.layouts.split(",")
    started = time.perf_counter()
    names = chosen(args.strategies)
    tallies = run(conversations, layouts, budgets, args.model, names)
    questions = sum(len(c.probes) for c in conversations)
    halves = {h: [c.sample_id for c in conversations if c.half == h] for h in HALVES}
    print(
        f"{len(conversations)} conversations, {questions} questions with evidence "
        f"(categories 1-4), summarizer {args.model}; {platform.python_version()}, "
        f"{time.perf_counter() - started:.0f} s"
    )
    print("halves: " + "; ".join(f"{h} = {', '.join(ids)}" for h, ids in halves.items() if ids))
    print(f"search_history: {SEARCH_SOURCE}, top {SEARCH_LIMIT}")
    shown = [args.half] if args.half else [h for h in HALVES if halves[h]]
    if len(shown) == len(HALVES):
        shown.append("both")
    report(tallies, layouts, budgets, names, shown)
    if all(any(c.half == h for c in conversations) for h in HALVES):
        choose(tallies, layouts, budgets, names)


if __name__ == "__main__":
    main()
