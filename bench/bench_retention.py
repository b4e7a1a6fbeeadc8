"""Benchmark: how much an agent still knows after compaction, on LoCoMo, strategy by strategy.

Each LoCoMo conversation is replayed as one long session (its sessions in order, each opened
with its date), and every strategy of ``_strategies.py`` runs its before-model hook after
every message, so it compacts whenever the history crosses the budget (4k and 8k tokens by
default). After the last message, for every question with evidence (categories 1-4), the
answer counts as still available when every content word of its gold answer is

- in the final context (*in context*), or
- in the context or among the top 10 of a keyword recall over the memories written on the
  way: everything a strategy took out of the context, one memory per line (*+ recall*).

Two layouts of the same conversations: ``chat`` (speaker A is the user, speaker B the
assistant) and ``tool`` (an agent reads each session's log through a ``read_log`` tool call,
so the text arrives as tool output, as file reads and test logs do for a coding agent).
Numbers are shares of the questions, and ratios to the no-compaction ceiling of the same run.

Run ``python bench/bench_retention.py`` (``--quick``: two conversations, one budget;
``--model SPEC``: another summarizer, e.g. a local model behind an OpenAI-compatible server,
``openai-compatible:qwen2.5-0.5b-instruct@http://127.0.0.1:8080/v1``). The data is read from
``../shared/data/locomo`` (CC BY-NC); nothing from it is copied into the repository.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _strategies import STRATEGIES, Strategy, chosen, make
from bench_locomo import DEFAULT_DATA, STOPWORDS, evidence_ids, turn_text, words

from synopsis.messages import text_of
from synopsis.tokens import TokenCounter

LAYOUTS = ("chat", "tool")
CATEGORIES = frozenset({1, 2, 3, 4})


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    answer: frozenset[str]  # the gold answer's content words


@dataclass(frozen=True, slots=True)
class Session:
    number: int
    date: str
    turns: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    user: str
    assistant: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]


def load(path: Path) -> list[Conversation]:
    conversations = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        talk = sample["conversation"]
        sessions = sorted(
            (
                Session(int(m[1]), str(talk.get(f"{name}_date_time", "")), tuple(turns))
                for name, turns in talk.items()
                if (m := re.fullmatch(r"session_(\d+)", name)) and isinstance(turns, list)
            ),
            key=lambda s: s.number,
        )
        questions = []
        for qa in sample["qa"]:
            answer = frozenset(w for w in words(str(qa.get("answer", ""))) if w not in STOPWORDS)
            if qa.get("category") in CATEGORIES and evidence_ids(qa.get("evidence", [])) and answer:
                questions.append(Question(qa["question"], answer))
        conversations.append(
            Conversation(
                sample["sample_id"],
                talk["speaker_a"],
                talk["speaker_b"],
                tuple(sessions),
                tuple(questions),
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


def context_words(history: list[dict[str, Any]]) -> set[str]:
    texts = [text_of(m) for m in history]
    texts += [
        str(call.get("function", {}).get("arguments", ""))
        for m in history
        for call in m.get("tool_calls") or ()
    ]
    return set(words("\n".join(texts)))


# --- measuring -------------------------------------------------------------------------------


@dataclass
class Tally:
    questions: int = 0
    in_context: int = 0
    with_recall: int = 0
    summarizer_calls: int = 0
    final_tokens: int = 0
    conversations: int = 0
    seconds: float = 0.0


def measure(conversation: Conversation, layout: str, strategy: Strategy, tally: Tally) -> None:
    started = time.perf_counter()
    history = replay(conversation, layout, strategy)
    present = context_words(history)
    for question in conversation.questions:
        here = question.answer <= present
        recalled = set(words("\n".join(strategy.recall(question.text))))
        tally.questions += 1
        tally.in_context += here
        tally.with_recall += here or question.answer <= (present | recalled)
    tally.summarizer_calls += strategy.costs.calls
    tally.final_tokens += TokenCounter().count(history).total
    tally.conversations += 1
    tally.seconds += time.perf_counter() - started


def run(
    conversations: list[Conversation],
    layouts: list[str],
    budgets: list[int],
    model: str,
    names: list[str],
) -> dict[tuple[str, int, str], Tally]:
    tallies: dict[tuple[str, int, str], Tally] = {}
    for layout in layouts:
        for budget in budgets:
            for name in names:
                tally = tallies.setdefault((layout, budget, name), Tally())
                for conversation in conversations:
                    measure(conversation, layout, make(name, budget, model), tally)
                print(f"  {layout} {budget:>6,} {name:<11} {tally.seconds:6.1f} s", file=sys.stderr)
    return tallies


def report(
    tallies: dict[tuple[str, int, str], Tally],
    layouts: list[str],
    budgets: list[int],
    names: list[str],
) -> None:
    for layout in layouts:
        for budget in budgets:
            ceiling = tallies[(layout, budget, "none")]
            print(
                f"\n### {layout} layout, budget {budget:,} tokens ({ceiling.questions} questions)\n"
            )
            print(
                "| strategy | in context | vs ceiling | + recall | vs ceiling | summarizer calls "
                "| final context, tokens (mean) |"
            )
            print("|---|---:|---:|---:|---:|---:|---:|")
            for name in names:
                t = tallies[(layout, budget, name)]
                print(
                    f"| {name} | {_share(t.in_context, t.questions)} "
                    f"| {_ratio(t.in_context, ceiling.in_context)} "
                    f"| {_share(t.with_recall, t.questions)} "
                    f"| {_ratio(t.with_recall, ceiling.in_context)} "
                    f"| {t.summarizer_calls:,} | {t.final_tokens // t.conversations:,} |"
                )


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _ratio(part: int, ceiling: int) -> str:
    return f"{part / ceiling:.3f}" if ceiling else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--budgets", default="4000,8000", help="comma-separated token budgets")
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--model", default="extractive", help="the summarizer (a model spec)")
    parser.add_argument("--quick", action="store_true", help="two conversations, one budget")
    parser.add_argument("--strategies", default=",".join(STRATEGIES), help="e.g. tiered@0.5")
    args = parser.parse_args()
    conversations = load(args.data)
    budgets = [int(b) for b in args.budgets.split(",")]
    if args.quick:
        conversations, budgets = conversations[:2], budgets[:1]
    layouts = args.layouts.split(",")
    started = time.perf_counter()
    names = chosen(args.strategies)
    tallies = run(conversations, layouts, budgets, args.model, names)
    questions = sum(len(c.questions) for c in conversations)
    print(
        f"{len(conversations)} conversations, {questions} questions with evidence "
        f"(categories 1-4), summarizer {args.model}; {platform.python_version()}, "
        f"{time.perf_counter() - started:.0f} s"
    )
    report(tallies, layouts, budgets, names)


if __name__ == "__main__":
    main()
