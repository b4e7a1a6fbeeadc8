"""Every regular expression on a text path, timed on adversarial input of growing size.

Each case feeds one pattern (or the function that wraps it) the input that hurt it most: a
long run of ``@`` for the path pattern, blanks for the heading pattern, unclosed tags for the
block extractors, and so on. Sizes double (10k, 20k, 40k, 80k characters by default); the
ratio printed per doubling is ~2 for linear code and ~4 for quadratic code. A plain
``str.count`` over the same input is timed in the same run as the baseline. The last two cases
run end to end: the extractive summary, and a forced compaction (what ``synopsis compact``
does) of a transcript holding one such user message.

Only names that also existed before the fix are used, so the script runs against an older
tree too (``PYTHONPATH=old/src python bench/bench_regex.py --sizes 2500,5000,10000``) and
shows the quadratic ratios there.

    python bench/bench_regex.py [--sizes 10000,20000,40000,80000] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import itertools
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from synopsis import Compactor
from synopsis.compaction import summary as post
from synopsis.memory import ranking
from synopsis.models import _facts as facts
from synopsis.models import _transcript as transcripts
from synopsis.models import extractive
from synopsis.prompts import ENGLISH, USER_MESSAGES_TAG
from synopsis.summarizer import extract_summary
from synopsis.tokens import default_estimate

# The instruction that makes the extractive model read its input's <previous_summary> block.
_INSTRUCTION_HEAD = f"<summary> {USER_MESSAGES_TAG} "


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    unit: str  # repeated to the wanted size, unless ``make`` builds the input
    run: Callable[[str], object]
    make: Callable[[int], str] | None = None

    def text(self, size: int) -> str:
        if self.make is not None:
            return self.make(size)
        return (self.unit * (size // len(self.unit) + 1))[:size]


def _few_ideographs(size: int) -> str:
    """Chinese-looking text over 50 characters: many distinct, repeated 2- to 4-grams."""
    state, chars = 12345, []
    for _ in range(size):
        state = (state * 1103515245 + 12345) % 2**31  # a fixed LCG: the same text every run
        chars.append(chr(0x4E00 + state % 50))
    return "".join(chars)


def _scan(pattern: re.Pattern[str]) -> Callable[[str], object]:
    return lambda text: sum(1 for _ in pattern.finditer(text))


def _per_line(pattern: re.Pattern[str]) -> Callable[[str], object]:
    return lambda text: sum(1 for line in text.splitlines() if pattern.match(line))


def _compact(text: str) -> object:
    history = [
        {"role": "user", "content": text},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "next"},
    ]
    return Compactor(model="extractive").compact(history, force=True)


def _summarize_instruction(text: str) -> object:
    instruction = {"role": "user", "content": _INSTRUCTION_HEAD + text}
    return extractive.extractive_summary([{"role": "user", "content": "hi"}, instruction])


def cases() -> list[Case]:
    """One case per pattern and adversarial input; end-to-end cases last."""
    heading = post._HEADING.format(n=6)
    return [
        Case("extractive._PATH @-run", "@", _scan(extractive._PATH)),
        Case("extractive._PATH word@", "f@", _scan(extractive._PATH)),
        Case("extractive._PATH a/", "a/", _scan(extractive._PATH)),
        Case("extractive._PATH a.", "a.", _scan(extractive._PATH)),
        Case("extractive <previous_summary>", "<previous_summary>", _summarize_instruction),
        Case("extractive._IDENT `a", "`a", _scan(extractive._IDENT)),
        Case("extractive._IDENT a.a", "a.", _scan(extractive._IDENT)),
        Case("extractive._CODE_DEF", "def\t", _scan(extractive._CODE_DEF)),
        Case("_facts.ERROR", "exit code ", _scan(facts.ERROR)),
        Case("extractive._TODO", " ", _per_line(extractive._TODO)),
        Case("extractive._EXCEPTION_LINE", " ", _per_line(extractive._EXCEPTION_LINE)),
        Case("extractive._INLINE_TODO", "TODOx", _scan(extractive._INLINE_TODO)),
        Case("_transcript._SUMMARY_TAG", "</summary", _scan(transcripts._SUMMARY_TAG)),
        Case("_facts.CJK_RUN", "的了", _scan(facts.CJK_RUN)),
        Case("extractive section marks", " \t#*", lambda t: extractive._previous_sections(t)),
        Case("summary._HEADING blanks", " ", _scan(re.compile(heading, re.MULTILINE))),
        Case("summary._HEADING tabs", "\t ", lambda t: post._heading(6, t, ENGLISH)),
        Case("summary._USER_BLOCK open", f"<{USER_MESSAGES_TAG}>", _scan(post._USER_BLOCK)),
        Case("summary._TAG_IN_TEXT", f"</{USER_MESSAGES_TAG}", _scan(post._TAG_IN_TEXT)),
        Case("summary._ESCAPED_TAG", f"&lt;/{USER_MESSAGES_TAG}", _scan(post._ESCAPED_TAG)),
        Case("summary.parse_user_messages_block", f"<{USER_MESSAGES_TAG}>- a\n", _parse_block),
        Case("summarizer <analysis> unclosed", "<analysis>", extract_summary),
        Case("summarizer <summary> unclosed", "<summary>", extract_summary),
        Case("summarizer <analysis><summary>", "<analysis><summary>", extract_summary),
        Case("tokens.default_estimate A", "A", default_estimate),
        Case("tokens.default_estimate punct", "!a", default_estimate),
        Case("tokens.default_estimate mixed", "aé中 1", default_estimate),
        Case("memory.ranking._TOKEN", "a'", _scan(ranking._TOKEN)),
        Case("end to end: extractive summary @", "@", _summarize_user),
        Case("end to end: extractive summary 中文", "的用户消息中文", _summarize_user),
        Case("end to end: extractive summary 50 ideographs", "", _summarize_user, _few_ideographs),
        Case("end to end: compact @", "@", _compact),
        Case("end to end: compact <analysis>", "<analysis>", _compact),
    ]


def _parse_block(text: str) -> object:
    return post.parse_user_messages_block(text)


def _summarize_user(text: str) -> object:
    return extractive.extractive_summary([{"role": "user", "content": text}])


def best_time(run: Callable[[str], object], text: str, budget: float = 0.05) -> float:
    """The fastest of a few calls (at least three, or as many as fit in ``budget`` seconds)."""
    best, spent, calls = float("inf"), 0.0, 0
    while calls < 3 or (spent < budget and calls < 50):
        start = time.perf_counter()
        run(text)
        elapsed = time.perf_counter() - start
        best, spent, calls = min(best, elapsed), spent + elapsed, calls + 1
    return best


def _count_baseline(text: str) -> object:
    return text.count("\n")


def measure(case: Case, sizes: list[int]) -> tuple[list[float], list[float]]:
    times, baselines = [], []
    for size in sizes:
        text = case.text(size)
        times.append(best_time(case.run, text))
        baselines.append(best_time(_count_baseline, text))
    return times, baselines


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f}"


def _ratios(times: list[float]) -> str:
    return " ".join(f"{b / a:.1f}x" if a > 0 else "-" for a, b in itertools.pairwise(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,20000,40000,80000")
    parser.add_argument("--only", default="", help="Run only cases whose name contains this.")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    header = " | ".join(f"{s:,} ms" for s in sizes)
    print(f"| case | {header} | ratio per doubling | str.count µs at {sizes[-1]:,} |")
    print("|---" * (len(sizes) + 3) + "|")
    for case in cases():
        if args.only not in case.name:
            continue
        times, baselines = measure(case, sizes)
        cells = " | ".join(_ms(t) for t in times)
        print(f"| {case.name} | {cells} | {_ratios(times)} | {_us(baselines[-1])} |", flush=True)
    print("\nlinear code doubles its time per doubling (~2x); quadratic code quadruples it (~4x)")


if __name__ == "__main__":
    main()
