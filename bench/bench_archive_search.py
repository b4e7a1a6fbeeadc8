"""The cost of ``search_history``: archive search latency by archive and archive size.

Each archive gets ``N`` archived messages of one session (a synthetic chat: people, places,
numbers and dates over varied filler, so BM25 has real work), written in batches of 40 as
compaction writes them. Reported for each archive and size: the first search (which builds the
index for MemoryArchive and JsonlArchive; a plain query for the stores), the median and p95 of
the later searches (each a different query of 2-3 keywords), and one more search after one
more batch was archived (MemoryArchive and JsonlArchive index only what was added).

Archives: MemoryArchive, JsonlArchive, StoreArchive over SQLite (a file), and StoreArchive over
PostgreSQL with ``--postgres-url``. Usage:
``bench_archive_search.py [--sizes 1000,10000] [--queries 50] [--postgres-url URL]``.
Prints Markdown. Rerunnable anywhere; the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from synopsis import JsonlArchive, MemoryArchive, StoreArchive
from synopsis.memory import SQLiteStore

PEOPLE = ["Alice", "Bruno", "Chen Wei", "Dana", "Emeka", "Farah", "Goran", "Hana"]
PLACES = ["Lisbon", "Osaka", "Nairobi", "Quito", "Tallinn", "Hangzhou", "Porto", "Denver"]
THINGS = ["invoice", "flight", "deploy", "ticket", "contract", "router", "budget", "migration"]
FILLER = [
    "that",
    "sounds",
    "fine",
    "let",
    "me",
    "check",
    "the",
    "notes",
    "again",
    "before",
    "we",
    "decide",
    "anything",
    "about",
    "the",
    "schedule",
    "or",
    "the",
    "team",
    "and",
    "the",
    "plan",
    "for",
    "next",
    "week",
]
BATCH = 40


def message(rng: random.Random, i: int) -> dict[str, Any]:
    words = rng.sample(FILLER, 12)
    fact = (
        f"{rng.choice(PEOPLE)} said the {rng.choice(THINGS)} for {rng.choice(PLACES)} "
        f"is number {rng.randint(100, 9999)} on day {rng.randint(1, 28)}"
    )
    words.insert(rng.randint(0, len(words)), fact)
    return {"role": "user" if i % 2 == 0 else "assistant", "content": " ".join(words)}


def queries(rng: random.Random, count: int) -> list[str]:
    return [
        f"{rng.choice(THINGS)} {rng.choice(PLACES)}"
        + (f" {rng.choice(PEOPLE)}" if rng.random() < 0.5 else "")
        for _ in range(count)
    ]


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def measure(archive: Any, size: int, asked: list[str], neighbours: int = 0) -> dict[str, float]:
    rng = random.Random(size)
    history = [message(rng, i) for i in range(size)]
    for start in range(0, size, BATCH):
        archive.write(history[start : start + BATCH], session_id="s1")

    def search(query: str) -> Any:
        return archive.search(query, session_id="s1", neighbours=neighbours)

    first = timed(lambda: search(asked[0]))
    later = [timed(lambda q=q: search(q)) for q in asked[1:]]
    archive.write([message(rng, size + i) for i in range(BATCH)], session_id="s1")
    after = timed(lambda: search(asked[0]))
    later.sort()
    return {
        "first": first,
        "p50": statistics.median(later),
        "p95": later[int(0.95 * (len(later) - 1))],
        "after": after,
    }


def archives(directory: Path, postgres_url: str | None) -> list[tuple[str, Callable[[], Any]]]:
    found: list[tuple[str, Callable[[], Any]]] = [
        ("MemoryArchive", MemoryArchive),
        ("JsonlArchive", lambda: JsonlArchive(directory / uuid.uuid4().hex)),
        (
            "StoreArchive (SQLite file)",
            lambda: StoreArchive(SQLiteStore(directory / f"{uuid.uuid4().hex}.db"), "bench"),
        ),
    ]
    if postgres_url:
        from synopsis.memory import PostgresStore

        found.append(
            (
                "StoreArchive (PostgreSQL)",
                lambda: StoreArchive(
                    PostgresStore(postgres_url, schema=f"bench_{uuid.uuid4().hex[:8]}"), "bench"
                ),
            )
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--postgres-url", default=os.environ.get("SYNOPSIS_TEST_POSTGRES_URL"))
    parser.add_argument(
        "--neighbours", type=int, default=0, help="messages either side of each hit (the tool: 1)"
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    asked = queries(random.Random(7), args.queries)
    print(
        f"Archive search, {args.queries} queries per row, neighbours={args.neighbours}, ms "
        f"(load {os.getloadavg()[0]:.2f})\n"
    )
    print("| archive | messages | first search | p50 | p95 | after one more batch |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as directory:
        for name, make in archives(Path(directory), args.postgres_url):
            for size in sizes:
                archive = make()
                row = measure(archive, size, asked, args.neighbours)
                store = getattr(archive, "store", None)
                if store is not None:
                    store.close()
                cells = " | ".join(f"{row[k]:.1f}" for k in ("first", "p50", "p95", "after"))
                print(f"| {name} | {size:,} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
