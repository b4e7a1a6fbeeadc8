"""``synopsis serve`` (the HTTP service) and ``synopsis keys`` (its per-tenant API keys).

Defaults come from :class:`~synopsis.server.options.ServerOptions`; FastAPI and uvicorn (the
``server`` extra) are imported only when ``serve`` runs. ``keys create`` prints the new key
once, on standard output; only its hash is stored.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from synopsis import KeepTail, Trigger
from synopsis.cli._errors import OneLineCommand, OneLineGroup, fail, guarded
from synopsis.cli._terminal import emit_json
from synopsis.config import LOG_LEVELS, REDACT_MODES, VARIABLES, Settings, read_upstreams
from synopsis.server.options import UVICORN_HTTP, ServerOptions

__all__ = ["build_options", "keys", "options_from", "resolve", "serve"]

F = TypeVar("F", bound=Callable[..., Any])
_D = ServerOptions()
#: What ``--help`` shows as each setting's default (the values ServerOptions holds).
_DEFAULTS: dict[str, object] = {
    "db": _D.db,
    "schema": _D.schema,
    "host": _D.host,
    "port": _D.port,
    "upstream_timeout": _D.upstream_timeout,
    "upstream_concurrency": _D.upstream_concurrency,
    "workers": _D.workers,
    "model": _D.model,
    "summarize_every": _D.summarize_every,
    "trigger_tokens": _D.trigger.tokens,
    "trigger_messages": 0,
    "keep_tail": "a quarter of the trigger (the last message and newest request always stay)",
    "summary_cache": _D.summary_cache,
    "hybrid": "off",
    "lease_seconds": _D.lease_seconds,
    "poll_seconds": _D.poll_seconds,
    "outbox_seconds": _D.outbox_seconds,
    "drain_seconds": _D.drain_seconds,
    "sweep_seconds": _D.sweep_seconds,
    "log_level": "info",
    "redact": "off",
    "redact_mode": _D.redact_mode,
    "max_body_bytes": _D.max_body_bytes,
    "cpu_threads": _D.cpu_threads,
}
#: Settings with no flag: a secret on the command line shows in the process list.
_ENV_ONLY = ("redact_hash_key", "admin_key")


def _option(name: str, help: str = "", **settings: Any) -> Callable[[F], F]:
    """A flag that is None when not given; its help names its variable and its default."""
    field = name.split("/")[0].removeprefix("--").replace("-", "_")
    notes = [f"env {VARIABLES[field]}"] if field in VARIABLES else []
    if field in _DEFAULTS:
        notes.append(f"default {_DEFAULTS[field]}")
    text = f"{help} ({'; '.join(notes)})" if notes else help
    return click.option(name, default=None, help=text.strip(), **settings)


def _database(fn: F) -> F:
    fn = _option("--schema", "PostgreSQL schema of the store's and the server's tables.")(fn)
    return _option("--db", "SQLite file or postgresql:// URL (shared by every replica).")(fn)


def _upstream_flags() -> list[Callable[[F], F]]:
    return [
        _option("--upstream", "OpenAI-compatible base URL, e.g. https://api.openai.com/v1."),
        _option("--upstream-api-key", "The upstream's API key (never one of ours)."),
        _option(
            "--upstreams",
            "TOML file naming upstreams by model (base URL, format, key variable); "
            "--upstream serves the models it does not name.",
        ),
        _option(
            "--upstream-timeout",
            "Seconds an upstream call may take.",
            type=click.FloatRange(min=0, min_open=True),
        ),
        _option(
            "--upstream-concurrency",
            "Upstream calls one tenant may have in flight (then 429).",
            type=click.IntRange(1),
        ),
    ]


def _options(fn: F) -> F:
    """The flags of ``serve``; a missing one comes from the environment, then ServerOptions."""
    count, seconds = click.IntRange(0), click.FloatRange(min=0)
    flags = [
        _option("--host", "Address to listen on."),
        _option("--port", type=click.IntRange(0, 65535)),
        *_upstream_flags(),
        _option("--workers", "Summary jobs run at once here.", type=click.IntRange(1, 256)),
        _option("--model", 'Summarizer: "extractive" (offline) or "provider:model".'),
        _option(
            "--summarize-every", "Messages between background summaries.", type=click.IntRange(1)
        ),
        _option(
            "--trigger-tokens", "The proxy compacts histories above N tokens (0 = off).", type=count
        ),
        _option("--trigger-messages", "... or above N messages (0 = off).", type=count),
        _option("--keep-tail", "Messages kept verbatim.", type=count),
        _option("--summary-cache", "Proxy summaries kept for reuse (0 = none).", type=count),
        _option("--hybrid/--no-hybrid", "Three-layer context on the context endpoint."),
        _option("--lease-seconds", type=click.FloatRange(min=0.1)),
        _option("--poll-seconds", type=click.FloatRange(min=0.01)),
        _option("--outbox-seconds", type=click.FloatRange(min=0.01)),
        _option("--drain-seconds", "Shutdown's wait for running summary jobs.", type=seconds),
        _option(
            "--sweep-seconds",
            "Seconds between sweeps that queue a summary for sessions due without one.",
            type=click.FloatRange(min=0, min_open=True),
        ),
        _option(
            "--redact/--no-redact",
            "Take secrets and personal data out of what is sent to "
            "a summarizer, stored, returned by /v1/compact or sent upstream compacted.",
        ),
        _option(
            "--redact-mode",
            "mask, hash (one token per value, keyed by "
            f"{VARIABLES['redact_hash_key']}) or drop. Turns --redact on.",
            type=click.Choice(REDACT_MODES),
        ),
        _option("--log-level", type=click.Choice(LOG_LEVELS)),
        _option(
            "--max-body-bytes",
            "Largest request body read (413 above it).",
            type=click.IntRange(1024),
        ),
        _option("--cpu-threads", "Threads for requests' CPU work.", type=click.IntRange(1, 64)),
    ]
    for flag in reversed(flags):
        fn = flag(fn)
    return fn


def resolve(flags: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """The flags given, then the ``SYNOPSIS_*`` variables of those missing (read by
    :class:`~synopsis.config.Settings`); what is in neither is left out (its default applies).

    A malformed variable is one line and exit code 2, and only matters when its flag is missing.
    """
    missing = [name for name, value in flags.items() if value is None and name in VARIABLES]
    settings = Settings.from_env(environ, only=missing)  # ConfigError: one line, exit code 2
    resolved = {name: value for name, value in flags.items() if value is not None}
    for name in missing:
        value = getattr(settings, name)
        if value is not None:
            resolved[name] = value
    return resolved


def build_options(flags: dict[str, Any]) -> tuple[ServerOptions, str]:
    """ServerOptions and the log level from ``serve``'s resolved flags."""
    flags = dict(flags)
    trigger = _D.trigger
    if "trigger_tokens" in flags or "trigger_messages" in flags:
        tokens = flags.pop("trigger_tokens", _D.trigger.tokens)
        trigger = Trigger(tokens=tokens or None, messages=flags.pop("trigger_messages", 0) or None)
    keep_tail = KeepTail(messages=flags.pop("keep_tail")) if "keep_tail" in flags else _D.keep_tail
    log_level = flags.pop("log_level", "info")
    flags.setdefault("redact", "redact_mode" in flags)  # a mode alone turns redaction on
    return ServerOptions(trigger=trigger, keep_tail=keep_tail, **flags), log_level


