"""Benchmark (c): the before-model hook's overhead per call when nothing triggers.

Measures ``Compactor.__call__`` on a history growing to 10,000 messages, against the cost of
the cheapest possible hook (``list(messages)``, the copy any transform returning a new list
pays) measured in the same run. Run: ``python bench/bench_hook.py``.
"""

from __future__ import annotations

import platform
import statistics
import time
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


def main() -> None:
    print(
        f"# hook overhead, {time.strftime('%Y-%m-%d')} on {platform.machine()}, "
        f"Python {platform.python_version()}"
    )
    print("| history | usage | baseline list() | Compactor hook | hook / baseline |")
    print("|---:|---|---:|---:|---:|")
    for n in (1_000, 10_000):
        for usage in (True, False):
            messages = history(n, usage=usage)
            compactor = Compactor(model="extractive", trigger_tokens=10**9)
            compactor(messages)  # warm the counter's cache, as an agent's first call does
            base = per_call(list, messages)
            hook = per_call(compactor, messages)
            print(
                f"| {n:,} | {'yes' if usage else 'no'} | {base * 1e6:.1f} µs | "
                f"{hook * 1e6:.1f} µs | {hook / base:.2f}x |"
            )


if __name__ == "__main__":
    main()
