"""The synopsis service: a FastAPI app with per-tenant API keys and an OpenAI-compatible proxy.

Needs the ``server`` extra (``pip install 'synopsis[server]'``). Start it with
``synopsis serve`` or build it with :func:`create_app` (an ASGI app for any server)::

    from synopsis.server import ServerOptions, create_app

    app = create_app(ServerOptions(db="postgresql://...", upstream="https://api.openai.com/v1"))

See ``docs/server.md``.
"""

from synopsis.server.app import create_app
from synopsis.server.options import ServerOptions

__all__ = ["ServerOptions", "create_app"]
