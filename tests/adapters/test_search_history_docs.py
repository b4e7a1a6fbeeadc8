"""The search_history section of each adapter's page shows its example file verbatim, and the
example, run offline, prints what the page says it prints."""

from __future__ import annotations

import asyncio
import inspect
import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = {
    "langchain": "langchain.md",
    "langgraph": "langgraph.md",
    "pydantic_ai": "pydantic-ai.md",
    "openai_agents": "openai-agents.md",
}
HEADING = "## search_history: the archive within the agent's reach"


def section(page: str) -> str:
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    assert HEADING in text, f"docs/{page} has no search_history section"
    return text.split(HEADING, 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("name", PAGES)
def test_the_section_shows_the_example_file(name: str) -> None:
    example = (ROOT / "examples" / f"search_history_{name}.py").read_text(encoding="utf-8")
    assert re.findall(r"```python\n(.*?)```", section(PAGES[name]), re.S) == [example]


@pytest.mark.parametrize("name", PAGES)
def test_the_example_prints_what_the_page_says(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace = runpy.run_path(str(ROOT / "examples" / f"search_history_{name}.py"))
    main = namespace.get("main")
    if main is not None:
        arguments = [str(tmp_path / "agents.db")] if inspect.signature(main).parameters else []
        asyncio.run(main(*arguments))
    printed = capsys.readouterr().out
    (shown,) = re.findall(r"```output\n(.*?)```", section(PAGES[name]), re.S)
    assert printed == shown
    assert "7429-ALPHA" in printed
