"""What ``synopsis compact`` does around the compactor: where it reads, writes and archives.

The archive is on by default: the messages a compaction replaces are appended to a JSONL file
next to the output (``OUT.archive.jsonl``), or next to the input when the output is standard
output (``FILE.archive.jsonl``); a filter (both standard streams) has no file to sit next to
and archives only with ``--archive PATH``, never into the working directory.
``--archive PATH`` chooses the file and ``--no-archive`` turns it off. The summary then points
at that file. Writing the output over the input needs ``--in-place``, which always archives.
Output and archive are written atomically (temporary file + rename).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from synopsis.cli._compact_flags import redacted_anyway
from synopsis.cli._errors import CliError, SummarizationFailed, fail
from synopsis.cli._terminal import CompactionProgress, readable_error, status_columns, terminal
from synopsis.compaction.options import CompactionOptions
from synopsis.errors import CompactionError
from synopsis.transcripts import (
    Transcript,
    json_line,
    load_transcript,
    parse_transcript,
    write_atomically,
)

__all__ = [
    "ARCHIVE_SUFFIX",
    "CompactRequest",
    "Compacted",
    "Destinations",
    "FileArchive",
    "compact_request",
    "destinations",
    "failure",
    "read_transcript",
    "run_compact",
]

ARCHIVE_SUFFIX = ".archive.jsonl"
STDIN = "-"


@dataclass(frozen=True, slots=True)
class Destinations:
    """Where ``compact`` reads, writes and archives; None is a standard stream / no archive."""

    source: Path | None
    output: Path | None
    archive: Path | None
    in_place: bool = False

    @property
    def pointer(self) -> str | None:
        """What the summary names when there is no archive: the input file, if it is one."""
        return str(self.source) if self.source is not None else None


def _same_file(first: Path | None, second: Path | None) -> bool:
    if first is None or second is None:
        return False
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist (yet)
        return os.path.realpath(first) == os.path.realpath(second)


def destinations(
    file: str, output: str | None, *, archive: str | None, no_archive: bool, in_place: bool
) -> Destinations:
    """The places the flags name, or a one-line usage error (exit 2) for a contradiction."""
    source = None if file == STDIN else Path(file)
    target = None if output in (None, STDIN) else Path(str(output))
    if in_place:
        if source is None:
            fail("--in-place needs a FILE to overwrite, not standard input")
        if target is not None and not _same_file(target, source):
            fail("--in-place overwrites FILE itself; leave out -o")
        target = source
    elif _same_file(target, source):
        fail(
            f"-o {output} is the input file; pass --in-place to overwrite it "
            "(the messages it replaces are archived first)"
        )
    archived = _archive_path(source, target, archive, no_archive)
    places = Destinations(source, target, archived, in_place=in_place)
    _check(places)
    return places


def _archive_path(
    source: Path | None, target: Path | None, archive: str | None, no_archive: bool
) -> Path | None:
    if archive is not None and no_archive:
        fail("give either --archive PATH or --no-archive, not both")
    if no_archive:
        return None
    if archive is not None:
        return Path(archive)
    base = target or source
    if base is None:  # a filter: nothing to sit next to, and the cwd is not ours to litter
        return None
    return base.with_name(base.name + ARCHIVE_SUFFIX)


def _check(places: Destinations) -> None:
    if places.in_place and places.archive is None:
        fail("--in-place archives the messages it replaces; it cannot go with --no-archive")
    if _same_file(places.archive, places.source) or _same_file(places.archive, places.output):
        fail(f"--archive {places.archive} must not be the input or the output file")
    for path in (places.output, places.archive):
        folder = Path(os.path.abspath(path)).parent if path is not None else None
        if folder is not None and not folder.is_dir():
            fail(f"cannot write {path}: folder {folder} is missing")


class FileArchive:
    """Appends replaced messages to one JSONL file, atomically.

    The old lines and the new go to a temporary file renamed over the archive, so it holds
    all of them or none. Like :class:`~synopsis.compaction.archive.JsonlArchive` it refuses a
    symbolic link; any failure is a :class:`~synopsis.errors.CompactionError`.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def path_for(self, session_id: str | None) -> Path:
        """Where :meth:`write` appends (one file, whatever the session)."""
        return Path(os.path.abspath(self.path))

    def write(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None) -> str:
        where = str(self.path_for(session_id))
        if self.path.is_symlink():
            raise CompactionError(
                f"refusing to archive replaced messages to {where}: it is a symbolic link"
            )
        try:
            lines = "".join(json_line(dict(message)) + "\n" for message in messages)
            old = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
            write_atomically(self.path, old + ("\n" if old and old[-1] != "\n" else "") + lines)
        except (OSError, UnicodeError, TypeError, ValueError, RecursionError) as exc:
            raise CompactionError(f"cannot archive replaced messages to {where}: {exc}") from exc
        return where


