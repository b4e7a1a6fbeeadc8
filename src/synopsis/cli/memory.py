"""``synopsis memory``: put, search, import, export, reembed and delete long-term memories.

Every command takes ``--db`` (a SQLite file, default ``./synopsis.db``, or a
``postgresql://`` URL; env ``SYNOPSIS_DB``), ``--tenant`` (required; env ``SYNOPSIS_TENANT``)
and ``--json``. Namespaces are written ``user/u1/session/s1``. ``put``, ``import`` and
``search`` also take ``--embedder static`` or ``--embedder e5`` (bundled models, ``embeddings``
extra; env ``SYNOPSIS_EMBEDDER``): texts written with it can be found by ``search --mode vector`` or
``--mode hybrid`` (with the same embedder: every vector records which model made it);
``reembed --embedder NAME`` embeds, later, those written without it or with another model
(:mod:`synopsis.cli._reembed`). Exports carry no vectors. A missing option takes its value
from the environment, read by :meth:`synopsis.config.Settings.from_env`; an option given on
the command line always wins.

``import`` reads JSON Lines, one memory a line::

    {"namespace": ["user", "u1", "session", "s1"], "kind": "summary", "text": "...",
     "key": "optional", "tags": {"optional": "strings"},
     "created_at": "2025-01-31T12:00:00.000000Z", "updated_at": "...", "expires_at": null,
     "context": "optional words to find it by"}

The times are optional ISO 8601 with a UTC offset; given, they are restored as they are
(otherwise the import stamps the memory with the current time). A memory whose
``expires_at`` has passed is skipped, and counted. The whole file is checked before
anything is written: a bad line is reported as ``FILE:LINE: problem`` and nothing is
imported (exit code 2). It then writes ``put_many`` batches of 500, one transaction each;
should the store still refuse a line at write time, or give up (a database locked by other
writers for too long), the error names that line and how many memories the batches before
it committed.

``export`` writes every field of every live memory in that shape, so ``export | import``
into an empty database is a backup and its restore: exporting the copy gives the same
bytes. Lines are split at ``\\n`` only, and U+2028, U+2029 and U+0085 are written escaped.
A memory without a key gets one derived from its kind and text, so importing or putting the
same memory twice is a no-op.

The read-only commands (``search``, ``export``) and ``delete-user`` refuse a SQLite file
that does not exist ("no such database", exit code 2) instead of creating an empty one; only
``put`` and ``import`` create the database. ``import`` shows its progress on stderr when that
is a terminal (``--quiet`` turns it off).

Bad input prints one line on stderr and exits with code 2, a store that fails (or cannot be
reached) exits with code 4; there are no tracebacks. With ``--json`` a failure is also
``{"ok": false, "error": {"type": ..., "message": ...}}`` on stdout.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from synopsis.cli._errors import (
    BadInput,
    LazyGroup,
    OneLineCommand,
    cli_error,
    lazy_command,
)
from synopsis.cli._terminal import counted, emit_json, terminal
from synopsis.config import EMBEDDERS, Settings
from synopsis.errors import ConfigError, SynopsisError
from synopsis.memory import (
    Embedder,
    MemoryStore,
    Namespace,
    SearchHit,
    SearchMode,
    normalize_namespace,
)
from synopsis.memory.open import open_store, parse_db
from synopsis.memory.rules import MAX_TTL_SECONDS, default_key

__all__ = ["memory"]

F = TypeVar("F", bound=Callable[..., Any])


def _fail(message: str) -> NoReturn:
    raise BadInput(message)


def _check_ttl(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A finite TTL (the range check has already bounded it; NaN slips through a range)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter("must be a finite number of seconds", ctx, param)
    return value


def _check_utf8(text: str, what: str) -> str:
    """``text``, or a one-line error if it holds bytes that were not UTF-8 (lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        _fail(f"{what} is not valid UTF-8 (undecodable byte at position {exc.start})")
    return text


@dataclass(frozen=True, slots=True)
class _FromEnv:
    """A click default: a setting from the environment, read only when the option is missing.

    So an explicit option wins, even over a malformed variable; a malformed variable that is
    needed is one line and exit code 2. ``--help`` shows the library's default (``str``).
    """

    setting: Callable[[Settings], str | None]

    def __call__(self) -> str | None:
        try:
            return self.setting(Settings.from_env(os.environ, only=("db", "tenant", "embedder")))
        except ConfigError as exc:
            raise BadInput(str(exc)) from None

    def __str__(self) -> str:
        return str(self.setting(Settings()))


def _given(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    """Refuse a required option that is neither given nor set in the environment.

    (click counts a default of None as a value, so ``required=True`` alone lets it through.)
    """
    if value is None:
        raise click.MissingParameter(ctx=ctx, param=param)
    return value


def _common(fn: F) -> F:
    """--db, --tenant and --json, on every command."""
    fn = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")(fn)
    fn = click.option(
        "--tenant",
        default=_FromEnv(lambda s: s.tenant),
        required=True,
        callback=_given,
        help="Tenant whose data to use (env SYNOPSIS_TENANT).",
    )(fn)
    return click.option(
        "--db",
        default=_FromEnv(lambda s: s.db),
        show_default=True,
        help="SQLite file or postgresql:// URL (env SYNOPSIS_DB).",
    )(fn)


def _embedding(fn: F) -> F:
    """--embedder, on the commands that write or search text."""
    return click.option(
        "--embedder",
        type=click.Choice(EMBEDDERS),
        default=_FromEnv(lambda s: s.embedder),
        show_default=True,
        help="Embed texts for vector/hybrid search: static (fast, English) or e5 (slow, "
        "multilingual), both bundled in the 'embeddings' extra (env SYNOPSIS_EMBEDDER).",
    )(fn)


def _embedder(name: str) -> Embedder | None:
    if name == "none":
        return None
    from synopsis.embeddings import load_embedder

    return load_embedder(name)


def _require_existing(db: str) -> None:
    """Refuse a SQLite file that does not exist, so a mistyped --db creates nothing."""
    plain = "://" not in db and db.strip() != ":memory:"
    if plain and not Path(db.strip()).expanduser().exists():
        _fail(f"no such database: {db}")
    kind, target = parse_db(db)
    if kind == "sqlite" and target != ":memory:" and not Path(target).exists():
        _fail(f"no such database: {db}")


@contextmanager
def _opened(db: str, embedder: str = "none", *, create: bool = True) -> Iterator[MemoryStore]:
    """Open the store (only an existing one unless ``create``), turn our errors and OS errors
    into one line with their exit code (a failing store is 4), and close it."""
    if not create:
        _require_existing(db)
    store: MemoryStore | None = None
    try:
        store = open_store(db, embedder=_embedder(embedder))
        yield store
    except (SynopsisError, OSError, UnicodeError) as exc:
        raise cli_error(exc) from None
    finally:
        if store is not None:
            store.close()


def _parse_tags(pairs: Sequence[str]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            _fail(f"--tag {pair!r} must look like key=value")
        tags[name.strip()] = value
    return tags


def _namespace(raw: str, *, option: str, allow_empty: bool = False) -> Namespace:
    try:
        return normalize_namespace(raw, allow_empty=allow_empty)
    except SynopsisError as exc:
        _fail(f"{option} {raw!r}: {exc}")


def _read_text(text: str) -> str:
    if text != "-":
        return _check_utf8(text, "TEXT")
    try:
        return _check_utf8(sys.stdin.read(), "standard input")
    except (OSError, UnicodeError) as exc:
        _fail(f"cannot read stdin: {exc}")


#: The commands with modules of their own (which import this one), loaded on first use.
_OWN_MODULES = {
    "export": (
        lazy_command("synopsis.cli._memory_io", "export"),
        "Write the tenant's memories, every field, as JSON Lines...",
    ),
    "import": (
        lazy_command("synopsis.cli._memory_io", "import_"),
        "Import memories from a JSON Lines FILE (or stdin with -);...",
    ),
    "reembed": (
        lazy_command("synopsis.cli._reembed", "reembed"),
        "Embed the tenant's memories lacking a vector of this...",
    ),
}


@click.group(
    cls=LazyGroup, lazy=_OWN_MODULES, context_settings={"help_option_names": ["-h", "--help"]}
)
def memory() -> None:
    """Long-term memories: put, search, import, export, delete a user."""


@memory.command(cls=OneLineCommand)
@_common
@_embedding
@click.option("--namespace", required=True, help="Where to put it, e.g. user/u1/session/s1.")
@click.option("--kind", default="note", show_default=True, help="Memory kind, e.g. summary.")
@click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE", help="A tag (repeatable).")
@click.option("--key", default=None, help="Item key (default: a hash of kind and text).")
@click.option(
    "--ttl",
    type=click.FloatRange(min=0, max=MAX_TTL_SECONDS, min_open=True),
    default=None,
    callback=_check_ttl,
    help="Expire after this many seconds (at most 100 years).",
)
@click.argument("text")
def put(
    db: str,
    tenant: str,
    as_json: bool,
    embedder: str,
    namespace: str,
    kind: str,
    tags: Sequence[str],
    key: str | None,
    ttl: float | None,
    text: str,
) -> None:
    """Store TEXT (or stdin with -) as one memory and print its key."""
    labels = _namespace(namespace, option="--namespace")
    body, parsed_tags = _read_text(text), _parse_tags(tags)
    _check_utf8(kind, "--kind")
    item_key = key if key is not None else default_key(kind, body)
    with _opened(db, embedder) as store:
        item = store.put(tenant, labels, item_key, body, kind=kind, tags=parsed_tags, ttl=ttl)
    if as_json:
        emit_json({"key": item.key, "namespace": list(item.namespace), "kind": item.kind})
    else:
        click.echo(item.key)


def _hit_dict(hit: SearchHit) -> dict[str, Any]:
    item = hit.item
    return {
        "key": item.key,
        "namespace": list(item.namespace),
        "kind": item.kind,
        "text": item.text,
        "score": hit.score,
        "tags": dict(item.tags),
        "created_at": item.created_at.isoformat(),
    }


def score_text(score: float | None) -> str:
    """A score with three significant digits (BM25 scores can be tiny), "-" when absent."""
    return "-" if score is None else f"{score:.3g}"


def _print_table(hits: Sequence[SearchHit]) -> None:
    """The hits at any width: namespaces, keys and texts wrap (long words fold), never cut."""
    from rich.table import Table
    from rich.text import Text

    table = Table(show_lines=True, expand=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("namespace/key", overflow="fold", ratio=2)
    table.add_column("kind", overflow="fold", max_width=12)
    table.add_column("text", overflow="fold", ratio=3)
    table.add_column("created", no_wrap=True)
    for hit in hits:
        item = hit.item
        where = Text("/".join(item.namespace))
        where.append("\n" + item.key, style="dim")
        created = item.created_at.strftime("%Y-%m-%d\n%H:%M")
        table.add_row(score_text(hit.score), where, item.kind, item.text, created)
    terminal().out.print(table)


@memory.command(cls=OneLineCommand)
@_common
@_embedding
@click.option("--namespace-prefix", default="", help="Only under this prefix, e.g. user/u1.")
@click.option("--kind", multiple=True, help="Only memories of this kind (repeatable).")
@click.option("--exclude-kind", multiple=True, help="Never memories of this kind (repeatable).")
@click.option("--limit", type=click.IntRange(1, 1000), default=10, show_default=True)
@click.option(
    "--mode",
    type=click.Choice(["keyword", "vector", "hybrid"]),
    default="keyword",
    show_default=True,
    help="vector and hybrid need --embedder.",
)
@click.argument("query")
def search(
    db: str,
    tenant: str,
    as_json: bool,
    embedder: str,
    namespace_prefix: str,
    kind: tuple[str, ...],
    exclude_kind: tuple[str, ...],
    limit: int,
    mode: SearchMode,
    query: str,
) -> None:
    """Search for QUERY: keyword (BM25; Chinese and English), vector or hybrid."""
    prefix = _namespace(namespace_prefix, option="--namespace-prefix", allow_empty=True)
    with _opened(db, embedder, create=False) as store:
        hits = store.search(
            tenant,
            prefix,
            query=query,
            kind=kind or None,
            exclude_kinds=exclude_kind,
            limit=limit,
            mode=mode,
        )
        missing = 0 if mode == "keyword" else store.count_unembedded(tenant)
    if as_json:
        emit_json([_hit_dict(hit) for hit in hits])
    elif hits:
        _print_table(hits)
    else:
        click.echo("no memories found", err=True)
    if missing:  # written without an embedder, or by another model: vector ranking skips them
        click.echo(
            f"note: {missing} memories have no {embedder} vector and rank by keyword only;"
            f" run: synopsis memory reembed --embedder {embedder}",
            err=True,
        )


@memory.command("delete-user", cls=OneLineCommand)
@_common
@click.argument("user_id")
def delete_user(db: str, tenant: str, as_json: bool, user_id: str) -> None:
    """Delete every memory, session summary and outbox entry of USER_ID."""
    with _opened(db, create=False) as store:
        deleted = store.delete_user(tenant, user_id)
    if as_json:
        emit_json({"user_id": user_id, "deleted": deleted})
    else:
        click.echo(f"deleted {counted(deleted, 'record')} of user {user_id}")
