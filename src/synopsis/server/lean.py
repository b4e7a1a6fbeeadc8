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
* the body is parsed once (``json.loads``) and checked with the schema's rules: a request of
  flat messages (every value a string, number, boolean or null: an agent's usual history) in
  one loop (:func:`flat_request`), any other through
  :class:`~synopsis.server.schemas.ChatCompletionRequest`; anything refused (not JSON,
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
from typing import Any, Final, get_args

from pydantic import ValidationError
from starlette.requests import Request
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from synopsis.errors import SynopsisError
from synopsis.server.deps import Services
from synopsis.server.errors import synopsis_error
from synopsis.server.limits import replay
from synopsis.server.proxy import chat_turn
from synopsis.server.schemas import (
    MAX_MESSAGE_CHARS,
    MAX_MESSAGES,
    ChatCompletionRequest,
    Role,
    check_message_values,
)

__all__ = ["PATH", "LeanChat", "flat_request"]

#: The one path served here.
PATH: Final = "/v1/chat/completions"
_SESSION_HEADERS: Final = frozenset({b"x-synopsis-user", b"x-synopsis-session"})
#: What :class:`~synopsis.server.schemas.Message` accepts (the schema's own rules, for
#: flat messages): its roles, the value types of a flat message, those of its fields that
#: take a string or null.
_ROLES: Final = frozenset(get_args(Role))
_FLAT_VALUES: Final = frozenset({str, int, float, bool, type(None)})
_TEXT_OR_NULL: Final = frozenset({str, type(None)})


def flat_request(payload: Any, raw: bytes) -> bool:
    """True when ``payload``, parsed from the body ``raw``, is a chat request the schema
    accepts as it is, with flat messages, known in one loop: a ``model`` string, ``stream`` a
    boolean or null (strict), 1 to 100,000 messages, each of a known role with values that
    are strings, numbers, booleans or null (``content``, ``name`` and ``tool_call_id`` a string
    or null, no ``tool_calls``). False leaves it to the schema, which decides and names what
    it refuses.

    The messages' value checks (:func:`~synopsis.server.schemas.check_message_values`) run
    only when the body alone does not settle them: a body of strict UTF-8 without a ``\\ud``
    escape holds no lone surrogate (JSON spells one only so, or as the UTF-8 bytes of one,
    which strict decoding refuses), and a message has no more characters than the body has
    bytes.
    """
    if type(payload) is not dict or type(payload.get("model")) is not str:
        return False
    stream, messages = payload.get("stream"), payload.get("messages")
    if stream is not None and type(stream) is not bool:
        return False
    if type(messages) is not list or not 0 < len(messages) <= MAX_MESSAGES:
        return False
    if not all(map(_flat_message, messages)):
        return False
    if len(raw) <= MAX_MESSAGE_CHARS and _no_surrogate_in(raw):
        return True
    try:  # perhaps one (an emoji escaped as a pair, too): the messages' own checks decide
        for message in messages:
            check_message_values(message)
    except ValueError:
        return False
    return True


def _no_surrogate_in(raw: bytes) -> bool:
    if b"\\ud" in raw or b"\\uD" in raw:
        return False
    if raw.isascii():
        return True
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _flat_message(message: Any) -> bool:
    if type(message) is not dict or not _FLAT_VALUES.issuperset(map(type, message.values())):
        return False
    role = message.get("role")
    return (
        type(role) is str
        and role in _ROLES
        and message.get("tool_calls") is None
        and type(message.get("content")) in _TEXT_OR_NULL
        and type(message.get("name")) in _TEXT_OR_NULL
        and type(message.get("tool_call_id")) in _TEXT_OR_NULL
    )


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
            payload = json.loads(raw)
            if not flat_request(payload, raw):
                checked = ChatCompletionRequest.model_validate(payload)
                payload = checked.model_dump(exclude_unset=True)
        except (ValueError, ValidationError):  # the app answers it as the route does
            await self.app(scope, receive, send)
            return
        scope["route"] = self.route
        request = Request(scope, receive)
        try:
            s.keys.admit(key)
            response = await chat_turn(s, key.tenant, request, (payload, raw))
        except SynopsisError as exc:
            response = await synopsis_error(request, exc)
        await response(scope, request.receive, send)
