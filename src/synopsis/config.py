"""Settings from the environment: the only place synopsis reads ``SYNOPSIS_*`` variables.

==================================  ==========================  =================================
variable                            field                       value (an empty variable counts
                                                                as unset)
==================================  ==========================  =================================
``SYNOPSIS_DB``                     ``db``                      a SQLite file or a
                                                                ``postgresql://`` URL (default
                                                                ``./synopsis.db``)
``SYNOPSIS_TENANT``                 ``tenant``                  the tenant id (no default)
``SYNOPSIS_EMBEDDER``               ``embedder``                ``none``, ``static`` or ``e5``
                                                                (default ``none``)
``SYNOPSIS_SCHEMA``                 ``schema``                  PostgreSQL schema of the tables
                                                                (a plain SQL identifier)
``SYNOPSIS_HOST``                   ``host``                    address ``synopsis serve``
                                                                listens on
``SYNOPSIS_PORT``                   ``port``                    its port, 0..65535
``SYNOPSIS_UPSTREAM``               ``upstream``                the proxy's OpenAI-compatible
                                                                base URL (``http(s)://``)
``SYNOPSIS_UPSTREAM_API_KEY``       ``upstream_api_key``        the upstream's API key (a secret:
                                                                never shown, not even in an error)
``SYNOPSIS_UPSTREAMS``              ``upstreams``               a TOML file naming upstreams by
                                                                model
``SYNOPSIS_UPSTREAM_TIMEOUT``       ``upstream_timeout``        seconds an upstream call may take
                                                                (> 0)
``SYNOPSIS_UPSTREAM_CONCURRENCY``   ``upstream_concurrency``    upstream calls one tenant may
                                                                have in flight (>= 1)
``SYNOPSIS_MODEL``                  ``model``                   the summarizer: ``extractive`` or
                                                                ``provider:model``
``SYNOPSIS_WORKERS``                ``workers``                 summary jobs one replica runs at
                                                                once (>= 1)
``SYNOPSIS_SUMMARIZE_EVERY``        ``summarize_every``         messages between background
                                                                summaries (>= 1)
``SYNOPSIS_TRIGGER_TOKENS``         ``trigger_tokens``          the proxy compacts above N tokens
                                                                (0 = off)
``SYNOPSIS_TRIGGER_MESSAGES``       ``trigger_messages``        ... or above N messages (0 = off)
``SYNOPSIS_KEEP_TAIL``              ``keep_tail``               messages kept verbatim (>= 0)
``SYNOPSIS_SUMMARY_CACHE``          ``summary_cache``           proxy summaries kept for reuse
                                                                (0 = none)
``SYNOPSIS_LEASE_SECONDS``          ``lease_seconds``           a claimed job's lease (> 0)
``SYNOPSIS_DRAIN_SECONDS``          ``drain_seconds``           shutdown's wait for running jobs
                                                                (>= 0)
``SYNOPSIS_SWEEP_SECONDS``          ``sweep_seconds``           seconds between due-session sweeps
                                                                (> 0)
``SYNOPSIS_REDACT``                 ``redact``                  redact secrets and personal data:
                                                                ``1``, ``true``, ``yes``, ``on``
                                                                or ``0``, ``false``, ``no``,
                                                                ``off``
``SYNOPSIS_REDACT_MODE``            ``redact_mode``             ``mask``, ``hash`` or ``drop``
                                                                (turns redaction on unless
                                                                ``redact`` says off)
``SYNOPSIS_REDACT_HASH_KEY``        ``redact_hash_key``         the key of ``hash`` mode's
                                                                tokens, 16+ characters (a secret:
                                                                never shown)
``SYNOPSIS_LOG_LEVEL``              ``log_level``               ``critical`` .. ``debug``
``SYNOPSIS_MAX_BODY_BYTES``         ``max_body_bytes``          largest request body the server
                                                                reads (>= 1024; 413 above it)
``SYNOPSIS_CPU_THREADS``            ``cpu_threads``             worker threads for a request's
                                                                CPU work (1..64)
``SYNOPSIS_ADMIN_KEY``              ``admin_key``               the admin API's key, 16+
                                                                characters (a secret: never
                                                                shown; unset = API off)
==================================  ==========================  =================================

The server's settings (from ``schema`` on) are None when their variable is unset: their
defaults live in one place, :class:`synopsis.server.options.ServerOptions`, and ``synopsis
serve --help`` shows them. :meth:`Settings.from_env` reads a mapping it is given
(``os.environ`` at the edge, a plain dict in tests), so the library itself never touches the
process environment. A malformed value is a :class:`~synopsis.errors.ConfigError` naming the
variable (never echoing a URL, which may hold a password, or a key). Options given explicitly
win over these values; the CLI asks for a setting only when its option is missing, and reads
only the variables it needs (``only=``), so a malformed variable of an option that was given
does not matter. A new setting is one field, one parser and one row of :data:`VARIABLES`.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeVar, get_args

from synopsis.errors import ConfigError, InvalidInput
from synopsis.memory.open import DEFAULT_DB
from synopsis.memory.rules import check_tenant
from synopsis.redact import Mode

__all__ = [
    "EMBEDDERS",
    "LOG_LEVELS",
    "REDACT_MODES",
    "UPSTREAM_FORMATS",
    "VARIABLES",
    "EmbedderName",
    "LogLevel",
    "Settings",
    "UpstreamFormat",
    "UpstreamSpec",
    "check_schema_name",
    "read_upstreams",
]

#: Embedders chosen by name: ``none`` (keyword search only), ``static`` or ``e5`` (bundled models).
EmbedderName = Literal["none", "static", "e5"]
EMBEDDERS: Final[tuple[EmbedderName, ...]] = get_args(EmbedderName)
LogLevel = Literal["critical", "error", "warning", "info", "debug"]
LOG_LEVELS: Final[tuple[LogLevel, ...]] = get_args(LogLevel)
#: How redaction writes what it takes out (:class:`~synopsis.redact.Redactor`'s ``mode``).
REDACT_MODES: Final[tuple[Mode, ...]] = get_args(Mode)
#: The wire format an upstream speaks: OpenAI's (``/chat/completions``, ``/responses``) or
#: Anthropic's (``/messages``).
UpstreamFormat = Literal["openai", "anthropic"]
UPSTREAM_FORMATS: Final[tuple[UpstreamFormat, ...]] = get_args(UpstreamFormat)
T = TypeVar("T")
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Where, as whom and how synopsis runs, as configured by ``SYNOPSIS_*`` variables."""

    #: A SQLite file or a ``postgresql://`` URL (``SYNOPSIS_DB``).
    db: str = DEFAULT_DB
    #: The tenant whose data to use (``SYNOPSIS_TENANT``); None when not configured.
    tenant: str | None = None
    #: How to embed texts for vector search (``SYNOPSIS_EMBEDDER``).
    embedder: EmbedderName = "none"
    # The server's settings: None = not configured (ServerOptions holds the defaults).
    schema: str | None = None
    host: str | None = None
    port: int | None = None
    upstream: str | None = None
    upstream_api_key: str | None = field(default=None, repr=False)
    upstreams: str | None = None
    upstream_timeout: float | None = None
    upstream_concurrency: int | None = None
    model: str | None = None
    workers: int | None = None
    summarize_every: int | None = None
    trigger_tokens: int | None = None
    trigger_messages: int | None = None
    keep_tail: int | None = None
    summary_cache: int | None = None
    lease_seconds: float | None = None
    drain_seconds: float | None = None
    sweep_seconds: float | None = None
    redact: bool | None = None
    redact_mode: Mode | None = None
    redact_hash_key: str | None = field(default=None, repr=False)
    log_level: LogLevel | None = None
    max_body_bytes: int | None = None
    cpu_threads: int | None = None
    admin_key: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str], *, only: Collection[str] | None = None
    ) -> Settings:
        """The settings ``environ`` holds; defaults for what it lacks; ConfigError if bad.

        ``only`` names the fields to read (default: all); the others keep their defaults.
        """
        unknown = set(only or ()) - VARIABLES.keys()
        if unknown:
            raise ValueError(f"no such setting: {', '.join(sorted(unknown))}")
        values: dict[str, Any] = {}
        for name, variable in VARIABLES.items():
            if only is None or name in only:
                values[name] = _read(environ, variable, _PARSERS[name])
        return cls(**{k: v for k, v in values.items() if v is not None})


