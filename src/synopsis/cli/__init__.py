"""The ``synopsis`` command line: count, compact, memory, serve, keys, mcp.

Every command takes ``--json`` for machine-readable output. A failure prints one clear line
on stderr, never a traceback or a usage screen, and exits with an :class:`ExitCode`: 0
success, 2 bad input or usage (a bad option, a directory given as FILE), 3 summarization
failed (the history was kept), 4 store error. With ``--json`` a failure is also a JSON object
on stdout, ``{"ok": false, "error": {"type": ..., "message": ...}}``. Progress shows on stderr
only when it is a terminal (not with ``--quiet`` or ``--json``).

Each command is imported when it runs or shows its own help, so ``synopsis --help`` loads
click and this module, not the compactor, the stores or the server (:class:`LazyGroup`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from synopsis._lazy import exports as _exports
from synopsis.cli._errors import (
    BadInput,
    CliError,
    ExitCode,
    OneLineCommand,
    OneLineGroup,
    fail,
    one_line_errors,
)

if TYPE_CHECKING:
    from synopsis.cli._commands import compact as compact
    from synopsis.cli._commands import compaction_options as compaction_options
    from synopsis.cli._commands import count as count
    from synopsis.cli._terminal import Terminal

__all__ = [
    "BadInput",
    "CliError",
    "ExitCode",
    "LazyGroup",
    "OneLineCommand",
    "OneLineGroup",
    "Terminal",
    "fail",
    "main",
    "one_line_errors",
]


class LazyGroup(OneLineGroup):
    """A group whose commands are imported on first use: ``lazy`` maps each name to a loader
    and the one line its help shows in the group's list (so listing them imports nothing;
    ``tests/test_cli.py`` checks each line against the loaded command's own)."""

    def __init__(
        self, *args: Any, lazy: dict[str, tuple[Callable[[], click.Command], str]], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(self.lazy[cmd_name][0](), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, self.lazy[name][1]) for name in sorted(self.lazy)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _command(module: str, name: str) -> Callable[[], click.Command]:
    def load() -> click.Command:
        command: click.Command = getattr(importlib.import_module(module), name)
        return command

    return load


def _memory() -> click.Command:
    from synopsis.cli._memory_io import export, import_
    from synopsis.cli._reembed import reembed
    from synopsis.cli.memory import memory

    for command in (import_, export, reembed):
        memory.add_command(command)
    return memory


_COMMANDS: dict[str, tuple[Callable[[], click.Command], str]] = {
    "compact": (
        _command("synopsis.cli._commands", "compact"),
        "Compact a transcript (FILE, or - for standard input): old...",
    ),
    "count": (
        _command("synopsis.cli._commands", "count"),
        "Count the tokens of a transcript (FILE, or - for standard...",
    ),
    "keys": (
        _command("synopsis.cli.serve", "keys"),
        "API keys of the service: one tenant each, stored hashed.",
    ),
    "mcp": (_command("synopsis.cli.mcp", "mcp"), "Serve the memory tools to an MCP client..."),
    "memory": (_memory, "Long-term memories: put, search, import, export, delete a user."),
    "serve": (
        _command("synopsis.cli.serve", "serve"),
        "Run the HTTP service: REST API, OpenAI-compatible proxy,...",
    ),
}


@click.group(
    cls=LazyGroup, lazy=_COMMANDS, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(package_name="synopsis")
def main() -> None:
    """Keep LLM agents working past their context window."""


# The commands' own modules, and what tests and callers import from here, load on first use.
__getattr__, __dir__ = _exports(
    __name__,
    {
        "synopsis.cli._commands": ("compact", "compaction_options", "count"),
        "synopsis.cli._terminal": ("Terminal",),
    },
)
