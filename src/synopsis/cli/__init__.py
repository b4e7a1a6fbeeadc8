"""The ``synopsis`` command line: count, compact, memory.

Every command takes ``--json`` for machine-readable output. Bad input, a usage error (a bad
option, a directory given as FILE) included, prints one clear line on stderr and exits with
code 2, never a traceback or a usage screen.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, NoReturn, TypeVar

import click

from synopsis.cli._compact_flags import clearing_flags, dry_run, with_clearing
from synopsis.compaction.options import FALLBACKS, CompactionOptions
from synopsis.errors import ConfigError, SynopsisError
from synopsis.prompts import CHINESE, ENGLISH
from synopsis.tokens import ESTIMATORS

__all__ = ["BadInput", "OneLineGroup", "main", "one_line_errors"]

F = TypeVar("F", bound=Callable[..., Any])
#: The library's defaults, shown in --help; a flag left out is not passed, so they apply.
_LIBRARY = CompactionOptions()
_LANGUAGES = (ENGLISH.language, CHINESE.language)
# What bad input can raise on its way through a command: our errors, unreadable or unwritable
# files, text that is not UTF-8, input nested deeper than Python's recursion limit, and values
# out of range (a stored expiry beyond the year 9999).
_INPUT_ERRORS = (SynopsisError, OSError, UnicodeError, RecursionError, ValueError, OverflowError)


class BadInput(click.ClickException):
    """One line on stderr, exit code 2."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"synopsis: error: {self.format_message()}", err=True)


def fail(message: str) -> NoReturn:
    """Print one line on stderr and exit with code 2."""
    raise BadInput(message)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "input nested too deeply"
    return str(exc) or type(exc).__name__


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Usage errors and bad input raised inside become :class:`BadInput` (one line, exit 2).

    A group called without a command still shows its help.
    """
    try:
        yield
    except click.exceptions.NoArgsIsHelpError:
        raise
    except click.UsageError as exc:
        raise BadInput(exc.format_message()) from None
    except _INPUT_ERRORS as exc:
        raise BadInput(_describe(exc)) from None


class OneLineGroup(click.Group):
    """A group whose own usage errors and those of every command under it are one line."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        with one_line_errors():
            return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        with one_line_errors():
            return super().invoke(ctx)


def guarded(fn: F) -> F:
    """Turn our errors (and unreadable files, deep input) into one line and exit code 2."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with one_line_errors():
            return fn(*args, **kwargs)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper  # type: ignore[return-value]


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="synopsis")
def main() -> None:
    """Keep LLM agents working past their context window."""


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--estimator",
    type=click.Choice(ESTIMATORS),
    default=_LIBRARY.counter,
    show_default=True,
    help="adk = UTF-8 bytes / 4 (the original's); tiktoken = exact o200k counts.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@guarded
def count(file: Path, estimator: str, as_json: bool) -> None:
    """Count a transcript's tokens: provider-reported baseline + estimated increment."""
    from synopsis.tokens import TokenCounter
    from synopsis.transcripts import load_transcript

    messages = load_transcript(file).messages
    result = TokenCounter(estimator=estimator).count(messages)
    data = {
        "tokens": result.total,
        "baseline": result.baseline,
        "increment": result.increment,
        "messages": result.message_count,
        "estimator": estimator,
    }
    if as_json:
        emit_json(data)
        return
    click.echo(
        f"{result.total} tokens ({result.baseline} reported baseline + "
        f"{result.increment} estimated) in {result.message_count} messages "
        f"[{estimator}]"
    )


#: ``compact`` flag -> the compactors' keyword argument it sets.
_FLAG_KEYWORDS = {
    "model": "model",
    "failover": "failover",
    "trigger_tokens": "trigger_tokens",
    "trigger_messages": "trigger_messages",
    "keep_tail": "keep_tail",
    "user_budget": "user_budget",
    "estimator": "counter",
    "language": "prompts",
    "fallback": "fallback",
}


