"""``synopsis serve`` (the HTTP service) and ``synopsis keys`` (its per-tenant API keys).

Defaults come from :class:`~synopsis.server.options.ServerOptions`; FastAPI and uvicorn (the
``server`` extra) are imported only when ``serve`` runs. ``keys create`` prints the new key
once, on standard output; only its hash is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from synopsis import KeepTail, Trigger
from synopsis.cli import emit_json
from synopsis.cli._errors import fail, guarded
from synopsis.server.options import ServerOptions

__all__ = ["keys", "serve"]

F = TypeVar("F", bound=Callable[..., Any])
#: Bytes of request line and headers uvicorn accepts (its default is 16 KiB): a long
#: ``system_prompt`` in a query string then gets a 422 naming the field, not a dropped
#: connection.
MAX_REQUEST_HEAD = 1 << 20
_D = ServerOptions()


def _database(fn: F) -> F:
    fn = click.option(
        "--schema", default=_D.schema, show_default=True,
        help="PostgreSQL schema of the store's and the server's tables.",
    )(fn)  # fmt: skip
    return click.option(
        "--db", default=_D.db, show_default=True,
        help="SQLite file or postgresql:// URL (shared by every replica).",
    )(fn)  # fmt: skip


def _options(fn: F) -> F:
    """The flags of ``serve``, each defaulting to ServerOptions' default."""
    flags: list[tuple[tuple[str, ...], dict[str, Any]]] = [
        (("--host",), {"default": _D.host, "show_default": True}),
        (("--port",), {"type": click.IntRange(0, 65535), "default": _D.port, "show_default": True}),
        (("--upstream",), {"help": "OpenAI-compatible base URL, e.g. https://api.openai.com/v1."}),
        (("--upstream-api-key",), {"help": "The upstream's API key (never one of ours)."}),
        (("--workers",), {"type": click.IntRange(1, 256), "default": _D.workers,
                          "show_default": True, "help": "Summary jobs run at once here."}),
        (("--model",), {"default": _D.model, "show_default": True,
                        "help": 'Summarizer: "extractive" (offline) or "provider:model".'}),
        (("--summarize-every",), {"type": click.IntRange(1), "default": _D.summarize_every,
                                  "show_default": True}),
        (("--trigger-tokens",), {"type": click.IntRange(0), "default": _D.trigger.tokens,
                                 "show_default": True,
                                 "help": "The proxy compacts histories above N tokens (0 = off)."}),
        (("--trigger-messages",), {"type": click.IntRange(0), "default": 0, "show_default": True,
                                   "help": "... or above N messages (0 = off)."}),
        (("--keep-tail",), {"type": click.IntRange(0), "default": _D.keep_tail.messages,
                            "show_default": True, "help": "Messages kept verbatim."}),
        (("--hybrid/--no-hybrid",), {"default": _D.hybrid, "show_default": True,
                                     "help": "Three-layer context on the context endpoint."}),
        (("--lease-seconds",), {"type": click.FloatRange(min=0.1), "default": _D.lease_seconds,
                                "show_default": True}),
        (("--poll-seconds",), {"type": click.FloatRange(min=0.01), "default": _D.poll_seconds,
                               "show_default": True}),
        (("--outbox-seconds",), {"type": click.FloatRange(min=0.01), "default": _D.outbox_seconds,
                                 "show_default": True}),
        (("--drain-seconds",), {"type": click.FloatRange(min=0), "default": _D.drain_seconds,
                                "show_default": True}),
        (("--log-level",), {"type": click.Choice(["critical", "error", "warning", "info", "debug"]),
                            "default": "info", "show_default": True}),
    ]  # fmt: skip
    for names, settings in reversed(flags):
        fn = click.option(*names, **settings)(fn)
    return fn


def build_options(**flags: Any) -> ServerOptions:
    """ServerOptions from ``serve``'s flags."""
    trigger = Trigger(tokens=flags.pop("trigger_tokens") or None,
                      messages=flags.pop("trigger_messages") or None)  # fmt: skip
    keep_tail = KeepTail(messages=flags.pop("keep_tail"))
    flags.pop("log_level", None)
    return ServerOptions(trigger=trigger, keep_tail=keep_tail, **flags)


@click.command()
@_database
@_options
@guarded
def serve(log_level: str, **flags: Any) -> None:
    """Run the HTTP service: REST API, OpenAI-compatible proxy, background summaries."""
    options = build_options(**flags)
    try:
        import uvicorn

        from synopsis.server import create_app
    except ImportError as exc:
        fail(f"the server needs the 'server' extra: pip install 'synopsis[server]' ({exc})")
    app = create_app(options)
    uvicorn.run(
        app, host=options.host, port=options.port, log_level=log_level,
        timeout_graceful_shutdown=max(int(options.drain_seconds), 1),
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD,
    )  # fmt: skip


@click.group()
def keys() -> None:
    """API keys of the service: one tenant each, stored hashed."""


@contextmanager
def _ring(db: str, schema: str) -> Iterator[Any]:
    from synopsis.server.db import Database
    from synopsis.server.keys import KeyRing

    with Database(db, schema=schema) as database:
        yield KeyRing(database)


def _key_dict(key: Any) -> dict[str, Any]:
    return {
        "key_id": key.key_id,
        "tenant": key.tenant,
        "label": key.label,
        "created_at": key.created_at.isoformat(),
        "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
    }


@keys.command("create")
@_database
@click.option("--tenant", required=True, help="The tenant this key acts for.")
@click.option("--label", default="", help="A note to recognize the key by.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@guarded
def create_key(db: str, schema: str, tenant: str, label: str, as_json: bool) -> None:
    """Create a key and print it once (only its hash is kept)."""
    with _ring(db, schema) as ring:
        issued = ring.create(tenant, label=label)
    if as_json:
        emit_json({**_key_dict(issued.key), "key": issued.secret})
        return
    click.echo(issued.secret)
    click.echo(f"key {issued.key.key_id} for tenant {tenant!r}: shown once, store it now", err=True)


@keys.command("list")
@_database
@click.option("--tenant", default=None, help="Only this tenant's keys.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@guarded
def list_keys(db: str, schema: str, tenant: str | None, as_json: bool) -> None:
    """List keys (ids, tenants, labels; never the keys themselves)."""
    with _ring(db, schema) as ring:
        found = ring.list(tenant)
    if as_json:
        emit_json([_key_dict(k) for k in found])
        return
    for key in found:
        state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
        click.echo(f"{key.key_id}  {key.tenant}  {state}  {key.label}")


@keys.command("revoke")
@_database
@click.argument("key_id")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@guarded
def revoke_key(db: str, schema: str, key_id: str, as_json: bool) -> None:
    """Revoke a key by its id; requests with it get 401 from then on."""
    with _ring(db, schema) as ring:
        revoked = ring.revoke(key_id)
    if revoked is None:
        fail(f"no key with id {key_id!r}")
    if as_json:
        emit_json(_key_dict(revoked))
        return
    click.echo(f"revoked {key_id} (tenant {revoked.tenant!r})")
