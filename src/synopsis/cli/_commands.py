"""The ``count`` and ``compact`` commands (loaded when one of them runs or shows its help).

Their output, exit codes and ``--json`` failures follow the rules of :mod:`synopsis.cli`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from synopsis.cli._compact_flags import (
    clearing_flags,
    counts_line,
    dry_run,
    with_clearing,
    with_redaction,
)
from synopsis.cli._errors import OneLineCommand, guarded
from synopsis.cli._terminal import counted, emit_json, readable_error, terminal
from synopsis.compaction.options import FALLBACKS, CompactionOptions
from synopsis.models import redact_url
from synopsis.prompts import CHINESE, ENGLISH
from synopsis.tokens import ESTIMATORS

__all__ = ["compact", "compaction_options", "count"]

#: The library's defaults, shown in --help; a flag left out is not passed, so they apply.
_LIBRARY = CompactionOptions()
#: ``compact`` works on a coding agent's transcript: no tail beyond what always stays (the last
#: message with its tool group, and the newest user message); docs/compaction.md, "Defaults".
CLI_KEEP_TAIL = 0
_LANGUAGES = (ENGLISH.language, CHINESE.language)


@click.command(cls=OneLineCommand)
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
    """Count the tokens of a transcript (FILE, or - for standard input): provider-reported
    baseline + estimated increment."""
    from synopsis.cli._compact import read_transcript
    from synopsis.tokens import TokenCounter

    messages = read_transcript(str(file)).messages
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
        f"{result.increment} estimated) in {counted(result.message_count, 'message')} "
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
    "summarizer_window": "summarizer_window",
    "summarizer_max_output": "summarizer_max_output_tokens",
}


def compaction_options(flags: Mapping[str, Any], transcript_path: str) -> CompactionOptions:
    """The options the ``compact`` flags ask for; a flag left out keeps the library default."""
    chosen: dict[str, Any] = {
        _FLAG_KEYWORDS[flag]: tuple(value) if flag == "failover" else value
        for flag, value in flags.items()
        if flag in _FLAG_KEYWORDS and value not in (None, ())
    }
    chosen.setdefault("keep_tail", CLI_KEEP_TAIL)
    return CompactionOptions.from_keywords(transcript_path=transcript_path, **chosen)


def _print_report(report: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title="synopsis compact", show_header=False)
    table.add_column("field", no_wrap=True)
    table.add_column("value", overflow="fold")  # long paths wrap, never cut
    shown = {
        **report,
        "usage": _usage_line(report.get("usage"), report.get("calls")),
        "redacted": counts_line(report.get("redacted") or {}),
        "tiers": _tiers_line(report.get("tiers") or ()),
    }
    for key in (
        "triggered",
        "compacted",
        "reason",
        "tokens_before",
        "tokens_after",
        "messages_before",
        "messages",
        "tiers",
        "model",
        "attempts",
        "usage",
        "output",
        "archive",
        "skipped",
        "redacted",
        "error",
    ):
        if shown.get(key) is not None:
            table.add_row(key, redact_url(str(shown[key])))
    terminal().err.print(table)


def _tiers_line(tiers: Sequence[Mapping[str, Any]]) -> str | None:
    """Which tiers ran and what each saved, e.g. ``tool outputs -2,601 tokens (2 messages);
    summary -1,059 tokens (22 messages)``."""
    if not tiers:
        return None
    return "; ".join(
        f"{_TIER_NAMES.get(t['tier'], t['tier'])} -{t['tokens_saved']:,} tokens "
        f"({t['messages']} messages)"
        for t in tiers
    )


#: How the table names each tier of the report.
_TIER_NAMES = {"clear": "tool outputs", "summarize": "summary"}


def _usage_line(usage: Mapping[str, int] | None, calls: int | None) -> str | None:
    """What the summary cost, e.g. ``1,200 prompt + 300 completion = 1,500 tokens in 2 calls``."""
    if not usage:
        return None
    return (
        f"{usage.get('prompt_tokens', 0):,} prompt + {usage.get('completion_tokens', 0):,} "
        f"completion = {usage.get('total_tokens', 0):,} tokens in {calls or 0} call(s)"
    )


@click.command(cls=OneLineCommand)
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the compacted transcript here (default or -: standard output).",
)
@click.option(
    "--archive",
    type=click.Path(dir_okay=False),
    help="Append the replaced messages to this JSONL file (default: OUT.archive.jsonl, or "
    "FILE.archive.jsonl when writing to standard output; none when both are standard streams).",
)
@click.option("--no-archive", is_flag=True, help="Do not archive the replaced messages.")
@click.option("--in-place", is_flag=True, help="Overwrite FILE (its replaced part archived).")
@click.option("-q", "--quiet", is_flag=True, help="Show no progress on standard error.")
@click.option(
    "--model",
    show_default=str(_LIBRARY.model),
    help='Summarizer: "extractive" (offline), "openai:MODEL", "anthropic:MODEL", '
    '"litellm:MODEL", "openai-compatible:MODEL@URL".',
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
    show_default=str(CLI_KEEP_TAIL),
    help="Keep the last N messages verbatim (never splitting a tool call); the last message "
    "and the newest user message always stay.",
)
@click.option(
    "--user-budget",
    type=click.IntRange(min=0),
    show_default=str(_LIBRARY.user_budget),
    help="Token budget for the user's own messages quoted in the summary.",
)
@click.option("--estimator", type=click.Choice(ESTIMATORS), show_default=str(_LIBRARY.counter))
@click.option(
    "--language",
    type=click.Choice(_LANGUAGES),
    help="The summary's language (default: the history's own, Chinese when Han characters "
    "are at least a tenth of its text).",
)
@click.option(
    "--fallback",
    type=click.Choice(FALLBACKS),
    show_default=_LIBRARY.fallback,
    help="What to do when every model fails.",
)
@click.option(
    "--summarizer-window",
    type=click.IntRange(min=1),
    help="Tokens one summarizer request may hold, answer included (default: the model's "
    "known window; 8,192 for a model synopsis does not know).",
)
@click.option(
    "--summarizer-max-output",
    type=click.IntRange(min=1),
    help="Tokens the summary may use (default: a quarter of the window, at least 1,024).",
)
@click.option("--force", is_flag=True, help="Compact even if no trigger fires.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report on standard output.")
@clearing_flags
@guarded
def compact(file: Path, output: Path | None, force: bool, as_json: bool, **options: Any) -> None:
    """Compact a transcript (FILE, or - for standard input): old history becomes one
    structured summary message, and the messages it replaces are archived first."""
    from synopsis.cli._compact import compact_request, failure, read_transcript, run_compact
    from synopsis.compaction.compactor import Compactor

    chosen = with_redaction(with_clearing(compaction_options(options, str(file)), options), options)
    request = compact_request(
        str(file),
        None if output is None else str(output),
        options,
        chosen,
        force=force,
        as_json=as_json,
    )
    if options["dry_run"]:  # no model call, nothing written; the same archive and pointer
        transcript = read_transcript(str(file))
        preview = Compactor(options=request.options)
        dry_run(preview, transcript.messages, force=force, as_json=as_json)
        return
    done = run_compact(request)
    to_stdout = request.places.output is None
    if as_json:
        emit_json({**done.report, "transcript": done.messages} if to_stdout else done.report)
    else:
        _print_report({**done.report, "error": readable_error(done.report["error"])})
        if to_stdout:
            click.echo(done.text, nl=False)
    problem = failure(done.report, as_json=as_json)
    if problem is not None:
        raise problem
