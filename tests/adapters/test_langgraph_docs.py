"""docs/langgraph.md shows examples/langgraph_store.py verbatim, and the example runs."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from tests.adapters.test_langchain_docs import python_blocks

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "langgraph.md"
EXAMPLE = ROOT / "examples" / "langgraph_store.py"


def test_the_page_shows_the_example_file_and_nothing_else() -> None:
    """Every Python block of the page is an example file, so every example on it runs (the
    search_history one by tests/adapters/test_search_history_docs.py)."""
    search = ROOT / "examples" / "search_history_langgraph.py"
    assert python_blocks(PAGE) == [
        EXAMPLE.read_text(encoding="utf-8"),
        search.read_text(encoding="utf-8"),
    ]


def test_the_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "recalled: ['用户每天早上都喜欢喝一杯手冲咖啡']"
    assert out[1] == "namespaces: [('user', 'user-1', 'notes')]"
    assert out[2] == "another tenant sees: []"
    assert out[3].endswith("messages in the state, the first one a summary:")
    assert out[4].startswith("<synopsis:summary")
