"""Settings from the environment: the only place synopsis reads ``SYNOPSIS_*`` variables.

=====================  ============  =========================================================
variable               field         value (an empty variable counts as unset)
=====================  ============  =========================================================
``SYNOPSIS_DB``        ``db``        a SQLite file or a ``postgresql://`` URL
                                     (default ``./synopsis.db``)
``SYNOPSIS_TENANT``    ``tenant``    the tenant id (no default)
``SYNOPSIS_EMBEDDER``  ``embedder``  ``none``, ``static`` or ``e5`` (default ``none``)
=====================  ============  =========================================================

:meth:`Settings.from_env` reads a mapping it is given (``os.environ`` at the edge, a plain dict
in tests), so the library itself never touches the process environment. A malformed value is
a :class:`~synopsis.errors.ConfigError` naming the variable (never echoing a database URL,
which may hold a password). Options given explicitly win over these values; the CLI asks for
a setting only when its option is missing. A new setting (the server's host, port, upstream
URL and log level) is one field here and one line of :meth:`Settings.from_env`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeVar, get_args

from synopsis.errors import ConfigError, InvalidInput
from synopsis.memory._checks import check_tenant
from synopsis.memory.open import DEFAULT_DB

__all__ = ["EMBEDDERS", "EmbedderName", "Settings"]

#: Embedders chosen by name: ``none`` (keyword search only), ``static`` or ``e5`` (bundled models).
EmbedderName = Literal["none", "static", "e5"]
EMBEDDERS: Final[tuple[EmbedderName, ...]] = get_args(EmbedderName)
T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Where and as whom synopsis runs, as configured by ``SYNOPSIS_*`` variables."""

    #: A SQLite file or a ``postgresql://`` URL (``SYNOPSIS_DB``).
    db: str = DEFAULT_DB
    #: The tenant whose data to use (``SYNOPSIS_TENANT``); None when not configured.
    tenant: str | None = None
    #: How to embed texts for vector search (``SYNOPSIS_EMBEDDER``).
    embedder: EmbedderName = "none"

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """The settings ``environ`` holds; defaults for what it lacks; ConfigError if bad."""
        defaults = cls()
        return cls(
            db=_read(environ, "SYNOPSIS_DB", _database, defaults.db),
            tenant=_read(environ, "SYNOPSIS_TENANT", _tenant, defaults.tenant),
            embedder=_read(environ, "SYNOPSIS_EMBEDDER", _embedder, defaults.embedder),
        )


def _read(environ: Mapping[str, str], variable: str, parse: Callable[[str], T], default: T) -> T:
    """``parse`` of the variable's value, ``default`` when it is unset or empty."""
    raw = environ.get(variable)
    if not raw:  # empty means unset, as click and most shells' ``VAR= cmd`` treat it
        return default
    try:
        return parse(raw)
    except ValueError as exc:
        raise ConfigError(f"{variable} {exc}") from None


def _database(raw: str) -> str:
    if not raw.strip():
        raise ValueError("must be a SQLite file path or a postgresql:// URL, not blank")
    return raw


def _tenant(raw: str) -> str:
    try:
        return check_tenant(raw)
    except InvalidInput as exc:
        raise ValueError(f"is not a usable tenant id: {exc}") from None


def _embedder(raw: str) -> EmbedderName:
    for name in EMBEDDERS:
        if raw == name:
            return name
    raise ValueError(f"must be one of {', '.join(EMBEDDERS)}, not {raw[:40]!r}")
