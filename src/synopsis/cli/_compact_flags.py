"""The ``compact`` command's tier-1, redaction and dry-run flags, apart so the command itself
stays short.

:func:`clearing_flags` adds the flags, :func:`with_clearing` and :func:`with_redaction` fold
them into the options (a flag left out keeps the library default) and :func:`dry_run` prints
what a dry run found: a rich table, or JSON with ``--json``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from itertools import groupby
from typing import TYPE_CHECKING, Any, TypeVar

import click

from synopsis.cli._errors import fail
from synopsis.cli._terminal import emit_json
from synopsis.compaction.options import CompactionOptions, ToolClearing
from synopsis.config import Settings
from synopsis.errors import ConfigError
from synopsis.redact import Mode, Redactor, redact_history

if TYPE_CHECKING:  # imported by the command when it runs, not by ``synopsis --help``
    from synopsis.compaction.compactor import Compactor
    from synopsis.compaction.preview import CompactionPreview

__all__ = [
    "clearing_flags",
    "counts_line",
    "dry_run",
    "redacted_anyway",
    "show_preview",
    "with_clearing",
    "with_redaction",
]

F = TypeVar("F", bound=Callable[..., Any])
_DEFAULT = ToolClearing()
#: flag -> the ToolClearing field it sets.
_TUNING = {
    "clear_keep_recent": "keep_recent",
    "clear_min_tokens": "min_tokens",
    "clear_exclude": "exclude_tools",
    "clear_arguments": "clear_arguments",
}
_OPTIONS = (
    click.option(
        "--clear-tool-outputs/--no-clear-tool-outputs",
        default=None,
        help="Tier 1: replace old tool output by archived stubs first, and summarize only if "
        "the history is still over budget.",
    ),
    click.option(
        "--clear-keep-recent",
        type=click.IntRange(min=0),
        show_default=str(_DEFAULT.keep_recent),
        help="Tier 1 keeps the newest N tool results.",
    ),
    click.option(
        "--clear-min-tokens",
        type=click.IntRange(min=0),
        show_default=str(_DEFAULT.min_tokens),
        help="Tier 1 clears only results of at least N tokens.",
    ),
    click.option(
        "--clear-exclude",
        multiple=True,
        metavar="TOOL",
        help="Tier 1 never clears this tool's results (repeatable).",
    ),
    click.option(
        "--clear-arguments", is_flag=True, default=None, help="Tier 1 clears call arguments too."
    ),
    click.option(
        "--redact",
        is_flag=True,
        default=None,
        help="Take secrets and personal data (keys, tokens, passwords, e-mail addresses, phone, "
        "card and ID numbers, ...) out of the summarizer's request, the archive and the output.",
    ),
    click.option(
        "--redact-mode",
        type=click.Choice(["mask", "hash", "drop"]),
        help="[REDACTED:kind] (mask, the default), a token per value (hash: the same for the "
        "same value in this run, or in every run keyed by env SYNOPSIS_REDACT_HASH_KEY), or "
        "nothing (drop). Turns --redact on.",
    ),
    click.option(
        "--redact-pattern",
        multiple=True,
        metavar="NAME=REGEX",
        help="Redact your own kind too, e.g. ticket=TCK-[0-9]{6} (repeatable; turns --redact on).",
    ),
    click.option(
        "--dry-run",
        is_flag=True,
        help="Show what would be cleared, summarized, kept and back-filled; call no model, "
        "write nothing.",
    ),
)


def clearing_flags(command: F) -> F:
    """``command`` with the tier-1 and ``--dry-run`` flags."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def with_clearing(options: CompactionOptions, flags: Mapping[str, Any]) -> CompactionOptions:
    """``options`` with the tool-output clearing the flags ask for. A tuning flag alone
    turns clearing on; ``--no-clear-tool-outputs`` turns it off whatever else is given."""
    enabled = flags.get("clear_tool_outputs")
    tuning = {
        field: flags[flag] for flag, field in _TUNING.items() if flags.get(flag) not in (None, ())
    }
    if enabled is False:
        return replace(options, clear_tool_outputs=None)
    if enabled is None and not tuning:
        return options
    return replace(
        options, clear_tool_outputs=replace(options.clear_tool_outputs or _DEFAULT, **tuning)
    )


def with_redaction(options: CompactionOptions, flags: Mapping[str, Any]) -> CompactionOptions:
    """``options`` with the redaction the flags ask for; ``--redact-mode`` or a
    ``--redact-pattern`` alone turns it on. A pattern is ``NAME=REGEX``."""
    patterns = flags.get("redact_pattern") or ()
    if not (flags.get("redact") or flags.get("redact_mode") or patterns):
        return options
    named: dict[str, str] = {}
    for pattern in patterns:
        name, equals, regex = str(pattern).partition("=")
        if not (equals and name and regex):
            fail(f"--redact-pattern {pattern!r} must be NAME=REGEX, e.g. ticket=TCK-[0-9]{{6}}")
        named[name] = regex
    mode: Mode = flags.get("redact_mode") or "mask"
    redactor = Redactor(mode=mode, patterns=named, hash_key=_hash_key() if mode == "hash" else None)
    return replace(options, redact=redactor)


