"""How redaction and compaction grow with their input, and what a large request does to /healthz.

1. **Redaction growth per detector pair.** For each pair of kinds (one planted value of each,
   ``tests/redaction_corpus.py``'s ``lone_value``), the two values repeated in turn to 100 KB
   and to 1 MB; ``Redactor().redact_text`` timed on both in CPU time, the two sizes in turn
   (best of 3, ``--repeats``), so load on the shared machine weighs on both sizes alike.
   Reported: the largest and median 1 MB / 100 KB ratio over the pairs, and the worst pairs
   (goal: <= 12x).
2. **Compaction growth.** ``Compactor.compact`` with the extractive model (the server's
   default summarizer), with and without ``redact=True``, of a chat history of 100 KB and of
   1 MB (goal: <= 12x).
3. **/healthz under a 2 MB redacted compaction.** ``synopsis serve``'s app (SQLite, its own
   thread pool) answers ``/healthz`` in a loop while one ``POST /v1/compact`` with
   ``"redact": true`` and a 2 MB history runs: p50, p99 and max latency of the probes
   (goal: p99 < 100 ms).

Usage: ``python bench/bench_scaling.py [--quick]`` (``--quick``: 12 pairs, 1 MB healthz body).
Prints Markdown.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from tests.redaction_corpus import KINDS, lone_value

from synopsis import Compactor
from synopsis.redact import Redactor

SMALL, LARGE = 100_000, 1_000_000


def best_of(repeats: int, run: Callable[[], object]) -> float:
    """The least CPU time of ``repeats`` runs. CPU time, not wall time: on a shared machine a
    1 MB run is preempted more often than a 100 KB one, which inflated wall-time ratios to
    16-23x at a load of 8-10 while the CPU-time ratio of the same pairs stayed at 10x."""
    timings = []
    for _ in range(repeats):
        started = time.process_time()
        run()
        timings.append(time.process_time() - started)
    return min(timings)


def best_of_interleaved(
    repeats: int, small: Callable[[], object], large: Callable[[], object]
) -> tuple[float, float]:
    """The best time of each of two runs, timed in turn, so a burst of load on the shared machine
    slows both sizes rather than only the one that happened to run during it."""
    small_times, large_times = [], []
    for _ in range(repeats):
        small_times.append(best_of(1, small))
        large_times.append(best_of(1, large))
    return min(small_times), min(large_times)


def repeated(unit: str, size: int) -> str:
    return unit * max(1, size // len(unit))


def redaction_growth(pairs: list[tuple[str, str]], repeats: int) -> list[str]:
    redactor = Redactor()
    ratios: list[tuple[float, str, float, float]] = []
    for first, second in pairs:
        unit = f"{lone_value(first)} ; {lone_value(second)}\n"
        small, large = best_of_interleaved(
            repeats,
            functools.partial(redactor.redact_text, repeated(unit, SMALL)),
            functools.partial(redactor.redact_text, repeated(unit, LARGE)),
        )
        ratios.append((large / small, f"{first}+{second}", small, large))
    ratios.sort(reverse=True)
    values = [r for r, *_ in ratios]
    lines = [
        f"pairs: {len(ratios)}; 1 MB / 100 KB time ratio: max {max(values):.1f}x, "
        f"median {statistics.median(values):.1f}x (goal <= 12x)\n",
        "| pair (worst first) | 100 KB CPU s | 1 MB CPU s | ratio |",
        "|---|---:|---:|---:|",
    ]
    for ratio, name, small, large in ratios[:8]:
        lines.append(f"| {name} | {small:.3f} | {large:.3f} | {ratio:.1f}x |")
    return lines


def history(size: int) -> list[dict[str, str]]:
    turn = (
        "Please look at src/app/deploy.py: the deploy to 10.2.3.4 failed with TimeoutError, "
        "write to ops@example.com and retry. TODO: check the token refresh in auth.py.\n"
    )
    count = max(4, size // (len(turn) * 4))
    body = turn * 4
    roles = ("user", "assistant")
    return [{"role": "system", "content": "You are a coding agent."}] + [
        {"role": roles[i % 2], "content": f"turn {i}: {body}"} for i in range(count)
    ]


def compaction_growth() -> list[str]:
    lines = [
        "| compaction | 100 KB CPU s | 1 MB CPU s | ratio |",
        "|---|---:|---:|---:|",
    ]
    for redact in (False, True):
        compactor = Compactor(model="extractive", redact=redact, keep_tail=4)
        small_history, large_history = history(SMALL), history(LARGE)
        small = best_of(2, functools.partial(compactor.compact, small_history))
        large = best_of(2, functools.partial(compactor.compact, large_history))
        name = "extractive, redact" if redact else "extractive"
        lines.append(f"| {name} | {small:.3f} | {large:.3f} | {large / small:.1f}x |")
    return lines


def healthz_under_load(size: int) -> list[str]:
    from synopsis.server import ServerOptions, create_app
    from synopsis.server.db import Database
    from synopsis.server.keys import KeyRing
    from synopsis.server.testing import running

    unit = "write to a@b.co from 8.8.8.8 or 2001:db8::1 about deploy.py "
    turns = [
        {"role": ("user", "assistant")[i % 2], "content": unit * 200} for i in range(size // 12_000)
    ]
    body = json.dumps({"messages": turns, "redact": True, "force": True})
    with tempfile.TemporaryDirectory() as folder:
        options = ServerOptions(db=f"{folder}/bench.db")
        with running(create_app(options), lifespan="on") as url:
            with Database(options.db) as db:
                key = KeyRing(db).create("bench").secret
            finished = threading.Event()
            outcome: dict[str, float] = {}

            def compact() -> None:
                started = time.perf_counter()
                with httpx.Client(base_url=url, timeout=600) as client:
                    response = client.post(
                        "/v1/compact",
                        content=body,
                        headers={
                            "authorization": f"Bearer {key}",
                            "content-type": "application/json",
                        },
                    )
                outcome["status"] = response.status_code
                outcome["seconds"] = time.perf_counter() - started
                finished.set()

            latencies: list[float] = []
            with httpx.Client(base_url=url) as probe:
                probe.get("/healthz")
                worker = threading.Thread(target=compact)
                worker.start()
                while not finished.is_set():
                    started = time.perf_counter()
                    probe.get("/healthz")
                    latencies.append(time.perf_counter() - started)
                    time.sleep(0.005)
                worker.join()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return [
        "| body MB | compact status | compact s | probes | p50 ms | p99 ms | max ms |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {len(body) / 1e6:.2f} | {outcome['status']:.0f} | {outcome['seconds']:.1f} "
        f"| {len(latencies)} | {latencies[len(latencies) // 2] * 1000:.1f} "
        f"| {p99 * 1000:.1f} | {latencies[-1] * 1000:.1f} |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="12 pairs, a 1 MB healthz body")
    parser.add_argument("--skip-pairs", action="store_true", help="sections 2 and 3 only")
    parser.add_argument("--pairs-only", action="store_true", help="section 1 only")
    parser.add_argument("--repeats", type=int, default=3, help="timings per size and pair")
    args = parser.parse_args()
    pairs = list(itertools.combinations(KINDS, 2))
    if args.quick:
        pairs = pairs[:: max(1, len(pairs) // 12)][:12]
    if not args.skip_pairs:
        print(
            f"## Redaction growth, 100 KB -> 1 MB, per detector pair "
            f"(CPU time, best of {args.repeats}, sizes timed in turn)\n"
        )
        print("\n".join(redaction_growth(pairs, args.repeats)))
    if args.pairs_only:
        return
    print("\n## Compaction growth, 100 KB -> 1 MB (CPU time, best of 2)\n")
    print("\n".join(compaction_growth()))
    print("\n## /healthz while one redacted compaction runs\n")
    print("\n".join(healthz_under_load(1_000_000 if args.quick else 2_000_000)))


if __name__ == "__main__":
    main()
