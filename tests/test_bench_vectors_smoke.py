"""bench_locomo_vectors.py still runs end to end on a tiny LoCoMo-shaped file (static model)."""

from __future__ import annotations

import json
from pathlib import Path

from .test_bench_smoke import _tiny_locomo, run


def test_locomo_vectors_runs_on_a_tiny_file(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(_tiny_locomo()), encoding="utf-8")
    out = run("bench_locomo_vectors.py", "--data", str(data), "--embedders", "static")
    rows = {line.split(" | ")[0]: line.split(" | ") for line in out.splitlines()}
    assert rows["| synopsis keyword (SQLite)"][1] == "1.000"
    assert "| synopsis hybrid, static (SQLite)" in rows
    assert "| min-max, vector 0.7" in rows
    assert "| static" in rows  # the EN/ZH table