def _read(environ: Mapping[str, str], variable: str, parse: Callable[[str], T]) -> T | None:
    """``parse`` of the variable's value, None when it is unset or empty."""
    raw = environ.get(variable)
    if not raw:  # empty means unset, as click and most shells' ``VAR= cmd`` treat it
        return None
    try:
        return parse(raw)
    except ValueError as exc:
        raise ConfigError(f"{variable} {exc}") from None


def check_schema_name(name: str) -> str:
    """``name`` if it is a plain SQL identifier (what a PostgreSQL schema may be called here)."""
    if not _SCHEMA_NAME.fullmatch(name):
        raise ValueError(f"must be a plain SQL identifier, not {name[:70]!r}")
    return name


def _text(what: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if not raw.strip():
            raise ValueError(f"must be {what}, not blank")
        return raw

    return parse


def _secret(raw: str) -> str:
    if not raw.strip() or not raw.isprintable():
        raise ValueError("must be a non-blank key of printable characters (value not shown)")
    return raw.strip()


def _hash_key(raw: str) -> str:
    key = _secret(raw)
    if len(key) < 16:
        raise ValueError("must be at least 16 characters (value not shown)")
    return key


def _boolean(raw: str) -> bool:
    word = raw.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"must be one of 1, true, yes, on, 0, false, no, off, not {raw[:40]!r}")


