"""Benchmark: what each compaction strategy costs over a 1,000-turn tool-heavy coding session.

A synthetic, seeded session: every turn the agent calls one tool (read a file, run the
tests, grep, edit a file, list a directory) and gets its output; every 25 turns the user
gives a new instruction. Before every model call the strategy's before-model hook runs
(``_strategies.py``: none, truncation, summary, tiered, LangChain's defaults, no tail),
and the call is billed the tokens of the history it sends. Reported per strategy: the input
tokens billed across all turns, the largest prompt sent, the summarizer's calls and their
input and output tokens, and the total against summarizing only.

Run ``python bench/bench_cost.py`` (``--turns N``, ``--budgets 32000,64000``, ``--seed``,
``--model SPEC`` for another summarizer). Tokens are synopsis' default estimate.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _strategies import STRATEGIES, chosen, make

from synopsis.tokens import TokenCounter

TOOLS = (("read_file", 35), ("run_tests", 20), ("grep", 20), ("edit_file", 20), ("list_dir", 5))
INSTRUCTION_EVERY = 25
CACHE_READ, OUTPUT = 0.1, 5.0
WORDS = [
    "parser",
    "token",
    "config",
    "value",
    "result",
    "index",
    "buffer",
    "handler",
    "request",
    "session",
    "cache",
    "state",
    "retry",
    "limit",
    "window",
    "summary",
    "message",
    "payload",
    "record",
    "stream",
    "schema",
]


# --- the synthetic session ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Turn:
    """What arrives before one model call, and what the model then does."""

    instruction: str | None
    call: dict[str, Any]
    result: dict[str, Any]


def code_line(rng: random.Random) -> str:
    a, b, c = rng.sample(WORDS, 3)
    return rng.choice(
        [
            f"    {a}_{b} = self.{c}.get({a!r}, {rng.randint(0, 99)})",
            f"def {a}_{b}({c}: int) -> str:",
            f"        if {a} > {rng.randint(1, 64)}: return {b}({c})",
            f"    # {a} {b} {c}: keep the {a} until the {c} is flushed",
            f"class {a.title()}{b.title()}({c.title()}Base):",
        ]
    )


def tool_output(rng: random.Random, tool: str, path: str) -> str:
    if tool == "read_file":
        return "\n".join(code_line(rng) for _ in range(rng.randint(30, 400)))
    if tool == "run_tests":
        lines = [
            f"tests/test_{rng.choice(WORDS)}.py::test_{rng.choice(WORDS)} PASSED"
            for _ in range(rng.randint(20, 120))
        ]
        if rng.random() < 0.4:
            lines += [
                "FAILED tests/test_parser.py::test_window",
                "Traceback (most recent call last):",
            ]
            lines += [
                f'  File "src/{rng.choice(WORDS)}.py", line {rng.randint(1, 900)}' for _ in range(8)
            ]
            lines.append(f"AssertionError: expected {rng.randint(0, 9)} got {rng.randint(10, 99)}")
        return "\n".join(lines)
    if tool == "grep":
        return "\n".join(
            f"src/{rng.choice(WORDS)}.py:{rng.randint(1, 900)}:{code_line(rng)}"
            for _ in range(rng.randint(5, 40))
        )
    if tool == "edit_file":
        return f"Edited {path}: replaced {rng.randint(1, 12)} lines."
    return "\n".join(f"src/{word}.py" for word in rng.sample(WORDS, 12))


def session(turns: int, seed: int) -> Iterator[Turn]:
    rng = random.Random(seed)
    names, weights = zip(*TOOLS, strict=True)
    for number in range(turns):
        instruction = None
        if number % INSTRUCTION_EVERY == 0:
            a, b, c = (rng.choice(WORDS) for _ in range(3))
            task = number // INSTRUCTION_EVERY + 1
            instruction = f"Task {task}: make the {a} {b} tests pass and keep the {c} API."
        tool = rng.choices(names, weights)[0]
        path = f"src/{rng.choice(WORDS)}.py"
        call_id = f"call_{number}"
        arguments: dict[str, Any] = {"path": path}
        if tool == "edit_file":  # an edit carries the old and the new text, as agents' do
            arguments["old"] = "\n".join(code_line(rng) for _ in range(rng.randint(3, 30)))
            arguments["new"] = "\n".join(code_line(rng) for _ in range(rng.randint(3, 40)))
        call = {
            "role": "assistant",
            "content": f"Next: {tool} on {path}." if rng.random() < 0.5 else None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": tool, "arguments": json.dumps(arguments)},
                }
            ],
        }
        result = {"role": "tool", "tool_call_id": call_id, "content": tool_output(rng, tool, path)}
        yield Turn(instruction, call, result)


# --- running it --------------------------------------------------------------------------------


@dataclass
class Bill:
    input_tokens: int = 0
    cached_tokens: int = 0  # the part of input_tokens a prompt cache would have served
    largest_prompt: int = 0
    summarizer_calls: int = 0
    summarizer_input: int = 0
    summarizer_output: int = 0
    seconds: float = 0.0

    @property
    def total(self) -> int:
        """Every token sent or written, priced alike."""
        return self.input_tokens + self.summarizer_input + self.summarizer_output

    @property
    def priced(self) -> float:
        """In input-token equivalents at Anthropic's price ratios: a cache read costs 0.1, an
        uncached input token 1, an output token 5. The agent's own output is the same for
        every strategy and left out; the summarizer's prompt shares no cached prefix."""
        uncached = self.input_tokens - self.cached_tokens + self.summarizer_input
        return CACHE_READ * self.cached_tokens + uncached + OUTPUT * self.summarizer_output


