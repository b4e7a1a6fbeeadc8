"""The benchmark scripts still run end to end, on tiny inputs (results are not checked for speed).

They live outside the package, so nothing else would notice an API change breaking them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_store_scale_runs_on_sqlite() -> None:
    out = run("bench_store_scale.py", "--sizes", "1500", "--backends", "sqlite", "--queries", "8")
    assert "| sqlite | 1,500 |" in out
    assert "put_many" in out


def test_kind_filter_runs_on_sqlite() -> None:
    out = run("bench_kind_filter.py", "--size", "1500", "--backends", "sqlite", "--queries", "60",
              "--index-with-kind")  # fmt: skip
    assert "| sqlite |" in out and "| sqlite, kind in memories_scope |" in out


def test_ingest_compares_two_trees_on_sqlite() -> None:
    """bench_ingest runs each tree in its own process and prints one row per tree."""
    src = str(BENCH.parent / "src")
    out = run(
        "bench_ingest.py", "--size", "1200", "--batch", "500", "--backends", "sqlite",
        "--rounds", "1", "--trees", f"a={src},b={src}",
    )  # fmt: skip
    assert "| sqlite | a |" in out
    assert "| sqlite | b |" in out


def _tiny_locomo() -> list[dict[str, object]]:
    """Two sessions in the LoCoMo schema, with questions whose evidence is known."""
    talk = {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1 May 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a beagle named Rex."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! I bought a red kayak."},
        ],
        "session_2_date_time": "9 May 2023",
        "session_2": [
            {"speaker": "Ana", "dia_id": "D2:1", "text": "Rex chewed my running shoes."},
            {"speaker": "Ben", "dia_id": "D2:2", "text": "The kayak trip was cancelled by rain."},
        ],
    }
    qa = [
        {"question": "What breed is Rex?", "evidence": ["D1:1"], "category": 4},
        {"question": "Why was the kayak trip cancelled?", "evidence": ["D2:2"], "category": 4},
        {"question": "No evidence here", "evidence": [], "category": 5},
    ]
    summaries = {"session_1_summary": "Ana adopted Rex; Ben bought a kayak."}
    return [{"sample_id": "c1", "conversation": talk, "qa": qa, "session_summary": summaries}]


def test_locomo_runs_on_a_tiny_file(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(_tiny_locomo()), encoding="utf-8")
    out = run("bench_locomo.py", "--data", str(data), "--no-embeddings")
    assert "4 turns + 1 session summaries indexed, 2 questions with evidence" in out
    ours = next(line for line in out.splitlines() if line.startswith("| synopsis keyword"))
    # Both questions name their evidence turn's words, so our search finds both in the top 5.
    assert ours.split(" | ")[1] == "1.000"


def _tiny_locomo_with_answers() -> list[dict[str, object]]:
    """Three short sessions; every question's answer words are said in one turn."""
    talk: dict[str, object] = {"speaker_a": "Ana", "speaker_b": "Ben"}
    for number in (1, 2, 3):
        talk[f"session_{number}_date_time"] = f"{number} May 2023"
        talk[f"session_{number}"] = [
            {
                "speaker": "Ana",
                "dia_id": f"D{number}:1",
                "text": f"My number {number} pet is a beagle called Rex{number}.",
            },
            {
                "speaker": "Ben",
                "dia_id": f"D{number}:2",
                "text": f"I sailed to island{number} in a red kayak. " * 6,
            },
        ]
    qa = [
        {
            "question": f"Where did Ben sail in session {n}?",
            "answer": f"island{n}",
            "evidence": [f"D{n}:2"],
            "category": 1,
        }
        for n in (1, 2, 3)
    ]
    qa.append({"question": "Unanswerable", "answer": "x", "evidence": [], "category": 5})
    return [{"sample_id": "c1", "conversation": talk, "qa": qa}]


def test_retention_runs_on_a_tiny_file(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(_tiny_locomo_with_answers()), encoding="utf-8")
    out = run("bench_retention.py", "--data", str(data), "--budgets", "120")
    assert "1 conversations, 3 questions with evidence" in out
    assert "### half A, chat layout, budget 120 tokens" in out and "### half A, tool layout" in out
    ceiling = next(line for line in out.splitlines() if line.startswith("| none |"))
    assert ceiling.split(" | ")[1:4] == ["100.0%", "1.000", "100.0%"]  # every answer is said
    tables = {part.splitlines()[0]: part for part in out.split("### ")[1:]}
    for layout in ("chat", "tool"):  # one tiered row in each layout's table
        heading = f"half A, {layout} layout"
        (table,) = (t for title, t in tables.items() if title.startswith(heading))
        assert sum(line.startswith("| tiered |") for line in table.splitlines()) == 1
    grid = next(t for title, t in tables.items() if title.startswith("half A: strict / loose"))
    assert "recent users verbatim 100.0%" in grid  # the seed's guarantee, checked by the bench


def test_cost_runs_on_a_short_session() -> None:
    out = run("bench_cost.py", "--turns", "40", "--budgets", "3000", "--strategies", "tiered@0.5")
    assert "40 turns (seed 11)" in out and "### Budget 3,000 tokens, 40 turns" in out
    rows = [line.split(" | ")[0] for line in out.splitlines() if line.startswith("| ")]
    assert rows[1:] == ["| none", "| summary", "| tiered@0.5"]  # after the header