def read_transcript(file: str) -> Transcript:
    """The transcript in ``file``, or on standard input for ``-``."""
    if file != STDIN:
        return load_transcript(file)
    stdin = sys.stdin  # bytes when there are, so a BOM or bad UTF-8 is reported like a file's
    data: bytes | str = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read()
    return parse_transcript(data, source="standard input")


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactRequest:
    """One ``compact`` invocation: the transcript, the options, the places, the output form."""

    file: str
    options: CompactionOptions
    places: Destinations
    force: bool
    as_json: bool
    quiet: bool


def compact_request(
    file: str,
    output: str | None,
    flags: Mapping[str, Any],
    options: CompactionOptions,
    *,
    force: bool,
    as_json: bool,
) -> CompactRequest:
    """The request the flags describe; the archive and the summary's pointer set from it."""
    places = destinations(
        file,
        output,
        archive=flags.get("archive"),
        no_archive=bool(flags.get("no_archive")),
        in_place=bool(flags.get("in_place")),
    )
    archive = FileArchive(places.archive) if places.archive is not None else None
    options = replace(options, archive=archive, transcript_path=places.pointer)
    return CompactRequest(
        file=file,
        options=options,
        places=places,
        force=force,
        as_json=as_json,
        quiet=bool(flags.get("quiet")),
    )


@dataclass(frozen=True, slots=True)
class Compacted:
    """What ``compact`` did: its JSON-ready report, the new messages and their text."""

    report: dict[str, Any]
    messages: list[dict[str, Any]]
    text: str


def run_compact(request: CompactRequest) -> Compacted:
    """Compact, write the output (the archive is written during compaction, before it), and
    report. Progress is shown on stderr while it runs (see :class:`~.Terminal`)."""
    from synopsis.compaction.compactor import Compactor
    from synopsis.transcripts import dump_transcript

    screen, places = terminal(), request.places
    shown = screen.shows_progress(quiet=request.quiet, as_json=request.as_json)
    label = places.source.name if places.source is not None else "standard input"
    with screen.progress(*status_columns(), shown=shown) as display:
        handlers = (CompactionProgress(display, label),) if display is not None else ()
        transcript = read_transcript(request.file)
        compactor = Compactor(options=replace(request.options, on_event=handlers))
        result = compactor.compact(transcript.messages, force=request.force)
        messages, counts = redacted_anyway(
            request.options, result.messages, ran=request.force or result.triggered
        )
        result = replace(result, messages=messages, redacted=counts or result.redacted)
        text = dump_transcript(result.messages, transcript.format, extra=transcript.extra)
        changed = result.compacted or bool(result.redacted)
        if places.output is not None and (changed or not places.in_place):
            write_atomically(places.output, text)
    report = {
        "ok": result.error is None,
        **result.report(),
        "messages_before": len(transcript.messages),
        "messages": len(result.messages),
        "output": str(places.output) if places.output is not None else None,
    }
    return Compacted(report, result.messages, text)


def failure(report: Mapping[str, Any], *, as_json: bool) -> CliError | None:
    """The error (exit 3) for a compaction that failed and kept the history, else None."""
    error = report.get("error")
    if error is None:
        return None
    what = "archiving" if error.get("type") == "CompactionError" else "summarization"
    return SummarizationFailed(
        f"{what} failed, history kept: {readable_error(error)}",
        error_type=str(error.get("type", "CompactionError")),
        as_json=as_json,
        reported=as_json,
    )
