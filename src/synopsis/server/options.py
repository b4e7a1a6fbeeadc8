"""The server's options: one frozen value, built from CLI flags (or settings) and given to the app.

The server never reads the environment itself; whoever starts it (``synopsis serve``, a test,
an ASGI factory) builds :class:`ServerOptions` and passes it to
:func:`~synopsis.server.app.create_app`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

from synopsis import KeepTail, Redactor, Trigger
from synopsis.config import REDACT_MODES, UpstreamSpec, check_schema_name
from synopsis.errors import ConfigError
from synopsis.memory.open import DEFAULT_DB
from synopsis.redact import Mode

__all__ = ["UVICORN_HTTP", "ServerOptions"]


#: How uvicorn parses HTTP for the service (``synopsis serve`` and the test server alike):
#: httptools with the service's head limits (:mod:`synopsis.server.protocol`: request line
#: and headers up to 1 MiB reach the app, so a too-long ``system_prompt`` gets a 422 naming
#: the field), named by its import path so that importing this module does not load uvicorn.
#: The event loop is uvloop when installed (the ``server`` extra).
UVICORN_HTTP: Final[dict[str, Any]] = {"http": "synopsis.server.protocol:BoundedHttpTools"}


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerOptions:
    """Everything ``synopsis serve`` can be told; every field has a working default."""

    #: A SQLite file (the default; nothing to start) or a ``postgresql://`` URL.
    db: str = DEFAULT_DB
    #: The PostgreSQL schema holding the store's and the server's tables.
    schema: str = "synopsis"
    host: str = "127.0.0.1"
    port: int = 8000
    #: Base URL of the OpenAI-compatible upstream, e.g. ``https://api.openai.com/v1``;
    #: None disables ``/v1/chat/completions`` and ``/v1/models`` (they answer 503).
    upstream: str | None = None
    #: The upstream's API key; a request may pass its own in ``X-Upstream-Authorization``.
    upstream_api_key: str | None = field(default=None, repr=False)
    #: Upstreams chosen by the request's ``model`` (``--upstreams FILE``,
    #: :func:`~synopsis.config.read_upstreams`); ``upstream`` serves the models none names.
    upstreams: tuple[UpstreamSpec, ...] = ()
    #: Seconds an upstream call may take, its whole answer included (then 504).
    upstream_timeout: float = 600.0
    #: Upstream calls one tenant may have in flight; one more is a 429 with ``Retry-After``,
    #: so a tenant whose upstream hangs cannot take every connection of the pool.
    upstream_concurrency: int = 64
    #: The summarizer: ``"extractive"`` (offline) or a ``provider:model`` spec.
    model: str = "extractive"
    #: Background summary jobs this process runs at the same time.
    workers: int = 2
    #: A session is summarized each time it grew by this many messages.
    summarize_every: int = 20
    window_messages: int | None = 40
    #: Three-layer context (summary, recalled notes, window) on the ``context`` endpoint.
    hybrid: bool = False
    recall_limit: int = 5
    #: When the proxy compacts a stateless history (``/v1/chat/completions`` without a session).
    trigger: Trigger = field(default_factory=Trigger.default)
    #: A chat product's tail: the newest quarter of the trigger stays verbatim (and the last
    #: message and newest user message always do; docs/compaction.md, "Defaults").
    keep_tail: KeepTail = field(default_factory=lambda: KeepTail(fraction=0.25))
    #: Summaries of stateless proxy histories kept for reuse (per process, LRU; 0 = none): a
    #: growing conversation that resends the same summarized prefix is not summarized again.
    summary_cache: int = 1024
    #: How long a claimed job is reserved for its worker; renewed while it runs. A job whose
    #: worker died is claimed again by any replica once its lease ran out.
    lease_seconds: float = 30.0
    #: How often idle workers look for jobs enqueued by other replicas.
    poll_seconds: float = 1.0
    #: A job failing this many times is set aside (kept, with its last error).
    max_attempts: int = 5
    #: How often pending dual writes (the outbox) are replayed.
    outbox_seconds: float = 60.0
    #: How often a replica looks for sessions due for a summary with no job queued (a kill
    #: between an append and its enqueue); one replica sweeps at a time.
    sweep_seconds: float = 60.0
    #: On shutdown, how long to wait for running summary jobs before giving up on them
    #: (their leases then run out and another replica, or the next start, retries them).
    drain_seconds: float = 30.0
    #: Take secrets and personal data out of everything the server sends a summarizer, stores
    #: (summaries, memories, session histories), returns from ``/v1/compact`` or sends upstream
    #: compacted. Off by default; ``/v1/compact`` may still ask for it per request.
    redact: bool = False
    #: ``mask`` (``[REDACTED:email]``), ``hash`` (``[EMAIL#3f2a9c1b]``: one token per value)
    #: or ``drop``.
    redact_mode: Mode = "mask"
    #: The key of ``hash`` mode's tokens. Replicas given the same key write the same token for
    #: a value; without one each process draws a random key, so its tokens are stable per
    #: process only.
    redact_hash_key: str | None = field(default=None, repr=False)
    #: The admin API's key (``/v1/admin/keys``); None turns the admin API off.
    admin_key: str | None = field(default=None, repr=False)
    #: The largest request body read (bytes); a larger one gets a 413 naming this limit.
    max_body_bytes: int = 8 << 20
    #: Worker threads running a request's CPU work (planning, redaction, token counting, the
    #: extractive model), so that none holds the event loop; further work waits its turn.
    cpu_threads: int = 4

    def __post_init__(self) -> None:
        try:
            check_schema_name(self.schema)
        except ValueError as exc:
            raise ConfigError(f"schema {exc}") from None
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be in 0..65535, not {self.port}")
        if self.upstream is not None and not self.upstream.startswith(("http://", "https://")):
            raise ConfigError("upstream must be an http:// or https:// URL")
        _positive(
            self,
            "workers",
            "summarize_every",
            "recall_limit",
            "max_attempts",
            "upstream_concurrency",
        )
        _positive(self, "max_body_bytes", "cpu_threads")
        _positive(self, "upstream_timeout", "lease_seconds", "poll_seconds", "outbox_seconds")
        _positive(self, "sweep_seconds")
        if self.summary_cache < 0:
            raise ConfigError(f"summary_cache must be >= 0, not {self.summary_cache}")
        if self.drain_seconds < 0:
            raise ConfigError("drain_seconds must be >= 0")
        if self.redact_mode not in REDACT_MODES:
            raise ConfigError(
                f"redact_mode must be one of {', '.join(REDACT_MODES)}, not {self.redact_mode!r}"
            )
        if self.admin_key is not None and len(self.admin_key.strip()) < 16:
            raise ConfigError("admin_key must be at least 16 characters")
        if self.redact_hash_key is not None and not self.redact_hash_key.strip():
            raise ConfigError("redact_hash_key must not be blank")

    @property
    def upstream_url(self) -> str | None:
        """The upstream base URL without a trailing slash."""
        return self.upstream.rstrip("/") if self.upstream else None

    @property
    def redaction(self) -> str:
        """The redaction policy in one word: ``off`` or its mode."""
        return self.redact_mode if self.redact else "off"

    def new_redactor(self) -> Redactor:
        """A redactor of ``redact_mode`` keyed with ``redact_hash_key`` (a random key when
        there is none): the server makes one at start-up and uses it for every request."""
        key = self.redact_hash_key.encode() if self.redact_hash_key else None
        return Redactor(mode=self.redact_mode, hash_key=key)

    def summary_shape(self) -> list[str]:
        """What else than the messages shapes a proxy summary (part of its cache key): a
        summary made without redaction is never served while redaction is on."""
        return [self.model, repr(self.trigger), repr(self.keep_tail), self.redaction]

    def describe(self) -> dict[str, Any]:
        """The options without secrets (the upstream key, a database password, the hash key)."""
        return {
            "db": _redact_url(self.db),
            "schema": self.schema,
            "upstream": self.upstream,
            "upstreams": [u.name for u in self.upstreams],
            "model": self.model,
            "workers": self.workers,
            "summarize_every": self.summarize_every,
            "redact": self.redaction,
        }


def _positive(options: ServerOptions, *names: str) -> None:
    for name in names:
        value = getattr(options, name)
        if isinstance(value, bool) or not value > 0:
            raise ConfigError(f"{name} must be positive, not {value!r}")


def _redact_url(url: str) -> str:
    """``postgresql://user:secret@host/db`` -> ``postgresql://user:***@host/db``."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)
