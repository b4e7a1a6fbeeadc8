"""The cost guard of a retention-tuned default: ``bench_cost.py``'s 1,000-turn coding session,
billed for the default's variants (``_retention_variants.py``) beside the shipped default.

Run ``python bench/_retention_cost.py default default:target=0.5`` (``--turns``,
``--budgets``, ``--seed`` as in ``bench_cost.py``). Prints, per budget and strategy, the input
tokens billed, the summarizer's calls, its input and output tokens, all tokens, and the
priced total with prompt caching, each also as a ratio to the first strategy named.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_cost
from bench_retention import strategy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="+", help="strategies; the first is the reference")
    parser.add_argument("--turns", type=int, default=1_000)
    parser.add_argument("--budgets", default="32000,64000")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    bench_cost.make = strategy  # bill() builds each strategy through this name
    turns = list(bench_cost.session(args.turns, args.seed))
    for budget in (int(b) for b in args.budgets.split(",")):
        print(f"\n### Budget {budget:,} tokens, {args.turns:,} turns (seed {args.seed})\n")
        print(
            "| strategy | input billed | summarizer calls | summarizer in / out | all tokens "
            "| vs first | priced with caching | vs first |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        first: bench_cost.Bill | None = None
        for name in args.names:
            bill = bench_cost.bill(name, budget, turns, "extractive")
            first = first or bill
            print(
                f"| {name} | {bill.input_tokens:,} | {bill.summarizer_calls:,} "
                f"| {bill.summarizer_input:,} / {bill.summarizer_output:,} | {bill.total:,} "
                f"| {bill.total / first.total:.3f} | {bill.priced:,.0f} "
                f"| {bill.priced / first.priced:.3f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
