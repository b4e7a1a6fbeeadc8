"""Endpoint URLs: credentials taken out of them, and never printed.

``openai-compatible:MODEL@http://user:secret@host/v1`` carries credentials in its URL. They
are split off here (:func:`parse_endpoint`) to become an API key or HTTP basic auth, so that the
URL handed to an SDK, the model's name and everything logged is free of them; anything that
may still hold a URL (an error message, a model spec) goes through :func:`redact_url` before it
is shown.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from dataclasses import dataclass
from typing import Final

from synopsis.errors import ConfigError

__all__ = ["Endpoint", "parse_endpoint", "redact_spec", "redact_url", "split_model_url"]

#: ``scheme://userinfo@``: the userinfo runs to the last ``@`` before the path.
_USERINFO: Final = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s]*@")
#: Query parameters that carry a secret (``?key=`` for Gemini, ``?api-version`` is not one).
_SECRET_QUERY: Final = re.compile(
    r"(?P<name>[?&](?:api[_-]?key|key|token|access[_-]?token|password|secret|sig|signature)=)"
    r"[^&#\s]+",
    re.IGNORECASE,
)
#: An ``@`` that starts a URL: where a model id ends in ``MODEL@BASE_URL``.
_AT_URL: Final = re.compile(r"@(?=[A-Za-z][A-Za-z0-9+.-]*://)")


def redact_url(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``: the userinfo
    (``user:password@``) and secret query parameters (``?key=...``)."""
    return _SECRET_QUERY.sub(r"\g<name>***", _USERINFO.sub(r"\g<scheme>***@", text))


def redact_spec(spec: str) -> str:
    """A model spec as it may be shown: :func:`redact_url`, and when the part after an ``@``
    is no URL at all (``MODEL@user:secret@host``), nothing of it."""
    shown = redact_url(spec)
    if "@" in shown and "://" not in shown:
        return shown.partition("@")[0] + "@***"
    return shown


def split_model_url(spec: str) -> tuple[str, str]:
    """``MODEL@BASE_URL`` split at the last ``@`` that starts a URL (a model id may hold ``@``;
    the URL's own ``user@host`` does not start one). ConfigError when there is none."""
    found = list(_AT_URL.finditer(spec))
    model, url = (spec[: found[-1].start()], spec[found[-1].end() :]) if found else ("", "")
    if not model or not url:
        raise ConfigError(
            "write 'openai-compatible:MODEL@BASE_URL', e.g. "
            f"'openai-compatible:qwen2.5@http://localhost:8000/v1' (got {redact_spec(spec)!r})"
        )
    return model, url


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A base URL without credentials, and the credentials it carried."""

    url: str
    username: str | None = None
    password: str | None = None

    @property
    def api_key(self) -> str | None:
        """A lone secret (``https://KEY@host`` or ``https://:KEY@host``) is an API key."""
        if self.username and self.password:
            return None
        return self.password or self.username or None

    def headers(self) -> dict[str, str]:
        """HTTP basic auth for ``user:password@`` (a proxy in front of the server)."""
        if not (self.username and self.password):
            return {}
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode("ascii")
        return {"Authorization": f"Basic {token}"}


def parse_endpoint(url: str) -> Endpoint:
    """Split the credentials off an ``http(s)`` base URL; ConfigError for anything else."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        hostname = parts.hostname
    except ValueError as exc:
        raise ConfigError(f"cannot read the base URL {redact_url(url)!r}: {exc}") from None
    if parts.scheme.lower() not in ("http", "https") or not hostname:
        raise ConfigError(
            f"the base URL must be http(s)://host[:port]/path, got {redact_url(url)!r}"
        )
    host = parts.netloc.rpartition("@")[2]
    clean = urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, ""))
    return Endpoint(
        url=clean,
        username=_unquoted(parts.username),
        password=_unquoted(parts.password),
    )


def _unquoted(value: str | None) -> str | None:
    return urllib.parse.unquote(value) if value else None