def compaction_options(flags: Mapping[str, Any], transcript_path: str) -> CompactionOptions:
    """The options the ``compact`` flags ask for; a flag left out keeps the library default."""
    chosen: dict[str, Any] = {
        _FLAG_KEYWORDS[flag]: tuple(value) if flag == "failover" else value
        for flag, value in flags.items()
        if flag in _FLAG_KEYWORDS and value not in (None, ())
    }
    return CompactionOptions.from_keywords(transcript_path=transcript_path, **chosen)


def _print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="synopsis compact", show_header=False)
    for key in (
        "triggered",
        "compacted",
        "reason",
        "tokens_before",
        "tokens_after",
        "messages_before",
        "messages",
        "model",
        "attempts",
        "output",
        "skipped",
        "error",
    ):
        if report.get(key) is not None:
            table.add_row(key, str(report[key]))
    Console(stderr=True).print(table)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the compacted transcript here (default: standard output).",
)
@click.option(
    "--model",
    show_default=str(_LIBRARY.model),
    help='Summarizer: "extractive" (offline), "openai:MODEL", "anthropic:MODEL".',
)
@click.option("--failover", multiple=True, help="A backup model, tried in order (repeatable).")
@click.option(
    "--trigger-tokens",
    type=click.IntRange(min=0),
    help=f"Compact when tokens exceed N (0 = off; {_LIBRARY.trigger.tokens} if no trigger is set).",
)
@click.option(
    "--trigger-messages",
    type=click.IntRange(min=0),
    help="Compact when the history has more than N messages (0 = off).",
)
@click.option(
    "--keep-tail",
    type=click.IntRange(min=0),
    show_default=str(_LIBRARY.keep_tail.messages),
    help="Keep the last N messages verbatim (never splitting a tool call).",
)
@click.option(
    "--user-budget",
    type=click.IntRange(min=0),
    show_default=str(_LIBRARY.user_budget),
    help="Token budget for the user's own messages quoted in the summary.",
)
@click.option("--estimator", type=click.Choice(ESTIMATORS), show_default=str(_LIBRARY.counter))
@click.option("--language", type=click.Choice(_LANGUAGES), show_default=_LIBRARY.prompts.language)
@click.option(
    "--fallback",
    type=click.Choice(FALLBACKS),
    show_default=_LIBRARY.fallback,
    help="What to do when every model fails.",
)
@click.option("--force", is_flag=True, help="Compact even if no trigger fires.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report on standard output.")
@clearing_flags
@guarded
def compact(file: Path, output: Path | None, force: bool, as_json: bool, **options: Any) -> None:
    """Compact a transcript: old history becomes one structured summary message."""
    from synopsis.compaction.compactor import Compactor
    from synopsis.transcripts import dump_transcript, load_transcript, write_atomically

    transcript = load_transcript(file)
    compactor = Compactor(options=with_clearing(compaction_options(options, str(file)), options))
    if options["dry_run"]:
        dry_run(compactor, transcript.messages, force=force, as_json=as_json)
        return
    result = compactor.compact(transcript.messages, force=force)
    text = dump_transcript(result.messages, transcript.format, extra=transcript.extra)
    if output is not None:
        write_atomically(output, text)
    report = {
        **result.report(),
        "messages_before": len(transcript.messages),
        "messages": len(result.messages),
        "output": str(output) if output else None,
    }
    if as_json:
        if output is None:
            report["transcript"] = result.messages
        emit_json(report)
        return
    _print_report(report)
    if output is None:
        click.echo(text, nl=False)
    if result.error:
        raise ConfigError(f"summarization failed, history kept: {result.error['message']}")


def _register_memory() -> None:
    try:
        from synopsis.cli.memory import memory
    except ImportError:  # pragma: no cover - only while the memory CLI is being written
        return
    main.add_command(memory)


_register_memory()
