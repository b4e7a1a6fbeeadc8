"""``synopsis memory import`` and ``export``: memories as JSON Lines, one a line, and back.

The format, the checks made before anything is written and the batches it is written in are
described in :mod:`synopsis.cli.memory`, which registers these commands with the rest.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import click

from synopsis.cli._errors import OneLineCommand
from synopsis.cli._terminal import advancer, count_columns, counted, emit_json, terminal
from synopsis.cli.memory import _common, _embedding, _fail, _namespace, _opened
from synopsis.errors import InvalidInput, InvalidNamespace, StoreError, SynopsisError
from synopsis.memory import MemoryItem, MemoryStore, NewMemory, normalize_namespace
from synopsis.memory.rules import check_tenant, default_key, normalize_tags, prepare_memory
from synopsis.transcripts import json_line, split_json_lines

__all__ = ["export", "import_", "parse_record"]

_TIME_FIELDS = ("created_at", "updated_at", "expires_at")
_IMPORT_FIELDS = frozenset({"namespace", "kind", "text", "key", "tags", "context", *_TIME_FIELDS})
#: Memories read per search page by ``export``.
_PAGE = 500
#: Memories written per ``put_many`` call (one transaction each) by ``import``.
_BATCH = 500


def _parse_time(data: dict[str, Any], name: str) -> datetime | None:
    """An optional ISO 8601 time with a UTC offset."""
    value = data.get(name)
    if value is None:
        return None
    hint = f"{name!r} must be an ISO 8601 time with a UTC offset, e.g. 2025-01-31T12:00:00Z"
    if not isinstance(value, str):
        raise ValueError(hint)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(hint) from None
    if parsed.utcoffset() is None:
        raise ValueError(hint)
    return parsed


def _iso(moment: datetime) -> str:
    """An aware datetime as ISO 8601 in UTC, to the microsecond (fixed width)."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_record(line: str) -> NewMemory:
    """Validate one JSON line into the batch item it restores; raise ValueError with the problem."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"malformed JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise ValueError(f"unreadable JSON value: {str(exc).split(';')[0]}") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - _IMPORT_FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}")
    text, kind, key = data.get("text"), data.get("kind", "note"), data.get("key")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("'text' must be a non-empty string")
    if not isinstance(kind, str) or not kind:
        raise ValueError("'kind' must be a non-empty string")
    if key is not None and (not isinstance(key, str) or not key):
        raise ValueError("'key' must be a non-empty string")
    context = data.get("context", "")
    if not isinstance(context, str):
        raise ValueError("'context' must be a string")
    if "namespace" not in data:
        raise ValueError("'namespace' is required")
    try:
        namespace = normalize_namespace(data["namespace"])
        tags = normalize_tags(data.get("tags"))
    except SynopsisError as exc:
        raise ValueError(str(exc)) from None
    created_at, updated_at, expires_at = (_parse_time(data, name) for name in _TIME_FIELDS)
    return NewMemory(
        namespace,
        key if key is not None else default_key(kind, text),
        text,
        kind=kind,
        tags=tags,
        created_at=created_at,
        updated_at=updated_at,
        expires_at=expires_at,
        context=context,
    )


def _check_record(tenant: str, record: NewMemory) -> None:
    """Everything the store will check about the record (key length, times, text, ...)."""
    try:
        prepare_memory(tenant, record)
    except SynopsisError as exc:
        raise ValueError(str(exc)) from None


def _read_records(file: str, tenant: str) -> list[tuple[int, NewMemory]]:
    """The records of ``file`` with their line numbers; any bad line fails before writing."""
    try:
        stream = sys.stdin if file == "-" else open(file, encoding="utf-8")  # noqa: SIM115
        with stream:
            lines = split_json_lines(stream.read())
    except (OSError, UnicodeError) as exc:
        _fail(f"cannot read {file}: {exc}")
    records: list[tuple[int, NewMemory]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = parse_record(line)
            _check_record(tenant, record)
        except ValueError as exc:
            _fail(f"{file}:{number}: {exc}; nothing was imported")
        records.append((number, record))
    return records


def _write_batches(
    store: MemoryStore,
    tenant: str,
    file: str,
    records: Sequence[tuple[int, NewMemory]],
    advance: Callable[[int], object],
) -> None:
    """``put_many`` in batches of ``_BATCH``; a batch the store refuses names its line.

    Should the store give up on a batch (StoreError: a database locked too long, a lost
    connection), the error says how many memories the batches before it committed.
    """
    for start in range(0, len(records), _BATCH):
        batch = records[start : start + _BATCH]
        try:
            store.put_many(tenant, [record for _, record in batch])
        except (InvalidInput, InvalidNamespace) as exc:
            if exc.index is None:
                raise
            reason = exc.__cause__ or exc
            line = batch[exc.index][0]
            _fail(f"{file}:{line}: {reason}; only the first {start} memories were imported")
        except StoreError as exc:
            raise StoreError(f"{file}:{batch[0][0]}: {exc}; {_committed(records, start)}") from exc
        advance(len(batch))


def _committed(records: Sequence[tuple[int, NewMemory]], count: int) -> str:
    """What the first ``count`` records, written before a failure, amount to."""
    if count == 0:
        return "nothing was imported"
    return f"only the first {count} memories (through line {records[count - 1][0]}) were imported"


def _live(records: list[tuple[int, NewMemory]], now: datetime) -> list[tuple[int, NewMemory]]:
    """The records that have not expired at ``now`` (an import skips the others)."""
    return [(n, r) for n, r in records if r.expires_at is None or r.expires_at > now]


@click.command("import", cls=OneLineCommand)
@_common
@_embedding
@click.option("-q", "--quiet", is_flag=True, help="Show no progress on standard error.")
@click.argument("file")
def import_(db: str, tenant: str, as_json: bool, embedder: str, quiet: bool, file: str) -> None:
    """Import memories from a JSON Lines FILE (or stdin with -); all lines are checked first."""
    try:
        checked_tenant = check_tenant(tenant)
    except SynopsisError as exc:
        _fail(str(exc))
    every = _read_records(file, checked_tenant)
    records = _live(every, datetime.now(UTC))
    expired = len(every) - len(records)
    screen = terminal()
    shown = screen.shows_progress(quiet=quiet, as_json=as_json)
    with (
        _opened(db, embedder) as store,
        screen.progress(*count_columns(), shown=shown) as bar,
    ):
        advance = advancer(bar, "importing", total=len(records))
        _write_batches(store, checked_tenant, file, records, advance)
    if as_json:
        emit_json({"imported": len(records), **({"skipped_expired": expired} if expired else {})})
    else:
        skipped = f" ({expired} expired, skipped)" if expired else ""
        click.echo(f"imported {counted(len(records), 'memory', 'memories')}{skipped}")


def _export_dict(item: MemoryItem) -> dict[str, Any]:
    """Every field of a memory but its tenant: what ``import`` needs to restore it exactly.

    ``context`` is written only when the memory has one.
    """
    fields = {
        "namespace": list(item.namespace),
        "kind": item.kind,
        "text": item.text,
        "key": item.key,
        "tags": dict(item.tags),
        "created_at": _iso(item.created_at),
        "updated_at": _iso(item.updated_at),
        "expires_at": None if item.expires_at is None else _iso(item.expires_at),
    }
    return {**fields, "context": item.context} if item.context else fields


@click.command(cls=OneLineCommand)
@_common
@click.option("--namespace-prefix", default="", help="Only under this prefix, e.g. user/u1.")
def export(db: str, tenant: str, as_json: bool, namespace_prefix: str) -> None:
    """Write the tenant's memories, every field, as JSON Lines (the shape `import` reads)."""
    prefix = _namespace(namespace_prefix, option="--namespace-prefix", allow_empty=True)
    with _opened(db, create=False) as store:
        offset = 0
        while True:
            hits = store.search(tenant, prefix, limit=_PAGE, offset=offset)
            for hit in hits:
                click.echo(json_line(_export_dict(hit.item)))
            if len(hits) < _PAGE:
                break
            offset += _PAGE
