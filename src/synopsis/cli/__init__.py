"""The ``synopsis`` command line: count, compact, memory.

Every command takes ``--json`` for machine-readable output. Bad input prints one clear line
on stderr and exits with code 2, never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from synopsis.errors import ConfigError, SynopsisError

__all__ = ["main"]

F = TypeVar("F", bound=Callable[..., Any])
ESTIMATORS = ["default", "adk", "tiktoken", "tiktoken:cl100k_base"]


def fail(message: str) -> NoReturn:
    """Print one line on stderr and exit with code 2."""
    click.echo(f"synopsis: error: {message}", err=True)
    sys.exit(2)


def guarded(fn: F) -> F:
    """Turn our errors (and unreadable files) into one line and exit code 2."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SynopsisError as exc:
            fail(str(exc))
        except (OSError, UnicodeError) as exc:
            fail(str(exc))

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper  # type: ignore[return-value]


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="synopsis")
def main() -> None:
    """Keep LLM agents working past their context window."""


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--estimator",
    type=click.Choice(ESTIMATORS),
    default="default",
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


def _build_compactor(options: dict[str, Any], transcript_path: str) -> Any:
    from synopsis.compaction.compactor import Compactor
    from synopsis.compaction.plan import KeepTail

    if options["trigger_tokens"] is None and options["trigger_messages"] is None:
        options["trigger_tokens"] = 160_000
    return Compactor(
        model=options["model"],
        failover=tuple(options["failover"]),
        trigger_tokens=options["trigger_tokens"] or None,
        trigger_messages=options["trigger_messages"] or None,
        keep_tail=KeepTail(messages=options["keep_tail"]),
        counter=options["estimator"],
        user_budget=options["user_budget"],
        prompts=options["language"],
        transcript_path=transcript_path,
        fallback=options["fallback"],
    )


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
    default="extractive",
    show_default=True,
    help='Summarizer: "extractive" (offline), "openai:MODEL", "anthropic:MODEL".',
)
@click.option("--failover", multiple=True, help="A backup model, tried in order (repeatable).")
@click.option(
    "--trigger-tokens",
    type=click.IntRange(min=0),
    help="Compact when tokens exceed N (0 = off; default 160000 if no trigger).",
)
@click.option(
    "--trigger-messages",
    type=click.IntRange(min=0),
    help="Compact when the history has more than N messages (0 = off).",
)
@click.option(
    "--keep-tail",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Keep the last N messages verbatim (never splitting a tool call).",
)
@click.option(
    "--user-budget",
    type=click.IntRange(min=0),
    default=30_000,
    show_default=True,
    help="Token budget for the user's own messages quoted in the summary.",
)
@click.option("--estimator", type=click.Choice(ESTIMATORS), default="default", show_default=True)
@click.option("--language", type=click.Choice(["en", "zh"]), default="en", show_default=True)
@click.option(
    "--fallback",
    type=click.Choice(["keep", "extractive", "truncate"]),
    default="keep",
    show_default=True,
    help="What to do when every model fails.",
)
@click.option("--force", is_flag=True, help="Compact even if no trigger fires.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report on standard output.")
@guarded
def compact(file: Path, output: Path | None, force: bool, as_json: bool, **options: Any) -> None:
    """Compact a transcript: old history becomes one structured summary message."""
    from synopsis.transcripts import dump_transcript, load_transcript

    transcript = load_transcript(file)
    compactor = _build_compactor(options, str(file))
    result = compactor.compact(transcript.messages, force=force)
    text = dump_transcript(result.messages, transcript.format, extra=transcript.extra)
    if output is not None:
        output.write_text(text, encoding="utf-8")
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


def _register_server() -> None:
    from synopsis.cli.serve import keys, serve

    main.add_command(serve)
    main.add_command(keys)


_register_server()
