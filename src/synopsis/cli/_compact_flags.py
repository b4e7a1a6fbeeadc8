"""The ``compact`` command's tier-1 and dry-run flags, apart so the command itself stays short.

:func:`clearing_flags` adds the flags, :func:`with_clearing` folds them into the options (a
flag left out keeps the library default) and :func:`dry_run` prints what a dry run found: a
rich table, or JSON with ``--json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from itertools import groupby
from typing import TYPE_CHECKING, Any, TypeVar

import click

from synopsis.compaction.clear import ToolClearing
from synopsis.compaction.options import CompactionOptions

if TYPE_CHECKING:  # imported by the command when it runs, not by ``synopsis --help``
    from synopsis.compaction.compactor import Compactor
    from synopsis.compaction.preview import CompactionPreview

__all__ = ["clearing_flags", "dry_run", "show_preview", "with_clearing"]

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


def dry_run(
    compactor: Compactor, messages: Sequence[Mapping[str, Any]], *, force: bool, as_json: bool
) -> None:
    """Preview ``compactor.compact(messages, force=force)`` and print what it found."""
    preview = compactor.preview(messages, force=force)
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
        click.echo(json.dumps(preview.to_dict(), ensure_ascii=False, indent=2))
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
        "tokens after (summary as placeholder)": preview.tokens_after,
        "archive": preview.archive,
        "skipped": preview.skipped,
    }
    for key, value in rows.items():
        if value is not None:
            table.add_row(key, str(value))
    return table


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
