"""The package's shape, pinned: small modules and functions, and imports that never run upward."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "synopsis"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
#: Lower layers that must not know the layers built on them.
FORBIDDEN = {
    "memory": ("synopsis.session", "synopsis.compaction", "synopsis.server", "synopsis.adapters"),
    "models": ("synopsis.session", "synopsis.compaction", "synopsis.server", "synopsis.adapters"),
}


def modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def imported_modules(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_module_and_function_sizes(path: Path) -> None:
    """No module over 600 lines, no function over 60."""
    text = path.read_text(encoding="utf-8")
    lines = len(text.splitlines())
    assert lines <= MAX_MODULE_LINES, f"{lines} lines"
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (node.end_lineno or 0) - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_lower_layers_never_import_upward(package: str) -> None:
    """Nothing under memory/ or models/ imports session, compaction, server or adapters."""
    offenders = [
        f"{path.relative_to(SRC)} imports {name}"
        for path in sorted((SRC / package).rglob("*.py"))
        for name in imported_modules(ast.parse(path.read_text(encoding="utf-8")))
        if name.startswith(FORBIDDEN[package])
    ]
    assert not offenders
