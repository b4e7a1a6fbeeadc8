"""``synopsis memory reembed``: give vectors of the chosen embedder to the memories lacking one.

Memories put or imported without ``--embedder`` are found by keyword search only, and those
embedded by another model (``static`` when the store now searches with ``e5``, an older version
of a bundled model, vectors stored before models were recorded) are too: a store compares a
query only with vectors of its own embedder. This command embeds them with the chosen embedder,
``--batch`` at a time (each batch one embedding call and one transaction), oldest first, with
progress on stderr when it is a terminal. Each vector is stored with the embedder's identity
and each batch committed as it goes, so an interrupted run loses nothing: run it again and it
continues with the memories still lacking a vector of that model.

``--all`` re-embeds every memory of the tenant, whatever made its vector (a custom model
changed without changing its identity, say): it first drops all the tenant's vectors (one
transaction; they are found by keyword only until re-embedded), then embeds as above. An
interrupted ``--all`` is resumed by running ``reembed`` without ``--all``; running ``--all``
again starts over.

Vectors stored before synopsis recorded which model made each one are of an unknown model and
count as missing. ``--adopt-unknown`` records the chosen embedder as their model instead (one
statement, no embedding): use it only when you know that embedder made them, as re-embedding a
large store with ``e5`` can take hours.

One tenant per run (``--tenant``): run it once per tenant. It changes no text, key or time of
any memory.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from synopsis.cli._errors import OneLineCommand
from synopsis.cli._terminal import advancer, count_columns, counted, emit_json, terminal
from synopsis.cli.memory import _common, _embedding, _fail, _opened
from synopsis.memory import MemoryStore
from synopsis.memory.rules import MAX_LIMIT

__all__ = ["reembed", "reembed_all"]


def reembed_all(
    store: MemoryStore, tenant: str, *, batch: int, advance: Callable[[int], None]
) -> int:
    """Call ``store.reembed`` until it embeds nothing more; return how many it embedded."""
    total = 0
    while done := store.reembed(tenant, batch=batch):
        total += done
        advance(done)
    return total


@click.command(cls=OneLineCommand)
@_common
@_embedding
@click.option(
    "--batch",
    type=click.IntRange(1, MAX_LIMIT),
    default=100,
    show_default=True,
    help="Memories embedded per call and transaction.",
)
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="Re-embed every memory, whatever made its vector (drops them first; if interrupted, "
    "run reembed without --all to resume).",
)
@click.option(
    "--adopt-unknown",
    "adopt",
    is_flag=True,
    help="First record this embedder as the model of the vectors stored before synopsis "
    "recorded models (only if it made them), instead of re-embedding those.",
)
@click.option("-q", "--quiet", is_flag=True, help="Show no progress on standard error.")
def reembed(
    db: str,
    tenant: str,
    as_json: bool,
    embedder: str,
    batch: int,
    everything: bool,
    adopt: bool,
    quiet: bool,
) -> None:
    """Embed the tenant's memories lacking a vector of this embedder (a rerun resumes)."""
    if embedder == "none":
        _fail("reembed needs an embedder: --embedder static or e5 (or SYNOPSIS_EMBEDDER)")
    if everything and adopt:
        _fail("--all re-embeds every memory: it cannot also --adopt-unknown vectors")
    adopted = 0
    screen = terminal()
    shown = screen.shows_progress(quiet=quiet, as_json=as_json)
    with (
        _opened(db, embedder, create=False) as store,
        screen.progress(*count_columns(), shown=shown) as bar,
    ):
        if everything:
            store.forget_vectors(tenant)
        if adopt:
            adopted = store.adopt_vectors(tenant)
        advance = advancer(bar, "embedding", total=store.count_unembedded(tenant))
        embedded = reembed_all(store, tenant, batch=batch, advance=advance)
        left = store.count_unembedded(tenant)
    if as_json:
        found = {"embedded": embedded, "left": left, "embedder": store.embedder_id}
        emit_json(found | ({"adopted": adopted} if adopt else {}))
    else:
        if adopt:
            click.echo(f"adopted the vectors of {counted(adopted, 'memory', 'memories')}")
        click.echo(f"embedded {counted(embedded, 'memory', 'memories')} with {embedder}")
        if left:
            click.echo(f"{counted(left, 'memory', 'memories')} changed meanwhile: run it again")
