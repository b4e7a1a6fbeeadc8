"""Exit codes and one-line errors, shared by every command.

Every failure is one line on stderr (``synopsis: error: ...``), never a traceback or a usage
screen, and exits with one of the :class:`ExitCode` values. With ``--json`` the same failure
is also a JSON object on stdout: ``{"ok": false, "error": {"type": ..., "message": ...}}``.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import IntEnum
from typing import IO, Any, ClassVar, NoReturn, TypeVar

import click

from synopsis.errors import ModelError, StoreError, SynopsisError

__all__ = [
    "EXIT_CODES_HELP",
    "BadInput",
    "CliError",
    "ExitCode",
    "OneLineCommand",
    "OneLineGroup",
    "StoreFailed",
    "SummarizationFailed",
    "cli_error",
    "fail",
    "guarded",
    "one_line_errors",
]

F = TypeVar("F", bound=Callable[..., Any])


class ExitCode(IntEnum):
    """What a ``synopsis`` process exits with."""

    OK = 0
    BAD_INPUT = 2  # bad input or usage: the command did nothing
    SUMMARIZATION_FAILED = 3  # compaction could not summarize or archive; history kept
    STORE_ERROR = 4  # the memory store failed or could not be reached


#: The exit codes as ``--help`` shows them (``\b`` keeps click from rewrapping the lines).
EXIT_CODES_HELP = (
    "\b\nExit codes: 0 success, 2 bad input or usage,"
    "\n3 summarization failed (history kept), 4 store error."
    '\nWith --json a failure also prints {"ok": false, "error": {...}}.'
)

# What bad input can raise on its way through a command: our errors, unreadable or unwritable
# files, text that is not UTF-8, input nested deeper than Python's recursion limit, and values
# out of range (a stored expiry beyond the year 9999).
_INPUT_ERRORS = (SynopsisError, OSError, UnicodeError, RecursionError, ValueError, OverflowError)


class CliError(click.ClickException):
    """One line on stderr and an :class:`ExitCode`; with ``--json`` also a JSON object on stdout.

    ``error_type`` names what went wrong (the exception's type); ``reported`` is set when the
    command already printed its own JSON object.
    """

    exit_code: ClassVar[int] = ExitCode.BAD_INPUT

    def __init__(
        self,
        message: str,
        *,
        error_type: str = "InvalidInput",
        as_json: bool = False,
        reported: bool = False,
    ) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.as_json = as_json
        self.reported = reported

    def to_dict(self) -> dict[str, Any]:
        return {"ok": False, "error": {"type": self.error_type, "message": self.message}}

    def show(self, file: IO[Any] | None = None) -> None:
        if self.as_json and not self.reported:
            click.echo(json.dumps(self.to_dict(), ensure_ascii=False, indent=2))
        click.echo(f"synopsis: error: {self.format_message()}", err=True)


class BadInput(CliError):
    """Bad input or usage: one line on stderr, exit code 2."""

    exit_code = ExitCode.BAD_INPUT


class SummarizationFailed(CliError):
    """Compaction could not summarize (or archive) and kept the history: exit code 3."""

    exit_code = ExitCode.SUMMARIZATION_FAILED


class StoreFailed(CliError):
    """The memory store failed or could not be reached: exit code 4."""

    exit_code = ExitCode.STORE_ERROR


def fail(message: str) -> NoReturn:
    """Print one line on stderr and exit with code 2."""
    raise BadInput(message)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "input nested too deeply"
    return str(exc) or type(exc).__name__


def cli_error(exc: BaseException) -> CliError:
    """``exc`` as a one-line error of its kind: a store that failed is 4 (a namespace that is
    merely malformed is bad input), a model that failed is 3, anything else is bad input."""
    kind: type[CliError] = BadInput
    if isinstance(exc, StoreError) and not isinstance(exc, ValueError):
        kind = StoreFailed
    elif isinstance(exc, ModelError):
        kind = SummarizationFailed
    return kind(_describe(exc), error_type=type(exc).__name__)


@contextmanager
def one_line_errors(*, as_json: bool = False) -> Iterator[None]:
    """Usage errors and errors raised inside become one line and their exit code.

    A group called without a command still shows its help.
    """
    try:
        yield
    except CliError as exc:
        exc.as_json = exc.as_json or as_json
        raise
    except click.exceptions.NoArgsIsHelpError:
        raise
    except click.UsageError as exc:
        raise BadInput(exc.format_message(), error_type="UsageError", as_json=as_json) from None
    except _INPUT_ERRORS as exc:
        error = cli_error(exc)
        error.as_json = as_json
        raise error from None


def _wants_json(args: Sequence[str]) -> bool:
    """Whether the command line asks for --json (before any ``--``)."""
    return "--json" in list(args)[: list(args).index("--") if "--" in args else None]


class OneLineCommand(click.Command):
    """A command whose usage errors (missing option, bad value) and bad input are one line,
    as JSON too when it was given ``--json``; its help lists the exit codes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("epilog", EXIT_CODES_HELP)
        super().__init__(*args, **kwargs)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        with one_line_errors(as_json=_wants_json(args)):
            return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        with one_line_errors(as_json=bool(ctx.params.get("as_json"))):
            return super().invoke(ctx)


class OneLineGroup(OneLineCommand, click.Group):
    """A group whose own usage errors and those of every command under it are one line (a
    group takes no ``--json`` of its own: its failures are plain lines)."""


class LazyGroup(OneLineGroup):
    """A group whose commands (some or all) are imported on first use: ``lazy`` maps each
    name to a loader and the one line its help shows in the group's list, so listing them
    imports nothing (``tests/test_import_cost.py`` checks each line against the loaded
    command's own). The group is whole however it is reached: through ``synopsis`` or
    imported on its own."""

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
        lines = {name: line for name, (_, line) in self.lazy.items()}
        width = formatter.width - 6 - max(map(len, [*self.commands, *lines]), default=0)
        for name, command in self.commands.items():
            if name not in lines and not command.hidden:
                lines[name] = command.get_short_help_str(limit=width)
        if lines:
            with formatter.section("Commands"):
                formatter.write_dl(sorted(lines.items()))


def lazy_command(module: str, name: str) -> Callable[[], click.Command]:
    """A loader of the command ``name`` of ``module``, imported when it is first called."""

    def load() -> click.Command:
        command: click.Command = getattr(importlib.import_module(module), name)
        return command

    return load


def guarded(fn: F) -> F:
    """Turn our errors (and unreadable files, deep input) into one line and their exit code."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with one_line_errors(as_json=bool(kwargs.get("as_json"))):
            return fn(*args, **kwargs)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper  # type: ignore[return-value]