def _hash_key() -> bytes | None:
    """The key of ``hash`` mode from ``SYNOPSIS_REDACT_HASH_KEY`` (what the server reads), so
    one value gets the same token in every run; None (a key for this run only) when unset.
    Environment only: a key on the command line shows in the process list and shell history."""
    try:
        key = Settings.from_env(os.environ, only=("redact_hash_key",)).redact_hash_key
    except ConfigError as exc:
        fail(str(exc))
    return key.encode() if key else None


def redacted_anyway(
    options: CompactionOptions, messages: Sequence[Mapping[str, Any]], *, ran: bool
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """With ``--redact`` the output is redacted even when no compaction ran (``ran``: forced,
    or the trigger fired; below the trigger the library leaves a history as it is). The
    messages and the counts by kind; as they are when redaction is off or already done."""
    if options.redact is None or ran:
        return [dict(message) for message in messages], {}
    clean, counts = redact_history(options.redact, messages)
    return [dict(message) for message in clean], counts


def dry_run(
    compactor: Compactor, messages: Sequence[Mapping[str, Any]], *, force: bool, as_json: bool
) -> None:
    """Preview ``compactor.compact(messages, force=force)`` and print what it found."""
    preview = compactor.preview(messages, force=force)
    _, counts = redacted_anyway(compactor.options, messages, ran=force or preview.triggered)
    if counts:
        preview = replace(preview, redacted=counts)
    show_preview(preview, messages, compactor.counter.estimate, as_json=as_json)


def show_preview(
    preview: CompactionPreview,
    messages: Sequence[Mapping[str, Any]],
    estimate: Callable[[Mapping[str, Any]], int],
    *,
    as_json: bool,
) -> None:
    """Print a dry run's findings on standard output."""
    if as_json:
        emit_json(preview.to_dict())
        return
    from rich.console import Console

    console = Console()
    console.print(_overview(preview))
    if preview.tiers:
        console.print(_tiers(preview))
    console.print(_fates(preview, messages, estimate))


def _overview(preview: CompactionPreview) -> Any:
    from rich.table import Table

    table = Table(title="synopsis compact --dry-run", caption="nothing written, no model called")
    table.add_column("")
    table.add_column("")
    table.show_header = False
    rows = {
        "triggered": preview.triggered,
        "reason": preview.reason,
        "would compact": preview.compacts,
        "would call the summarizer": preview.calls_model,
        "summarizer input tokens": preview.summarizer_tokens or None,
        "tokens before": preview.tokens_before,
        "tokens after (extractive summary as stand-in)": preview.tokens_after,
        "archive": preview.archive,
        "skipped": preview.skipped,
        "would redact": counts_line(preview.redacted),
    }
    for key, value in rows.items():
        if value is not None:
            table.add_row(key, str(value))
    return table


def counts_line(counts: Mapping[str, int]) -> str | None:
    """``3 email, 1 openai_key``: how many values of each kind, never the values."""
    return ", ".join(f"{number} {kind}" for kind, number in counts.items()) or None


def _tiers(preview: CompactionPreview) -> Any:
    from rich.table import Table

    table = Table(title="tiers")
    for name in ("tier", "tokens before", "tokens after", "saved", "messages"):
        table.add_column(name, justify="left" if name == "tier" else "right")
    for tier in preview.tiers:
        row = tier.to_dict()
        table.add_row(
            tier.name,
            *(f"{row[key]:,}" for key in ("tokens_before", "tokens_after", "tokens_saved")),
            str(len(tier.messages)),
        )
    return table


def _fates(
    preview: CompactionPreview,
    messages: Sequence[Mapping[str, Any]],
    estimate: Callable[[Mapping[str, Any]], int],
) -> Any:
    """Runs of consecutive messages that share a fate, with their roles and tokens."""
    from rich.table import Table

    fates = _fate_of(preview)
    table = Table(title="messages")
    for name in ("messages", "fate", "roles", "tokens"):
        table.add_column(name, justify="right" if name == "tokens" else "left")
    for fate, run in groupby(range(len(messages)), key=lambda i: fates.get(i, "kept verbatim")):
        indices = list(run)
        roles = sorted({str(messages[i].get("role")) for i in indices})
        span = f"{indices[0]}" if len(indices) == 1 else f"{indices[0]}-{indices[-1]}"
        tokens = sum(estimate(messages[i]) for i in indices)
        table.add_row(span, fate, ", ".join(roles), f"{tokens:,}")
    return table


def _fate_of(preview: CompactionPreview) -> dict[int, str]:
    fates = dict.fromkeys(preview.cleared, "cleared (stub kept)")
    fates.update(dict.fromkeys(preview.summarized, "summarized"))
    fates.update(dict.fromkeys(preview.backfilled, "summarized, quoted (back-filled)"))
    return fates
