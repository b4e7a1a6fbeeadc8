"""The proxy in the agents' own wire formats: OpenAI's Responses API and Anthropic's Messages API.

``POST /v1/responses`` (Codex, the OpenAI Agents SDK) and ``POST /v1/messages`` (Claude Code,
the ``anthropic`` SDK) work as ``/v1/chat/completions`` does, statelessly:

1. the tenant's key is ours (``Authorization: Bearer``, or ``x-api-key`` as Anthropic clients
   send it); it never goes upstream, which gets its own key (the configured one, or the
   caller's ``X-Upstream-Authorization``);
2. the history (``input`` items; ``messages``) is read as chat messages through
   :mod:`synopsis.convert`, each item or message on its own, so every chat message knows the
   native one it came from. Below the trigger the body goes upstream byte for byte;
3. above it the compactor summarizes the older part. What goes upstream is the summary (and
   whatever the compactor changed), converted back, followed by the *original* native items
   of the kept tail: a kept message keeps every field it had (``cache_control`` breakpoints,
   item ids, reasoning items with their encrypted content), in order. The cut never falls
   inside a native message, so a ``tool_use`` and its ``tool_result`` (a ``function_call``
   and its output) stay together, and the newest user message is sent as it came.
   ``system`` and ``instructions`` are sent as they are (they count toward the trigger);
4. the answer (JSON or SSE, in the upstream's own event format) streams back as it arrives.

``previous_response_id`` is passed on untouched, and a request carrying one is not compacted:
the history then lives upstream, where the proxy cannot see or shorten it, and ``input``
holds only the new items (whose tool outputs may answer calls the proxy never saw). Such a
conversation is kept short by the upstream (``truncation: "auto"``) or by sending the whole
history instead (``store: false``), which the proxy compacts.

``POST /v1/messages/count_tokens`` is passed through unchanged. Errors are each API's own shape:
``{"error": {"message", "type", "param", "code"}}`` for OpenAI, ``{"type": "error", "error":
{"type", "message"}}`` for Anthropic; the upstream's own errors pass through as they came.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from synopsis.config import UpstreamFormat
from synopsis.convert.anthropic import from_anthropic, to_anthropic
from synopsis.convert.openai_responses import (
    from_responses_items,
    group_items,
    to_responses_items,
)
from synopsis.errors import InvalidInput, RateLimited, SynopsisError, Unauthorized
from synopsis.server.deps import Services, services
from synopsis.server.errors import status_of
from synopsis.server.proxy import send_upstream, upstream_key
from synopsis.server.summary_cache import common_suffix, compact_stateless
from synopsis.server.turns import public_messages
from synopsis.server.upstreams import Answer

__all__ = ["router", "splice"]

_log = logging.getLogger("synopsis.server")
router = APIRouter(tags=["proxy"])

Message = dict[str, Any]
#: Request headers passed on to an OpenAI upstream / an Anthropic one (never a key of ours).
_OPENAI_REQUEST = ("accept", "openai-organization", "openai-project", "openai-beta")
_ANTHROPIC_REQUEST = ("accept", "anthropic-version", "anthropic-beta")
_ANTHROPIC_VERSION = "2023-06-01"
#: Upstream response headers passed back (besides the rate-limit families).
_PASSED_RESPONSE = (
    "retry-after",
    "x-request-id",
    "request-id",
    "openai-processing-ms",
    "openai-version",
    "x-should-retry",
)
_RATE_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
_ANSWER: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The upstream's answer, unchanged (JSON, or SSE when streaming).",
        "content": {"application/json": {}, "text/event-stream": {}},
    },
    "4XX": {"description": "Our error or the upstream's, in the API's own error shape."},
    "5XX": {"description": "Our error or the upstream's, in the API's own error shape."},
}


# --- splicing a compaction back into native items ----------------------------------------------


def splice(
    units: Sequence[Sequence[Any]],
    converted: Sequence[Sequence[Message]],
    lead: Sequence[Message],
    result: Sequence[Message],
    to_native: Callable[[list[Message]], list[Any]],
) -> list[Any]:
    """The native history to send for a compaction ``result``.

    ``units[i]`` are native items that convert to the chat messages ``converted[i]``;
    ``lead`` (the system prompt as messages) came before them. ``result`` is what the
    compactor made of ``lead + converted``; its longest suffix equal to the input was kept
    verbatim. Every unit wholly inside that suffix is sent as it came; what comes before
    (the summary, anything the compactor changed, the kept part of a unit cut through) is
    ``to_native`` of those messages, ``lead`` left out (it is sent as it is). When the
    newest user message went into the summary, it follows the summary as its own message
    too (as it came, when its unit is that message alone): the model always reads the
    request it is answering, however long the tool loop after it.
    """
    flat = [*lead, *chain.from_iterable(converted)]
    first = len(flat) - common_suffix(result, flat)
    starts: list[int] = []
    at = len(lead)
    for messages in converted:
        starts.append(at)
        at += len(messages)
    whole = next((i for i, start in enumerate(starts) if start >= first), len(units))
    cut = starts[whole] if whole < len(units) else len(flat)
    head = list(result[: len(result) - (len(flat) - cut)])
    if head[: len(lead)] == list(lead):
        head = head[len(lead) :]
    tail = list(chain.from_iterable(units[whole:]))
    newest = _newest_user(converted)
    if newest is None or newest >= whole or not head:
        return [*to_native(head), *tail]
    user = [m for m in converted[newest] if m.get("role") == "user"][-1]
    if user in head:  # kept on its own (changed by the compactor)
        return [*to_native(head), *tail]
    alone = list(units[newest]) if list(converted[newest]) == [user] else to_native([user])
    return [*to_native(head[:1]), *alone, *to_native(head[1:]), *tail]


def _newest_user(converted: Sequence[Sequence[Message]]) -> int | None:
    for index in range(len(converted) - 1, -1, -1):
        if any(m.get("role") == "user" for m in converted[index]):
            return index
    return None


async def _compacted(
    s: Services,
    tenant: str,
    lead: list[Message],
    units: Sequence[Sequence[Any]],
    converted: list[list[Message]],
    tools: object,
    to_native: Callable[[list[Message]], list[Any]],
) -> list[Any] | None:
    """The native history compacted, or None below the trigger (send the body as it came)."""
    result = await compact_stateless(
        s.compactor,
        s.summary_cache,
        tenant,
        [*lead, *chain.from_iterable(converted)],
        tools=tools if _is_tools(tools) else None,  # type: ignore[arg-type]
        options=s.options.summary_shape(),
        count=lambda outcome: s.metrics.summary_cache.labels(outcome).inc(),
    )
    if result is None:
        return None
    return splice(units, converted, lead, result, to_native)


def _is_tools(tools: object) -> bool:
    return isinstance(tools, list) and all(isinstance(t, Mapping) for t in tools)


def _as_user(messages: list[Message]) -> list[Message]:
    """System messages the compactor made (beyond the request's own system) as user ones."""
    return [
        {**m, "role": "user"} if m.get("role") in ("system", "developer") else m for m in messages
    ]


def _responses_native(head: list[Message]) -> list[Any]:
    return to_responses_items(public_messages(head))


def _anthropic_native(head: list[Message]) -> list[Any]:
    return to_anthropic(_as_user(public_messages(head)), keep_meta=False)[1]


async def _responses_input(s: Services, tenant: str, body: dict[str, Any]) -> list[Any] | None:
    items = body.get("input")
    if body.get("previous_response_id") is not None or not isinstance(items, list) or not items:
        return None  # the history lives upstream (or is one string): nothing to compact
    instructions = body.get("instructions")
    lead = [{"role": "system", "content": instructions}] if isinstance(instructions, str) else []
    units = group_items(items)
    converted = [from_responses_items(unit) for unit in units]
    return await _compacted(s, tenant, lead, units, converted, body.get("tools"), _responses_native)


async def _anthropic_messages(s: Services, tenant: str, body: dict[str, Any]) -> list[Any] | None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        return None  # not a history we can read: the upstream answers it
    system = body.get("system")
    if not (system is None or isinstance(system, str) or _is_tools(system)):
        raise InvalidInput("system must be a string or a list of text blocks")
    lead = from_anthropic(system, [])
    units = [[m] for m in messages]
    converted = [from_anthropic(None, unit) for unit in units]
    return await _compacted(s, tenant, lead, units, converted, body.get("tools"), _anthropic_native)


# --- errors in each API's shape ----------------------------------------------------------------

_OPENAI_TYPES = {401: "authentication_error", 429: "rate_limit_error"}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
}


