"""docs/compaction.md, docs/configuration.md and docs/errors.md: every example runs, and every
table of facts is checked against the code, so the pages cannot drift from it.

The command-line reference in docs/configuration.md is generated from the click commands
(what ``--help`` shows, as tables); after changing a flag, regenerate it with
``python -m tests.test_docs``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

import synopsis
import synopsis.errors
from synopsis import CompactionOptions
from synopsis.cli import main
from synopsis.cli._errors import cli_error
from synopsis.compaction import ToolClearing
from synopsis.config import VARIABLES
from synopsis.errors import AllModelsFailed, SynopsisError
from synopsis.server.errors import status_of

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = ("compaction.md", "configuration.md", "errors.md")
_PYTHON = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
_GENERATED = re.compile(r"(<!-- generated: cli -->\n)(.*?)(<!-- end: cli -->)", re.S)


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def rows(text: str, heading: str) -> list[list[str]]:
    """The cells of the first Markdown table after ``heading``, header and rule left out."""
    section = text.split(heading, 1)[1]
    table = re.search(r"^\|.*?(?=\n\n|\n[^|]|\Z)", section, re.S | re.M)
    assert table, f"no table after {heading!r}"
    lines = table.group(0).splitlines()[2:]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines]


@contextlib.contextmanager
def inside(directory: Path) -> Iterator[None]:
    here = Path.cwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(here)


# --- the examples ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", PAGES)
def test_every_example_runs(name: str, tmp_path: Path) -> None:
    """The page's Python blocks run in order, in one namespace, in an empty directory."""
    blocks = _PYTHON.findall(page(name))
    assert blocks, f"docs/{name} has no example"
    namespace: dict[str, object] = {"__name__": f"docs.{name}"}
    with inside(tmp_path):
        for number, block in enumerate(blocks, 1):
            exec(compile(block, f"docs/{name} block {number}", "exec"), namespace)


def test_the_readme_links_every_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    documentation = readme.split("## Documentation", 1)[1]
    for name in (*PAGES, "benchmarks.md", "benchmarks-log.md"):
        assert f"docs/{name}" in documentation and (DOCS / name).is_file(), name


# --- compaction ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("heading", "value"), [("## Options", CompactionOptions()), ("`ToolClearing`", ToolClearing())]
)
def test_every_compaction_option_is_documented_with_its_default(heading: str, value: Any) -> None:
    """The options tables list every field, in order, and each default evaluates to the
    code's own (``Trigger(tokens=160_000)`` == ``CompactionOptions().trigger``)."""
    table = rows(page("compaction.md"), heading)
    assert [name.strip("`") for name, *_ in table] == [f.name for f in dataclasses.fields(value)]
    names = {**{n: getattr(synopsis, n) for n in synopsis.__all__}, "ToolClearing": ToolClearing}
    for name, default, *_ in table:
        assert eval(default.strip("`"), names) == getattr(value, name.strip("`")), name


# --- configuration ---------------------------------------------------------------------------


def test_every_variable_is_documented_as_it_is_read() -> None:
    """The variables table lists exactly config.VARIABLES, in order, with their settings."""
    table = rows(page("configuration.md"), "## Environment variables")
    documented = [(variable.strip("`"), field.strip("`")) for variable, field, *_ in table]
    assert documented == [(variable, name) for name, variable in VARIABLES.items()]


def _commands(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            assert sub is not None, name
            yield from _commands(sub, f"{path} {name}")
    else:
        yield path, command


def cli_reference() -> str:
    """One table per command: each option as ``--help`` shows it, and its help text."""
    parts = []
    for path, command in _commands(main, "synopsis"):
        context = click.Context(command, info_name=path)
        arguments = " ".join(
            p.make_metavar(context) for p in command.params if isinstance(p, click.Argument)
        )
        summary = " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split())
        lines = [f"### `{path}{' ' + arguments if arguments else ''}`", "", summary, ""]
        lines += ["| option | what it does |", "| --- | --- |"]
        for param in command.params:
            record = param.get_help_record(context) if isinstance(param, click.Option) else None
            if record is not None:
                flags, text = (part.replace("|", "\\|") for part in record)
                lines.append(f"| `{flags}` | {text} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def test_every_flag_is_documented_as_help_shows_it() -> None:
    """The command-line reference is what the click commands say (regenerate it with
    ``python -m tests.test_docs`` when a flag changes)."""
    found = _GENERATED.search(page("configuration.md"))
    assert found, "docs/configuration.md lost its generated command-line reference"
    assert found.group(2) == cli_reference()


# --- errors ----------------------------------------------------------------------------------


def _tree() -> list[type[SynopsisError]]:
    return [
        value
        for value in vars(synopsis.errors).values()
        if inspect.isclass(value) and issubclass(value, SynopsisError)
    ]


def _instance(error_type: type[SynopsisError]) -> SynopsisError:
    if error_type is AllModelsFailed:
        return AllModelsFailed("all failed", [ValueError("x")])
    return error_type.__new__(error_type, "x")


def test_every_error_is_documented_with_its_parent_status_and_exit_code() -> None:
    """One row per class of synopsis.errors: its parent in the tree, the server's HTTP status
    and the CLI's exit code, as the code decides them; and each class once in the drawing."""
    text = page("errors.md")
    table = {name.strip("`"): cells for name, *cells in rows(text, "## What each one means")}
    expected = {}
    for error_type in _tree():
        parent = next(b for b in error_type.__bases__ if issubclass(b, Exception)).__name__
        error = _instance(error_type)
        expected[error_type.__name__] = [
            f"`{parent}`",
            str(status_of(error)),
            str(cli_error(error).exit_code),
        ]
    assert {name: cells[:3] for name, cells in table.items()} == expected
    drawing = text.split("```", 2)[1]
    for error_type in _tree():
        assert len(re.findall(rf"\b{error_type.__name__}\n", drawing)) == 1, error_type


if __name__ == "__main__":  # rewrite the generated reference: python -m tests.test_docs
    target = DOCS / "configuration.md"
    text = target.read_text(encoding="utf-8")
    if not _GENERATED.search(text):
        sys.exit("docs/configuration.md has no <!-- generated: cli --> section")
    target.write_text(_GENERATED.sub(lambda m: m.group(1) + cli_reference() + m.group(3), text))
