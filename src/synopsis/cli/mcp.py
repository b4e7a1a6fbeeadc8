"""``synopsis mcp``: the memory tools for a local MCP client, over stdio.

An MCP client (Claude Code, Claude Desktop, Cursor, ...) starts ``synopsis mcp`` and talks to
it on stdin/stdout; the tools (``recall``, ``remember``, ``search_history``, ``forget``; see
:mod:`synopsis.server.mcp`) act in one tenant of one store, both from the settings
(``--db``/``SYNOPSIS_DB``, ``--tenant``/``SYNOPSIS_TENANT``, default tenant ``local``). Needs
``synopsis[mcp]``; the SDK is imported only when the command runs. Nothing but the protocol is
written to stdout; logs go to stderr.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import click

from synopsis.cli._errors import BadInput, OneLineCommand, fail, guarded
from synopsis.config import EMBEDDERS, Settings
from synopsis.errors import ConfigError

__all__ = ["mcp"]

_LOCAL_TENANT = "local"


@click.command(cls=OneLineCommand)
@click.option("--db", default=None, help="SQLite file or postgresql:// URL (env SYNOPSIS_DB).")
@click.option(
    "--tenant",
    default=None,
    help=f"Tenant whose data the tools use (env SYNOPSIS_TENANT; default {_LOCAL_TENANT}).",
)
@click.option(
    "--user",
    default="default",
    show_default=True,
    help="The user a tool call acts for when it names none.",
)
@click.option(
    "--embedder",
    type=click.Choice(EMBEDDERS),
    default=None,
    help="Embed texts for hybrid recall (env SYNOPSIS_EMBEDDER; needs the embeddings extra).",
)
@click.option(
    "--archive",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="A JSONL archive directory (as compaction writes) that search_history searches too.",
)
@guarded
def mcp(
    db: str | None, tenant: str | None, user: str, embedder: str | None, archive: Path | None
) -> None:
    """Serve the memory tools to an MCP client over stdio (recall, remember, search_history,
    forget)."""
    try:
        settings = Settings.from_env(os.environ, only=("db", "tenant", "embedder"))
    except ConfigError as exc:
        raise BadInput(str(exc)) from None
    try:
        from synopsis.server.mcp import build_server, local_scope
    except ImportError:
        fail("synopsis mcp needs the 'mcp' extra: pip install 'synopsis[mcp]'")
    from synopsis.compaction.archive import JsonlArchive
    from synopsis.memory import open_store

    chosen = embedder or settings.embedder
    model = None
    if chosen != "none":
        from synopsis.embeddings import load_embedder

        model = load_embedder(chosen)
    store = open_store(db or settings.db, async_=True, embedder=model)
    resolve = local_scope(
        store,
        tenant or settings.tenant or _LOCAL_TENANT,
        user=user,
        archive=JsonlArchive(archive, embedder=model) if archive is not None else None,
    )

    async def run() -> None:
        try:
            await build_server(resolve).run_stdio_async()
        finally:
            await store.aclose()

    asyncio.run(run())
