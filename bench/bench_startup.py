"""Benchmark: start-up time of ``import synopsis`` and ``synopsis --help``, against
``python -c pass`` measured in the same run (the runs interleaved, so load changes hit all
three alike; medians of ``--runs`` each). Run: ``python bench/bench_startup.py``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    script = shutil.which("synopsis", path=os.path.dirname(sys.executable)) or "synopsis"
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import synopsis'": [sys.executable, "-c", "import synopsis"],
        "synopsis --help": [script, "--help"],
    }
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            samples[name].append(timed(command))
    anchor = statistics.median(samples["python -c pass"])
    print(
        f"# start-up, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load {os.getloadavg()[0]:.2f}, median of {runs}"
    )
    print("| command | median | / python -c pass |")
    print("|---|---:|---:|")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"| `{name}` | {median * 1e3:.0f} ms | {median / anchor:.1f}x |")


if __name__ == "__main__":
    main()
