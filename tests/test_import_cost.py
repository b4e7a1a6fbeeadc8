"""``import synopsis`` loads only the package and its table of lazy names: counted in a fresh
interpreter (the modules it leaves in ``sys.modules``), never timed (the timing is
``bench/bench_startup.py``). On a7a6f03 it loaded 73 of synopsis's modules, rich's absence
aside every heavy part: the stores, sqlite3, tenacity, the redaction patterns, the extractive
model."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import synopsis

#: Modules ``import synopsis`` must not load (third-party, the stores, the heavy parts).
HEAVY = (
    "click",
    "rich",
    "sqlite3",
    "psycopg",
    "tenacity",
    "httpx",
    "pydantic",
    "synopsis.memory",
    "synopsis.redact",
    "synopsis.models",
    "synopsis.compaction",
    "synopsis.session",
    "synopsis.summarizer",
)
MAX_OWN_MODULES = 3


def loaded_after(code: str) -> list[str]:
    script = f"import sys\n{code}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    return list(json.loads(out))


def test_import_synopsis_loads_at_most_a_few_of_its_modules_and_nothing_heavy() -> None:
    modules = loaded_after("import synopsis")
    own = [m for m in modules if m == "synopsis" or m.startswith("synopsis.")]
    assert len(own) <= MAX_OWN_MODULES, own
    heavy = [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert not heavy, heavy


def test_a_public_name_loads_what_it_needs_on_first_use() -> None:
    modules = loaded_after("import synopsis\nsynopsis.ConfigError")
    assert "synopsis.errors" in modules and "synopsis.compaction" not in modules
    modules = loaded_after("from synopsis import Compactor")
    assert "synopsis.compaction.compactor" in modules and "synopsis.memory" not in modules


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        synopsis.Nope  # noqa: B018 - the lookup is the test
    assert "Compactor" in dir(synopsis)


def test_synopsis_help_loads_click_and_the_command_list_only() -> None:
    """``synopsis --help`` lists the commands without importing them: no compactor, store,
    server or rich (a7a6f03 loaded 83 of synopsis's modules for it)."""
    modules = loaded_after(
        "from synopsis.cli import main\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--help'], standalone_mode=False)"
    )
    own = [m for m in modules if m == "synopsis" or m.startswith("synopsis.")]
    assert len(own) <= 6, own
    heavy = [
        m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY if h != "click")
    ]
    assert not heavy, heavy


def test_the_command_list_says_what_each_command_says_of_itself() -> None:
    """The one line per command ``synopsis --help`` (and ``synopsis memory --help``) shows
    without importing it is the line the command's own help gives (the list cannot drift
    from the commands)."""
    import click

    from synopsis.cli import LazyGroup, main
    from synopsis.cli.memory import memory

    for group in (main, memory):
        assert isinstance(group, LazyGroup)
        context = click.Context(group)
        for name, (load, line) in group.lazy.items():
            command = load()
            assert command.get_short_help_str(limit=len(line)) == line, name
            assert group.get_command(context, name) is not None


def test_the_memory_group_imported_alone_has_every_command() -> None:
    """``synopsis.cli.memory.memory`` embedded in another click app, or invoked by a test,
    is whole: import and export live in a module of their own, which imports this one."""
    code = (
        "import click; from synopsis.cli.memory import memory; "
        "print(sorted(memory.list_commands(click.Context(memory))))"
    )
    listed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert listed.strip() == str(["delete-user", "export", "import", "put", "reembed", "search"])