def options_from(flags: dict[str, Any], environ: Mapping[str, str]) -> tuple[ServerOptions, str]:
    """ServerOptions and the log level: the flags given, then the variables (of the flags
    missing and of the settings that have no flag), then the defaults."""
    resolved = resolve({**dict.fromkeys(_ENV_ONLY), **flags}, environ)
    if "upstreams" in resolved:  # each upstream's key comes from the variable it names
        resolved["upstreams"] = read_upstreams(resolved["upstreams"], environ)
    return build_options(resolved)


@click.command(cls=OneLineCommand)
@_database
@_options
@guarded
def serve(**flags: Any) -> None:
    """Run the HTTP service: REST API, OpenAI-compatible proxy, background summaries.

    A flag not given is read from its SYNOPSIS_* environment variable (named in its help);
    a flag given always wins. The admin API (/v1/admin/keys) is on when SYNOPSIS_ADMIN_KEY
    is set.
    """
    options, log_level = options_from(flags, os.environ)
    try:
        import uvicorn

        from synopsis.server import create_app
    except ImportError as exc:
        fail(f"the server needs the 'server' extra: pip install 'synopsis[server]' ({exc})")
    app = create_app(options)
    uvicorn.run(
        app,
        host=options.host,
        port=options.port,
        log_level=log_level,
        timeout_graceful_shutdown=max(int(options.drain_seconds), 1),
        **UVICORN_HTTP,
    )