def _url(raw: str) -> str:
    if not raw.startswith(("http://", "https://")) or not raw.isprintable():
        raise ValueError("must be an http:// or https:// URL (value not shown)")
    return raw


def _integer(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw.strip(), 10)
        except ValueError:
            raise ValueError(f"must be a whole number, not {raw[:40]!r}") from None
        if value < low or (high is not None and value > high):
            bounds = f"in {low}..{high}" if high is not None else f">= {low}"
            raise ValueError(f"must be {bounds}, not {value}")
        return value

    return parse


def _seconds(*, positive: bool) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ValueError(f"must be a number of seconds, not {raw[:40]!r}") from None
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise ValueError(
                f"must be a {'positive' if positive else 'non-negative'} finite "
                f"number of seconds, not {raw[:40]!r}"
            )
        return value

    return parse


def _choice(choices: tuple[T, ...]) -> Callable[[str], T]:
    def parse(raw: str) -> T:
        for choice in choices:
            if raw == choice:
                return choice
        raise ValueError(f"must be one of {', '.join(map(str, choices))}, not {raw[:40]!r}")

    return parse


def _tenant(raw: str) -> str:
    try:
        return check_tenant(raw)
    except InvalidInput as exc:
        raise ValueError(f"is not a usable tenant id: {exc}") from None


