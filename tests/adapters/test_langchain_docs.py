"""docs/langchain.md shows examples/langchain_agent.py verbatim, and the example runs."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "langchain.md"
EXAMPLE = ROOT / "examples" / "langchain_agent.py"


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


def test_the_page_shows_the_example_file_and_nothing_else() -> None:
    """Every Python block of the page is an example file, so every example on it runs (the
    search_history one by tests/adapters/test_search_history_docs.py)."""
    search = ROOT / "examples" / "search_history_langchain.py"
    assert python_blocks(PAGE) == [
        EXAMPLE.read_text(encoding="utf-8"),
        search.read_text(encoding="utf-8"),
    ]


def test_the_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "14 messages in the state, the first one a summary:"
    assert out[1].startswith('<synopsis:summary version="1"')
    assert out[2] == "session summary version 4"
