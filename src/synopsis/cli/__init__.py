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

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from synopsis._lazy import exports as _exports
from synopsis.cli._errors import (
    BadInput,
    CliError,
    ExitCode,
    LazyGroup,
    OneLineCommand,
    OneLineGroup,
    fail,
    lazy_command,
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


_COMMANDS: dict[str, tuple[Callable[[], click.Command], str]] = {
    "compact": (
        lazy_command("synopsis.cli._commands", "compact"),
        "Compact a transcript (FILE, or - for standard input): old...",
    ),
    "count": (
        lazy_command("synopsis.cli._commands", "count"),
        "Count the tokens of a transcript (FILE, or - for standard...",
    ),
    "keys": (
        lazy_command("synopsis.cli.serve", "keys"),
        "API keys of the service: one tenant each, stored hashed.",
    ),
    "mcp": (lazy_command("synopsis.cli.mcp", "mcp"), "Serve the memory tools to an MCP client..."),
    "memory": (
        lazy_command("synopsis.cli.memory", "memory"),
        "Long-term memories: put, search, import, export, delete a user.",
    ),
    "serve": (
        lazy_command("synopsis.cli.serve", "serve"),
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
