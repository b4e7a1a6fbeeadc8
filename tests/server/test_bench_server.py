"""``bench/bench_server.py`` still runs end to end, on a few requests (speed is not checked)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_server_runs_quickly_on_sqlite() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_server.py"), "--quick", "--requests", "8"],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "**50 clients**" in done.stdout and "| SQLite | 1 | 10 |" in done.stdout
    assert "| now, h11 + asyncio, httpx pool |" in done.stdout
