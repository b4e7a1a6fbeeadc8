"""Benchmark (c): the before-model hook's overhead per call when nothing triggers.

Measures ``Compactor.__call__`` on histories of 1,000 to 100,000 messages (one message
appended per call), against two anchors measured in the same run: the cheapest possible hook
(``list(messages)``, the copy any transform returning a new list pays) and LangChain's
``SummarizationMiddleware.before_model`` on the same history as LangChain messages (trigger
out of reach, so it only counts; needs ``langchain``, skipped without it).
Run: ``python bench/bench_hook.py`` (``--sizes 10000,100000`` to choose the sizes).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

from synopsis import Compactor


def history(n: int, *, usage: bool) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(n - 1):
        if i % 2 == 0:
            messages.append({"role": "user", "content": f"Please look at module_{i}.py and fix it"})
        else:
            message: dict[str, Any] = {"role": "assistant", "content": f"Edited module_{i}.py."}
            if usage:
                message["usage"] = {
                    "prompt_tokens": 10 * i,
                    "completion_tokens": 9,
                    "total_tokens": 10 * i + 9,
                }
            messages.append(message)
    return messages


def per_call(fn: Any, messages: list[dict[str, Any]], calls: int = 200) -> float:
    """Median seconds per call while the history grows by one message per call."""
    samples = []
    grow = list(messages)
    for i in range(calls):
        grow.append({"role": "user", "content": f"follow-up {i}"})
        start = time.perf_counter()
        fn(grow)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def langchain_hook(messages: list[dict[str, Any]]) -> Callable[[list[Any]], Any] | None:
    """LangChain's middleware ``before_model`` over a LangChain copy of ``messages``."""
    try:
        from langchain.agents.middleware import SummarizationMiddleware
        from langchain_core.language_models.fake_chat_models import FakeListChatModel
    except ImportError:
        return None
    from synopsis.convert import to_langchain

    middleware = SummarizationMiddleware(
        model=FakeListChatModel(responses=["summary"]), trigger=("tokens", 10**12)
    )
    converted = to_langchain([{k: v for k, v in m.items() if k != "usage"} for m in messages])

    def run(grow: list[Any]) -> Any:
        return middleware.before_model({"messages": grow}, None)  # type: ignore[arg-type]

    run.messages = converted  # type: ignore[attr-defined]
    return run


def lc_per_call(run: Any, calls: int) -> float:
    from langchain_core.messages import HumanMessage

    samples = []
    grow = list(run.messages)
    for i in range(calls):
        grow.append(HumanMessage(content=f"follow-up {i}"))
        start = time.perf_counter()
        run(grow)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    sizes = [int(x) for x in parser.parse_args().sizes.split(",")]
    print(
        f"# hook overhead, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
        f"{platform.machine()}, Python {platform.python_version()}, "
        f"load {os.getloadavg()[0]:.2f}"
    )
    print(
        "| history | usage | list() | Compactor hook | hook / list() "
        "| LangChain before_model | LangChain / hook |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in sizes:
        for usage in (True, False):
            messages = history(n, usage=usage)
            compactor = Compactor(model="extractive", trigger_tokens=10**9)
            compactor(messages)  # warm the counter's cache, as an agent's first call does
            base = per_call(list, messages)
            hook = per_call(compactor, messages)
            lc = langchain_hook(messages)
            theirs = lc_per_call(lc, 5 if n >= 50_000 else 20) if lc else None
            shown = f"{theirs * 1e3:.2f} ms | {theirs / hook:.0f}x" if theirs else "n/a | n/a"
            print(
                f"| {n:,} | {'yes' if usage else 'no'} | {base * 1e6:.1f} µs | "
                f"{hook * 1e6:.1f} µs | {hook / base:.2f}x | {shown} |"
            )


if __name__ == "__main__":
    main()
