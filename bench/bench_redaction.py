"""Benchmark redaction: precision and recall per kind on the labelled corpus, and throughput.

Run ``python bench/bench_redaction.py`` (``--quick`` for a small run). Prints markdown tables:

(a) Quality: for every kind, the values planted in the generated corpus
    (``tests/redaction_corpus.py``), how many a finding of that kind covered (recall), how
    many findings of that kind there were and how many overlapped a planted value of their
    kind (precision); then overall figures, near-misses left intact, and planted values still
    in the output (in mask, hash and drop mode).
(b) Throughput in MB/s of ``Redactor.redact_text`` against ``str.lower()`` over the same text
    in the same run (best of three), on the corpus text and on Python standard-library
    sources, where secrets are rare and most detectors find nothing.
(c) What the redactor finds in those standard-library sources: mostly true positives (authors'
    e-mail addresses, documentation IP addresses), listed so that false positives show.
(d) What ``redact=`` adds to a compaction: ``Compactor.compact`` of a planted history
    (``tests/redaction_history.py``: every corpus template as chat turns, tool calls and tool
    results) with a summarizer that answers at once, with and without a default Redactor, in
    the same run (best of three), so the ratio is the redaction's share of the local work.
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.redaction_corpus import Report, Sample, build_corpus, score
from tests.redaction_history import planted_history

from synopsis import Compactor, MemoryArchive
from synopsis.redact import Redactor
from synopsis.testing import FakeModel


def quality_table(report: Report) -> list[str]:
    lines = [
        "| kind | planted | caught | findings | correct | precision | recall |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    rows = [*report.by_kind.items(), ("overall", report.overall)]
    for kind, s in rows:
        lines.append(
            f"| {kind} | {s.planted} | {s.caught} | {s.findings} | {s.correct} "
            f"| {s.precision:.3f} | {s.recall:.3f} |"
        )
    return lines


def leaks(samples: list[Sample]) -> list[str]:
    lines = ["| mode | planted values still in the output |", "|---|---:|"]
    for mode in ("mask", "hash", "drop"):
        redactor = Redactor(mode=mode)
        leaked = sum(
            p.value in redactor.redact_text(s.text).text for s in samples for p in s.planted
        )
        lines.append(f"| {mode} | {leaked} |")
    return lines


def best_of(repeats: int, run: Callable[[], object]) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        timings.append(time.perf_counter() - started)
    return min(timings)


def stdlib_text(limit: int) -> str:
    root = Path(sysconfig.get_paths()["stdlib"])
    pieces: list[str] = []
    size = 0
    for path in sorted(root.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        pieces.append(text)
        size += len(text)
        if size >= limit:
            break
    return "\n".join(pieces)


def throughput(texts: dict[str, str]) -> list[str]:
    redactor = Redactor()
    lines = [
        "| text | MB | redact_text MB/s | str.lower MB/s | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, text in texts.items():
        megabytes = len(text.encode()) / 1e6
        ours = best_of(3, functools.partial(redactor.redact_text, text))
        baseline = best_of(3, text.lower)
        lines.append(
            f"| {name} | {megabytes:.2f} | {megabytes / ours:.1f} | "
            f"{megabytes / baseline:.0f} | {ours / baseline:.0f}x |"
        )
    return lines


def stdlib_findings(text: str) -> list[str]:
    counts: collections.Counter[str] = collections.Counter()
    examples: dict[str, list[str]] = collections.defaultdict(list)
    for finding in Redactor().find(text):
        counts[finding.kind] += 1
        if len(examples[finding.kind]) < 3:
            context = text[max(0, finding.start - 20) : finding.end + 5]
            examples[finding.kind].append(repr(context.replace("|", "/")))
    lines = ["| kind | findings | examples |", "|---|---:|---|"]
    for kind, count in counts.most_common():
        lines.append(f"| {kind} | {count} | {'; '.join(examples[kind])} |")
    return lines


def compaction_cost(copies: tuple[int, ...]) -> list[str]:
    """Milliseconds of one compaction with and without ``redact=``; the summary is instant."""
    lines = [
        "| history | messages | KB | without redact ms | with redact ms | ratio |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for count in copies:
        messages = [m for seed in range(count) for m in planted_history(seed=seed).messages[1:]]
        messages.insert(0, {"role": "system", "content": "You are a coding agent."})
        size = sum(len(str(m.get("content") or "")) for m in messages) / 1000
        timings = []
        for redact in (None, Redactor()):
            model = FakeModel(default="<summary>1. Primary request: fix the deploy.</summary>")
            compactor = Compactor(
                model=model, redact=redact, archive=MemoryArchive(), keep_tail=6,
                summarizer_window=1_000_000,
            )  # fmt: skip
            timings.append(best_of(3, functools.partial(compactor.compact, messages)))
        plain, redacted = timings
        lines.append(
            f"| planted x{count} | {len(messages)} | {size:.0f} | {plain * 1000:.1f} | "
            f"{redacted * 1000:.1f} | {redacted / plain:.1f}x |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seed", type=int, default=20240515)
    parser.add_argument("--size", type=int, default=600, help="corpus samples")
    parser.add_argument("--quick", action="store_true", help="120 samples, 300 KB of stdlib")
    args = parser.parse_args()
    size = 120 if args.quick else args.size
    samples = build_corpus(args.seed, size=size)
    report = score(samples, Redactor())
    kept = report.near_misses - len(report.near_misses_hit)
    print(f"## Quality on the generated corpus (seed {args.seed}, {len(samples)} samples)\n")
    print("\n".join(quality_table(report)))
    print(f"\nNear-misses left intact: {kept} of {report.near_misses}\n")
    print("\n".join(leaks(samples)))
    corpus_text = "\n\n".join(s.text for s in samples)
    stdlib = stdlib_text(300_000 if args.quick else 3_000_000)
    print("\n## Throughput (best of 3)\n")
    print("\n".join(throughput({"corpus": corpus_text, "stdlib sources": stdlib})))
    print("\n## Findings in Python standard-library sources\n")
    print("\n".join(stdlib_findings(stdlib)))
    print("\n## What redact= adds to a compaction (best of 3, instant summarizer)\n")
    print("\n".join(compaction_cost((1,) if args.quick else (1, 5))))


if __name__ == "__main__":
    main()