def bill(name: str, budget: int, turns: list[Turn], model: str) -> Bill:
    strategy, counter = make(name, budget, model), TokenCounter()
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools; be brief."}
    ]
    result, previous = Bill(), []
    started = time.perf_counter()
    for turn in turns:
        if turn.instruction:
            history.append({"role": "user", "content": turn.instruction})
        history = strategy.hook(history)
        sent = counter.count(history).total
        result.input_tokens += sent
        result.cached_tokens += _common_prefix_tokens(previous, history, counter)
        result.largest_prompt = max(result.largest_prompt, sent)
        previous = list(history)
        history += [turn.call, turn.result]
    result.seconds = time.perf_counter() - started
    costs = strategy.costs
    result.summarizer_calls, result.summarizer_input = costs.calls, costs.input_tokens
    result.summarizer_output = costs.output_tokens
    return result


def _common_prefix_tokens(
    previous: list[dict[str, Any]], history: list[dict[str, Any]], counter: TokenCounter
) -> int:
    """The tokens of the messages ``history`` shares, from the start, with the last prompt."""
    same = 0
    for before, now in zip(previous, history, strict=False):
        if before is not now and before != now:
            break
        same += 1
    if same == len(previous):
        return counter.count(previous).total  # the counter remembers it: no recount
    return sum(counter.estimate(message) for message in history[:same])


def report(
    bills: dict[tuple[int, str], Bill], budgets: list[int], turns: int, names: list[str]
) -> None:
    for budget in budgets:
        reference = bills[(budget, "summary")]
        print(f"\n### Budget {budget:,} tokens, {turns:,} turns\n")
        print(
            "| strategy | input tokens billed | of which cacheable | largest prompt "
            "| summarizer calls | summarizer input | summarizer output | all tokens "
            "| vs summary only | priced with caching | vs summary only |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name in names:
            b = bills[(budget, name)]
            print(
                f"| {name} | {b.input_tokens:,} | {b.cached_tokens:,} | {b.largest_prompt:,} "
                f"| {b.summarizer_calls:,} | {b.summarizer_input:,} | {b.summarizer_output:,} "
                f"| {b.total:,} | {b.total / reference.total:.3f} | {b.priced:,.0f} "
                f"| {b.priced / reference.priced:.3f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=1_000)
    parser.add_argument("--budgets", default="32000,64000", help="comma-separated token budgets")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--model", default="extractive", help="the summarizer (a model spec)")
    parser.add_argument("--strategies", default=",".join(STRATEGIES), help="e.g. tiered@0.5")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    names = chosen(args.strategies)
    turns = list(session(args.turns, args.seed))
    produced = sum(TokenCounter().estimate(t.result) for t in turns)
    started = time.perf_counter()
    bills = {}
    for budget in budgets:
        for name in names:
            if name == "none" and bills:  # the same whatever the budget
                bills[(budget, name)] = bills[(budgets[0], name)]
                continue
            bills[(budget, name)] = bill(name, budget, turns, args.model)
            print(
                f"  {budget:>7,} {name:<11} {bills[(budget, name)].seconds:6.1f} s", file=sys.stderr
            )
    print(
        f"{args.turns:,} turns (seed {args.seed}), {produced:,} tokens of tool output; "
        f"summarizer {args.model}; Python {platform.python_version()}, "
        f"{time.perf_counter() - started:.0f} s"
    )
    report(bills, budgets, args.turns, names)


if __name__ == "__main__":
    main()
