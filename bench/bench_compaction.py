"""Benchmark: one compaction of a 10,000-message history, against LangChain's
``SummarizationMiddleware`` in the same run, like for like.

Like for like means: the same history (converted to LangChain messages for LangChain), the
same kept tail (``--keep`` messages: ``KeepTail(messages=K)`` / ``keep=("messages", K)``), the
same summarizer input (every message before the tail: LangChain's
``trim_tokens_to_summarize=None``, synopsis without tool-output clearing), and the same
summarizer on both sides:

* ``offline``: synopsis's extractive model. synopsis runs it as its offline summarizer
  (``model="extractive"``); LangChain gets it as its ``summarizer=`` callable (the messages it
  passes converted with ``synopsis.convert.from_langchain`` and summarized by the same
  ``Summarizer(model="extractive")``).
* ``instant``: a model that answers at once with a fixed summary (synopsis:
  ``synopsis.testing.FakeModel``; LangChain: ``FakeListChatModel``), so both build their
  summarizer request from the whole input and the figure is the framework's own work.

Time is the median of ``--runs`` compactions; memory is the ``tracemalloc`` peak of one more.
Run: ``python bench/bench_compaction.py`` (needs ``langchain``).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from synopsis import Compactor, KeepTail, Summarizer
from synopsis.convert import from_langchain, to_langchain
from synopsis.testing import FakeModel

WORDS = [
    "the",
    "parser",
    "reads",
    "each",
    "token",
    "and",
    "the",
    "planner",
    "keeps",
    "a",
    "budget",
    "while",
    "the",
    "agent",
    "edits",
    "files",
    "in",
    "the",
    "repository",
    "tests",
    "fail",
    "because",
    "the",
    "fixture",
    "expects",
    "a",
    "sorted",
    "list",
    "of",
    "users",
    "so",
    "we",
    "update",
    "module",
    "config",
    "and",
    "rerun",
    "pytest",
    "with",
    "coverage",
    "then",
    "commit",
    "the",
    "change",
]


def history(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """A coding-agent history: user asks, assistant calls a tool, the tool answers."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    turn = 0
    while len(messages) < n:
        text = " ".join(rng.choices(WORDS, k=rng.randint(12, 40)))
        kind = len(messages) % 4
        if kind == 1:
            messages.append({"role": "user", "content": f"Step {turn}: {text}."})
        elif kind == 2:
            call = {
                "id": f"call_{turn}",
                "type": "function",
                "function": {"name": "read_file", "arguments": f'{{"path": "src/m{turn}.py"}}'},
            }
            messages.append({"role": "assistant", "content": text, "tool_calls": [call]})
        elif kind == 3:
            messages.append({"role": "tool", "tool_call_id": f"call_{turn}", "content": text * 3})
        else:
            messages.append({"role": "assistant", "content": f"Done with step {turn}. {text}."})
            turn += 1
    if messages[-1]["role"] == "assistant" and messages[-1].get("tool_calls"):
        messages.pop()
    return messages


def measure(
    ours: Callable[[], Any], theirs: Callable[[], Any], runs: int
) -> tuple[float, float, float, float]:
    """Median seconds of each (their runs interleaved, so load changes hit both alike), then
    each one's tracemalloc peak in MiB."""
    ours(), theirs()  # warm caches (regexes, imports)
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for run, samples in zip((ours, theirs), times, strict=True):
            start = time.perf_counter()
            run()
            samples.append(time.perf_counter() - start)
    peaks = []
    for run in (ours, theirs):
        tracemalloc.start()
        run()
        peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
        tracemalloc.stop()
    return statistics.median(times[0]), statistics.median(times[1]), peaks[0], peaks[1]


def synopsis_run(
    messages: list[dict[str, Any]], keep: int, summary: str | None
) -> Callable[[], Any]:
    model: Any = "extractive" if summary is None else FakeModel(default=summary)
    compactor = Compactor(model=model, keep_tail=KeepTail(messages=keep), clear_tool_outputs=None)

    def run() -> Any:
        result = compactor.compact(messages)
        assert result.compacted, result.report()
        return result

    return run


def langchain_run(
    messages: list[dict[str, Any]], keep: int, summary: str | None
) -> Callable[[], Any]:
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    converted = to_langchain(messages)
    offline = Summarizer(model="extractive")
    if summary is None:
        middleware = SummarizationMiddleware(
            model=FakeListChatModel(responses=["unused"]),
            trigger=("messages", 100),
            keep=("messages", keep),
            trim_tokens_to_summarize=None,
            summarizer=lambda lc: offline.summarize(from_langchain(lc)).text,
        )
    else:
        middleware = SummarizationMiddleware(
            model=FakeListChatModel(responses=[summary]),
            trigger=("messages", 100),
            keep=("messages", keep),
            trim_tokens_to_summarize=None,
        )

    def run() -> Any:
        update = middleware.before_model({"messages": list(converted)}, None)  # type: ignore[arg-type]
        assert update is not None
        return update

    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--keep", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    messages = history(args.messages)
    summary = synopsis_run(messages, args.keep, None)().summary
    print(
        f"# one compaction of {len(messages):,} messages, keep {args.keep}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.2f}, "
        f"median of {args.runs}"
    )
    print(
        "| summarizer | synopsis | LangChain | time ratio (synopsis / LangChain) "
        "| synopsis peak | LangChain peak | peak ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, text in (("offline (extractive, both)", None), ("instant model", summary)):
        ours, theirs, our_peak, their_peak = measure(
            synopsis_run(messages, args.keep, text),
            langchain_run(messages, args.keep, text),
            args.runs,
        )
        print(
            f"| {name} | {ours * 1e3:.0f} ms | {theirs * 1e3:.0f} ms | {ours / theirs:.2f}x "
            f"| {our_peak:.1f} MiB | {their_peak:.1f} MiB | {our_peak / their_peak:.2f}x |"
        )


if __name__ == "__main__":
    main()