#: Each setting's variable, by field.
VARIABLES: Final[Mapping[str, str]] = {
    name: f"SYNOPSIS_{name.upper()}" for name in Settings.__dataclass_fields__
}
_PARSERS: Final[Mapping[str, Callable[[str], Any]]] = {
    "db": _text("a SQLite file path or a postgresql:// URL"),
    "tenant": _tenant,
    "embedder": _choice(EMBEDDERS),
    "schema": check_schema_name,
    "host": _text("a host name or address"),
    "port": _integer(0, 65535),
    "upstream": _url,
    "upstream_api_key": _secret,
    "upstreams": _text("the path of a TOML file of upstreams"),
    "upstream_timeout": _seconds(positive=True),
    "upstream_concurrency": _integer(1),
    "model": _text('"extractive" or a provider:model spec'),
    "workers": _integer(1, 256),
    "summarize_every": _integer(1),
    "trigger_tokens": _integer(0),
    "trigger_messages": _integer(0),
    "keep_tail": _integer(0),
    "summary_cache": _integer(0),
    "lease_seconds": _seconds(positive=True),
    "drain_seconds": _seconds(positive=False),
    "sweep_seconds": _seconds(positive=True),
    "redact": _boolean,
    "redact_mode": _choice(REDACT_MODES),
    "redact_hash_key": _hash_key,
    "log_level": _choice(LOG_LEVELS),
    "max_body_bytes": _integer(1024),
    "cpu_threads": _integer(1, 64),
    "admin_key": _secret,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamSpec:
    """One upstream of the proxy: where it is, what it speaks, which models it serves.

    ``models`` holds exact model names and prefixes (a name ending in ``*``): a request goes
    to the upstream naming its ``model`` exactly, else to the one with the longest matching
    prefix.
    """

    name: str
    base_url: str
    format: UpstreamFormat = "openai"
    api_key: str | None = field(default=None, repr=False)
    models: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"upstream {self.name!r}: base_url must be an http(s):// URL")
        if self.format not in UPSTREAM_FORMATS:
            raise ConfigError(
                f"upstream {self.name!r}: format must be one of {', '.join(UPSTREAM_FORMATS)}, "
                f"not {self.format!r}"
            )
        bad = [m for m in self.models if not isinstance(m, str) or not m.strip("*").strip()]
        if not self.models or bad:
            raise ConfigError(
                f"upstream {self.name!r}: models must be a non-empty list of model names or "
                "prefixes ending in *"
            )


_UPSTREAM_KEYS: Final = frozenset({"base_url", "format", "api_key_env", "models"})


def read_upstreams(path: str | Path, environ: Mapping[str, str]) -> tuple[UpstreamSpec, ...]:
    """The upstreams a TOML file names, each key read from the variable it names in ``environ``.

    The file holds one table per upstream::

        [upstreams.openai]
        base_url = "https://api.openai.com/v1"
        format = "openai"                 # or "anthropic"
        api_key_env = "OPENAI_API_KEY"    # optional: the variable holding its key
        models = ["gpt-4o-mini", "gpt-4.1*"]

    A missing file, bad TOML, an unknown field, a model named twice or a key variable that is
    unset is a :class:`~synopsis.errors.ConfigError` naming it (never showing a key).
    """
    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except OSError as exc:
        raise ConfigError(f"cannot read the upstreams file {str(path)!r}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"the upstreams file {str(path)!r} is not valid TOML: {exc}") from None
    tables = data.get("upstreams")
    extra = set(data) - {"upstreams"}
    if not isinstance(tables, dict) or not tables or extra:
        raise ConfigError(
            f"the upstreams file {str(path)!r} must hold [upstreams.NAME] tables and nothing else"
        )
    found: list[UpstreamSpec] = []
    seen: dict[str, str] = {}
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ConfigError(f"upstreams.{name} must be a table")
        unknown = set(table) - _UPSTREAM_KEYS
        if unknown:
            raise ConfigError(f"upstreams.{name}: unknown field(s) {', '.join(sorted(unknown))}")
        models = table.get("models")
        if not isinstance(models, list):
            raise ConfigError(f"upstreams.{name}: models must be a list of model names")
        for model in models:
            if isinstance(model, str) and model in seen:
                raise ConfigError(f"model {model!r} is named by upstreams {seen[model]} and {name}")
            seen[str(model)] = name
        found.append(
            UpstreamSpec(
                name=name,
                base_url=str(table.get("base_url", "")),
                format=table.get("format", "openai"),
                api_key=_key_from(environ, name, table.get("api_key_env")),
                models=tuple(models),
            )
        )
    return tuple(found)


def _key_from(environ: Mapping[str, str], name: str, variable: object) -> str | None:
    if variable is None:
        return None
    if not isinstance(variable, str) or not variable:
        raise ConfigError(f"upstreams.{name}: api_key_env must name an environment variable")
    raw = environ.get(variable)
    if not raw:
        raise ConfigError(f"upstreams.{name}: the variable {variable} (its API key) is not set")
    try:
        return _secret(raw)
    except ValueError as exc:
        raise ConfigError(f"{variable} {exc}") from None
