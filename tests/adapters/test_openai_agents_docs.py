"""docs/openai-agents.md: its example is examples/openai_agents_session.py, which runs as shown."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "openai-agents.md"
EXAMPLE = ROOT / "examples" / "openai_agents_session.py"


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_page_shows_the_example_file_as_it_is() -> None:
    assert EXAMPLE.read_text(encoding="utf-8") in blocks("python")


async def test_the_example_runs_offline_and_prints_what_the_page_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main = runpy.run_path(str(EXAMPLE))["main"]
    await main(str(tmp_path / "agents.db"))
    assert capsys.readouterr().out == blocks("text")[-1]