def _openai_error(status: int, code: str, message: str) -> dict[str, Any]:
    kind = _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _anthropic_error(status: int, code: str, message: str) -> dict[str, Any]:
    kind = _ANTHROPIC_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


_SHAPES: Mapping[UpstreamFormat, Callable[[int, str, str], dict[str, Any]]] = {
    "openai": _openai_error,
    "anthropic": _anthropic_error,
}


def _error(wire: UpstreamFormat, exc: BaseException) -> JSONResponse:
    if not isinstance(exc, SynopsisError):
        return JSONResponse(_SHAPES[wire](500, "InternalError", "internal server error"), 500)
    status = status_of(exc)
    status = 400 if status == 422 else status  # both APIs answer a bad request with 400
    headers: dict[str, str] = {}
    if isinstance(exc, RateLimited) and exc.retry_after is not None:
        headers["Retry-After"] = str(max(int(exc.retry_after), 1))
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    body = _SHAPES[wire](status, type(exc).__name__, str(exc) or type(exc).__name__)
    return JSONResponse(body, status_code=status, headers=headers or None)


# --- the routes ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Call:
    s: Services
    tenant: str
    raw: bytes
    body: dict[str, Any]


async def _call(request: Request) -> _Call:
    s = services(request)
    secret = request.headers.get("x-api-key")
    if not secret:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        secret = value.strip() if scheme.lower() == "bearer" else ""
    if not secret:
        raise Unauthorized("missing API key: send Authorization: Bearer <key> or x-api-key")
    key = await s.keys.authenticate(secret)
    if key is None:
        raise Unauthorized("invalid or revoked API key")
    raw = await request.body()
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidInput(f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidInput("the body must be a JSON object")
    return _Call(s, key.tenant, raw, body)


@dataclass(frozen=True, slots=True)
class _Endpoint:
    """One native endpoint: its wire, its upstream path, and the body field holding the
    history with what compacts it (none: the body is passed on unchanged)."""

    wire: UpstreamFormat
    path: str
    field: str = ""
    compact: Callable[[Services, str, dict[str, Any]], Awaitable[list[Any] | None]] | None = None


async def _forward(request: Request, endpoint: _Endpoint) -> Response:
    """Authenticate, compact, pass the body on; our errors come back in the API's shape."""
    try:
        return await _pass_on(request, endpoint, await _call(request))
    except SynopsisError as exc:
        if status_of(exc) >= 500:
            _log.warning("%s %s failed: %r", request.method, request.url.path, exc)
        return _error(endpoint.wire, exc)
    except Exception as exc:
        _log.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
        return _error(endpoint.wire, exc)


async def _pass_on(request: Request, endpoint: _Endpoint, call: _Call) -> Response:
    route = call.s.upstreams.pick(call.body.get("model"), endpoint.wire)
    history = None
    if endpoint.compact is not None:
        history = await endpoint.compact(call.s, call.tenant, call.body)
    url = route.url(endpoint.path)
    upstream = call.s.http.build_request(
        "POST",
        _with_query(request, url) if endpoint.wire == "anthropic" else url,
        content=_content(call, endpoint.field, history),
        headers=_HEADERS[endpoint.wire](request, upstream_key(request, route)),
    )
    return await send_upstream(call.s, call.tenant, request, upstream, _passed)


def _passed(upstream: Answer) -> dict[str, str]:
    headers = {n: upstream.headers[n] for n in _PASSED_RESPONSE if n in upstream.headers}
    headers.update({n: v for n, v in upstream.headers.items() if n.startswith(_RATE_PREFIXES)})
    return headers


def _content(call: _Call, field: str, history: list[Any] | None) -> bytes:
    if history is None:
        return call.raw
    return json.dumps({**call.body, field: history}, ensure_ascii=False).encode()


def _with_query(request: Request, url: str) -> str:
    """``url`` with the request's query string (Claude Code sends ``?beta=true``)."""
    query = request.url.query
    return f"{url}?{query}" if query else url


def _openai_headers(request: Request, key: str | None) -> dict[str, str]:
    headers = {n: request.headers[n] for n in _OPENAI_REQUEST if n in request.headers}
    if key:
        headers["authorization"] = f"Bearer {key}"
    headers["content-type"] = "application/json"
    return headers


def _anthropic_headers(request: Request, key: str | None) -> dict[str, str]:
    headers = {n: request.headers[n] for n in _ANTHROPIC_REQUEST if n in request.headers}
    headers.setdefault("anthropic-version", _ANTHROPIC_VERSION)
    if key:
        headers["x-api-key"] = key
    headers["content-type"] = "application/json"
    return headers


_HEADERS: Mapping[UpstreamFormat, Callable[[Request, str | None], dict[str, str]]] = {
    "openai": _openai_headers,
    "anthropic": _anthropic_headers,
}
_RESPONSES = _Endpoint("openai", "/responses", "input", _responses_input)
_MESSAGES = _Endpoint("anthropic", "/messages", "messages", _anthropic_messages)
_COUNT_TOKENS = _Endpoint("anthropic", "/messages/count_tokens")


@router.post("/v1/responses", responses=_ANSWER)
async def responses(request: Request) -> Response:
    """OpenAI Responses API, compacted on the way through (see the module docstring)."""
    return await _forward(request, _RESPONSES)


@router.post("/v1/messages", responses=_ANSWER)
async def messages(request: Request) -> Response:
    """Anthropic Messages API, compacted on the way through (see the module docstring)."""
    return await _forward(request, _MESSAGES)


@router.post("/v1/messages/count_tokens", responses=_ANSWER)
async def count_tokens(request: Request) -> Response:
    """Anthropic's token count of a request, passed through unchanged."""
    return await _forward(request, _COUNT_TOKENS)
