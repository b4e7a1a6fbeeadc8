"""The proxy's hot path, ``POST /v1/chat/completions`` without a session, as a lean ASGI step.

Most proxy calls are an agent's stateless history below the trigger: authenticate, check the
body, forward it unchanged. Through FastAPI that costs more CPU than the forwarding itself
(dependency solving, the security scheme, body validation through its field machinery), so
:class:`LeanChat` serves exactly this case before the router sees it and hands every other
case to the app untouched:

* the key is read from ``Authorization: Bearer`` as FastAPI's scheme reads it, and looked up
  with :meth:`~synopsis.server.keys.AsyncKeyRing.authenticate_cached` (a revocation made
  elsewhere holds within a second); a request without one, or with a key that does not
  authenticate, goes to the app, which answers its 401;
* the body is parsed and validated as the route does (``json.loads``, then
  :class:`~synopsis.server.schemas.ChatCompletionRequest`); anything it refuses (not JSON,
  another content type, a schema error) goes to the app, which answers its own error;
* a request naming a session (``X-Synopsis-User`` / ``X-Synopsis-Session``) goes to the app;
* what is left runs :func:`synopsis.server.proxy.chat_turn`, the route's own code: the same
  rate limit, trigger, compaction, redaction, upstream call and streamed answer; a library
  error becomes the app's answer to it (:func:`synopsis.server.errors.synopsis_error`), and
  the metrics count it under the route's template, as the router would.

It sits inside :class:`~synopsis.server.limits.RequestLimits` (body and nesting limits) and
:class:`~synopsis.server.metrics.MetricsMiddleware`, so those hold for it as for every route.
"""

from __future__ import annotations

import json
from typing import Final

from pydantic import ValidationError
from starlette.requests import Request
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from synopsis.errors import SynopsisError
from synopsis.server.deps import Services
from synopsis.server.errors import synopsis_error
from synopsis.server.limits import replay
from synopsis.server.proxy import chat_turn
from synopsis.server.schemas import ChatCompletionRequest

__all__ = ["PATH", "LeanChat"]

#: The one path served here.
PATH: Final = "/v1/chat/completions"
_SESSION_HEADERS: Final = frozenset({b"x-synopsis-user", b"x-synopsis-session"})


def _bearer(scope: Scope) -> str | None:
    """The bearer token of a request this step may serve (JSON, no session), else None."""
    token = None
    json_body = False
    for name, value in scope["headers"]:
        if name == b"authorization" and token is None:
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            if scheme.lower() != "bearer" or not credentials:
                return None
            token = credentials
        elif name == b"content-type":
            json_body = value.split(b";", 1)[0].strip().lower() == b"application/json"
        elif name in _SESSION_HEADERS:
            return None
    return token if json_body else None


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


class LeanChat:
    """The middleware; see the module docstring. ``route`` is the app's own route of
    :data:`PATH` (for the metrics' template)."""

    def __init__(self, app: ASGIApp, *, route: BaseRoute) -> None:
        self.app = app
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        s: Services | None = getattr(scope["app"].state, "services", None)
        token = _bearer(scope)
        if s is None or token is None:
            await self.app(scope, receive, send)
            return
        key = await s.keys.authenticate_cached(token)
        if key is None:
            await self.app(scope, receive, send)
            return
        raw = await _body(receive)
        receive = replay(raw, receive)
        try:
            body = ChatCompletionRequest.model_validate(json.loads(raw))
        except (ValueError, ValidationError):  # the app answers it as the route does
            await self.app(scope, receive, send)
            return
        scope["route"] = self.route
        request = Request(scope, receive)
        try:
            s.keys.admit(key)
            response = await chat_turn(s, key.tenant, request, body)
        except SynopsisError as exc:
            response = await synopsis_error(request, exc)
        await response(scope, request.receive, send)
