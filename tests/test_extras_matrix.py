"""The packaging matrix (scripts/test-extras, scripts/extras_check.py) covers what it must.

The matrix itself builds a venv per install and runs in CI (.ci/run); here, cheaply: it lists
every extra of pyproject.toml, CI runs it, every page's examples are run by it, and a block is
run only where the extras it needs are installed.
"""

from __future__ import annotations

import re
import runpy
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECK = runpy.run_path(str(ROOT / "scripts" / "extras_check.py"))
MATRIX = re.search(r"MATRIX=\((.*?)\)", (ROOT / "scripts" / "test-extras").read_text(), re.S)


def matrix() -> list[str]:
    assert MATRIX is not None
    return MATRIX.group(1).split()


def test_the_matrix_has_every_extra_alone_and_the_plain_install() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = set(pyproject["project"]["optional-dependencies"]) - {"dev"}
    assert extras | {"none"} <= set(matrix())
    assert set(matrix()) == set(CHECK["CHECKS"])


def test_ci_runs_the_matrix() -> None:
    assert "bash scripts/test-extras" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_every_page_with_examples_is_run_by_the_matrix() -> None:
    """Its blocks run on the plain install (PAGES), or the page shows an example file that
    the matrix runs with its extra; docs/server.md's walkthrough needs an upstream model and
    is run by tests/server/test_docs.py."""
    examples = {
        (ROOT / "examples" / check.__name__.removeprefix("examples/")).read_text()
        for checks in CHECK["CHECKS"].values()
        for check in checks
        if check.__name__.startswith("examples/")
    }
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        blocks = CHECK["PYTHON_BLOCK"].findall(page.read_text(encoding="utf-8"))
        name = str(page.relative_to(ROOT))
        if not blocks or name in CHECK["PAGES"] or name == "docs/server.md":
            continue
        assert set(blocks) & examples, f"{name}: no block of it is run by the matrix"


def test_a_block_needs_the_extras_it_names() -> None:
    needs = CHECK["needs"]
    readme = CHECK["PYTHON_BLOCK"].findall((ROOT / "README.md").read_text(encoding="utf-8"))
    assert needs(readme[0]) == {"openai", "anthropic"}  # the library example
    assert [needs(block) for block in readme[1:]].count(frozenset()) == len(readme) - 2
    assert needs("from synopsis.embeddings import StaticEmbedder") == {"embeddings"}
