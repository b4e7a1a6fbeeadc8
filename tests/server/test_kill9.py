"""kill -9 during appends and summary jobs (issue 19), at a size CI can afford.

``bench/bench_kill9.py`` SIGKILLs a real ``synopsis serve`` while writers append and jobs run,
then checks the database: every acknowledged append stored once, nothing torn or doubled,
positions contiguous, and every session summarized after one restart. The long run (30 kills,
30 sessions) is the bench's default; its figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLEAN = (
    "position gaps", "count mismatches", "stored twice", "acknowledged but lost",
    "appends stored in part", "stored but never sent",
)  # fmt: skip


def _killed(*extra: str) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_kill9.py"), "--kills", "3", "--sessions",
         "6", "--sweep", "1", "--lease", "1", "--max-run", "1.5", "--wait", "40", *extra],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.strip("|").split("|") for line in done.stdout.splitlines() if line.startswith("|")]
    return {name.strip(): value.strip() for name, value in rows}


def _check(found: dict[str, str]) -> None:
    assert int(found["appends sent"]) > 0
    assert {name: found[name] for name in CLEAN} == dict.fromkeys(CLEAN, "0")
    assert found["sessions with < every messages past their summary"] == "6/6"


def test_kill_9_loses_nothing_and_every_session_is_summarized_on_sqlite() -> None:
    _check(_killed())


@pytest.mark.postgres
def test_kill_9_on_postgresql(postgres_url: str, pg_schema: str) -> None:
    _check(_killed("--db", postgres_url, "--schema", pg_schema))
