"""The synopsis service: a FastAPI app with per-tenant API keys and an OpenAI-compatible proxy.

Needs the ``server`` extra (``pip install 'synopsis[server]'``). Start it with
``synopsis serve`` or build it with :func:`create_app` (an ASGI app for any server)::

    from synopsis.server import ServerOptions, create_app

    app = create_app(ServerOptions(db="postgresql://...", upstream="https://api.openai.com/v1"))

See ``docs/server.md``. :class:`ServerOptions` needs no extra, so the CLI can build its flags
from it on a plain install; :func:`create_app` (FastAPI, httpx) is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from synopsis.server.options import ServerOptions

if TYPE_CHECKING:
    from synopsis.server.app import create_app

__all__ = ["ServerOptions", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from synopsis.server.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