@click.group(cls=OneLineGroup)
def keys() -> None:
    """API keys of the service: one tenant each, stored hashed."""


@contextmanager
def _ring(db: str | None, schema: str | None) -> Iterator[Any]:
    from synopsis.server.db import Database
    from synopsis.server.keys import KeyRing

    where = resolve({"db": db, "schema": schema}, os.environ)
    with Database(where.get("db", _D.db), schema=where.get("schema", _D.schema)) as database:
        yield KeyRing(database)


def _key_dict(key: Any) -> dict[str, Any]:
    return {
        "key_id": key.key_id,
        "tenant": key.tenant,
        "label": key.label,
        "created_at": key.created_at.isoformat(),
        "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
        "expires_at": key.expires_at.isoformat() if key.expires_at else None,
        "rate_per_minute": key.rate_per_minute,
    }


@keys.command("create", cls=OneLineCommand)
@_database
@click.option("--tenant", required=True, help="The tenant this key acts for.")
@click.option("--label", default="", help="A note to recognize the key by.")
@click.option(
    "--expires-in", type=click.FloatRange(min=0, min_open=True), help="Seconds until it expires."
)
@click.option("--rate-per-minute", type=click.IntRange(1), help="Requests a minute, per replica.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@guarded
def create_key(
    db: str | None,
    schema: str | None,
    tenant: str,
    label: str,
    expires_in: float | None,
    rate_per_minute: int | None,
    as_json: bool,
) -> None:
    """Create a key and print it once (only its hash is kept)."""
    import time

    expires_at = None if expires_in is None else time.time() + expires_in
    with _ring(db, schema) as ring:
        issued = ring.create(
            tenant, label=label, expires_at=expires_at, rate_per_minute=rate_per_minute
        )
    if as_json:
        emit_json({**_key_dict(issued.key), "key": issued.secret})
        return
    click.echo(issued.secret)
    click.echo(f"key {issued.key.key_id} for tenant {tenant!r}: shown once, store it now", err=True)


@keys.command("list", cls=OneLineCommand)
@_database
@click.option("--tenant", default=None, help="Only this tenant's keys.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@guarded
def list_keys(db: str | None, schema: str | None, tenant: str | None, as_json: bool) -> None:
    """List keys (ids, tenants, labels; never the keys themselves)."""
    with _ring(db, schema) as ring:
        found = ring.list(tenant)
    if as_json:
        emit_json([_key_dict(k) for k in found])
        return
    for key in found:
        state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
        click.echo(f"{key.key_id}  {key.tenant}  {state}  {key.label}")


@keys.command("revoke", cls=OneLineCommand)
@_database
@click.argument("key_id")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@guarded
def revoke_key(db: str | None, schema: str | None, key_id: str, as_json: bool) -> None:
    """Revoke a key by its id; requests with it get 401 from then on."""
    with _ring(db, schema) as ring:
        revoked = ring.revoke(key_id)
    if revoked is None:
        fail(f"no key with id {key_id!r}")
    if as_json:
        emit_json(_key_dict(revoked))
        return
    click.echo(f"revoked {key_id} (tenant {revoked.tenant!r})")
