"""Where human output and progress go, and how both read at 80 columns.

Commands print through a :class:`Terminal`: standard output and standard error as rich
consoles. Tests give their own through click's context object (``obj=Terminal(...)``), e.g.
``Console(width=80)`` or ``Console(force_terminal=True, file=...)``; without one the real
streams are used. Progress is drawn on stderr only when stderr is a terminal, and never with
``--quiet`` or ``--json``, so it can never end up in what a program reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from synopsis.events import AfterSummarize, BeforeSummarize, Event, GenerateSummary

__all__ = [
    "CompactionProgress",
    "Terminal",
    "advancer",
    "count_columns",
    "counted",
    "emit_json",
    "readable_error",
    "status_columns",
    "terminal",
]


def emit_json(data: Any) -> None:
    """Print ``data`` as indented JSON on standard output (``--json``)."""
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


@dataclass(frozen=True, slots=True)
class Terminal:
    """The consoles a command writes to: ``out`` (stdout) and ``err`` (stderr)."""

    out: Console = field(default_factory=Console)
    err: Console = field(default_factory=lambda: Console(stderr=True))

    def shows_progress(self, *, quiet: bool = False, as_json: bool = False) -> bool:
        """Progress only for a person watching: stderr is a terminal, no --quiet, no --json."""
        return self.err.is_terminal and not quiet and not as_json

    @contextmanager
    def progress(self, *columns: str | ProgressColumn, shown: bool) -> Iterator[Progress | None]:
        """A transient progress display on stderr, or None when it is not ``shown``."""
        if not shown:
            yield None
            return
        with Progress(
            *columns,
            console=self.err,
            transient=True,
            redirect_stdout=False,  # stdout is the command's output; never draw into it
            redirect_stderr=False,
        ) as display:
            yield display


def terminal() -> Terminal:
    """The current command's :class:`Terminal` (the context object's, or the real streams)."""
    context = click.get_current_context(silent=True)
    found = context.find_object(Terminal) if context is not None else None
    return found if found is not None else Terminal()


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """``1 message``, ``2 messages``, ``1 memory``, ``3 memories`` (``plural`` if irregular)."""
    return f"{count:,} {singular if count == 1 else plural or singular + 's'}"


def readable_error(error: Any) -> str | None:
    """An error as one sentence, ``Type: message``, from a serialized error or an exception;
    a failover chain's errors follow in parentheses, so the reason is never lost."""
    if error is None:
        return None
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}"
    if not isinstance(error, dict):
        return str(error)
    kind, message = error.get("type"), error.get("message")
    sentence = f"{kind}: {message}" if kind and message else str(message or kind or "error")
    causes = [readable_error(cause) for cause in error.get("errors") or ()]
    return f"{sentence} ({'; '.join(filter(None, causes))})" if causes else sentence


def status_columns() -> tuple[ProgressColumn, ...]:
    """A long operation whose end is unknown: a spinner, what is happening, the time."""
    return (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())


def count_columns() -> tuple[ProgressColumn, ...]:
    """A long operation that counts items: what, a bar, done/total, the time."""
    return (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )


def advancer(display: Progress | None, description: str, *, total: int) -> Callable[[int], None]:
    """A function advancing a new task of ``display`` by its argument (a no-op without one)."""
    if display is None:
        return lambda done: None
    task = display.add_task(description, total=total)
    return lambda done: display.advance(task, done)


class CompactionProgress:
    """An ``on_event`` handler that turns the compactor's events into a status line.

    Each summarizer call is counted as it ends, failed ones with their error, so retries and
    failovers are visible while they happen. The line is cut at the terminal's width, so the
    least useful part (the model's name) comes last.
    """

    def __init__(self, display: Progress, label: str) -> None:
        self.display = display
        self.task: TaskID = display.add_task(f"compacting {label}", total=None)
        self.calls = 0

    def __call__(self, event: Event) -> None:
        description = self.describe(event)
        if description is not None:
            self.display.update(self.task, description=description, refresh=True)

    def describe(self, event: Event) -> str | None:
        match event:
            case BeforeSummarize(message_count=count, tokens=tokens):
                return f"summarizing {counted(count, 'message')} ({counted(tokens, 'token')})"
            case GenerateSummary(ok=True, model=model, latency_s=latency):
                self.calls += 1
                return f"call {self.calls} done in {latency:.1f} s ({model})"
            case GenerateSummary(model=model, phase=phase, error=error):
                self.calls += 1
                why = readable_error(error) or "no reason given"
                return f"call {self.calls} failed: {why} ({phase} model {model})"
            case AfterSummarize(messages_after=after):
                return f"summarized into {counted(after, 'message')}; writing"
        return None
