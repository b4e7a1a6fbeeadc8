"""The OpenAI-compatible proxy: point an agent's ``base_url`` at synopsis, change nothing else.

``POST /v1/chat/completions``:

1. authenticate the synopsis key (``Authorization: Bearer``); it never goes upstream;
2. with ``X-Synopsis-User`` and ``X-Synopsis-Session``: record the messages the session has not
   seen yet (the agent resends its whole history each call; the part past what is stored is
   new), queue the background summary when due, and send instead the session's context: the
   system prompt with the latest summary, recalled memories of the user, the recent window;
3. compact what is left when it crosses the trigger (stateless: the upstream sees the
   compacted list); without a session, a summary of the same prefix made by an earlier call
   is reused (:mod:`synopsis.server.summary_cache`), so a growing conversation is summarized
   again only when it crosses the trigger again;
4. forward to the upstream with its own key (``--upstream-api-key``, or the caller's
   ``X-Upstream-Authorization``) and only message-schema fields, and return its answer
   unchanged: same status, same body, streamed (SSE) chunk by chunk as it arrives.

The upstream is the one serving the request's ``model`` (:mod:`synopsis.server.upstreams`);
its answer streams back as it arrives, the tenant's calls in flight are bounded (429 with
``Retry-After``) and a client that disconnects cancels the upstream call.

``GET /v1/models`` lists the configured upstreams' models (``--upstreams``), or passes the
single upstream's list through. An unreachable upstream is a 502, a timeout a 504.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import httpx
from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response

from synopsis.compaction.compactor import AsyncCompactor
from synopsis.errors import InvalidInput
from synopsis.messages import media_parts
from synopsis.redact import redact_history
from synopsis.server.deps import Services, Svc, Tenant
from synopsis.server.errors import ERRORS
from synopsis.server.schemas import ChatCompletionRequest, ErrorBody
from synopsis.server.summary_cache import compact_stateless
from synopsis.server.turns import PRIVATE_KEYS, public_messages, record_turn
from synopsis.server.upstreams import Answer, Outgoing, Route, forward

__all__ = ["chat_turn", "router", "send_upstream", "surely_below", "upstream_key"]

router = APIRouter(tags=["proxy"])

#: Request headers a client may send on to the upstream (nothing that authenticates to us).
_FORWARDED_REQUEST = ("accept", "openai-organization", "openai-project", "openai-beta")
#: Response headers passed back from the upstream (not hop-by-hop, not length or encoding).
_FORWARDED_RESPONSE = ("retry-after", "x-request-id", "openai-processing-ms", "openai-version")
_IdHeader = Annotated[str | None, Header(max_length=256, pattern=r"^[^\x00-\x1f\x7f/]+$")]
_PROXY_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    502: {"model": ErrorBody, "description": "The upstream is unreachable."},
    504: {"model": ErrorBody, "description": "The upstream timed out."},
    "4XX": {"description": "The upstream's own error, passed through with its status."},
    "5XX": {"description": "The upstream's own error, passed through with its status."},
}
#: One server-sent event of a streamed answer (its ``data`` is a JSON chunk, or ``[DONE]``).
_SSE_EVENT = {"type": "object", "properties": {"data": {"type": "string"}}}
_ANSWER: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The upstream's answer, unchanged (JSON, or SSE when streaming).",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "text/event-stream": {"schema": _SSE_EVENT},
        },
    }
}


def upstream_key(request: Request, route: Route) -> str | None:
    """The upstream's key: the caller's ``X-Upstream-Authorization``, else the configured one."""
    passed = request.headers.get("x-upstream-authorization")
    return passed.removeprefix("Bearer ").strip() if passed else route.api_key


def _request_headers(request: Request, route: Route) -> dict[str, str]:
    headers = {
        name: request.headers[name] for name in _FORWARDED_REQUEST if name in request.headers
    }
    key = upstream_key(request, route)
    if key:
        headers["authorization"] = f"Bearer {key}"
    return headers


def _response_headers(upstream: Answer) -> dict[str, str]:
    headers = {n: upstream.headers[n] for n in _FORWARDED_RESPONSE if n in upstream.headers}
    headers.update({n: v for n, v in upstream.headers.items() if n.startswith("x-ratelimit-")})
    return headers


async def send_upstream(
    s: Services,
    tenant: str,
    client: Request,
    request: httpx.Request | Outgoing,
    passed_headers: Callable[[Answer], dict[str, str]] = _response_headers,
) -> Response:
    """``request`` sent under the tenant's slot, its answer streamed back as it arrives."""
    release = s.slots.take(tenant)
    return await forward(
        s.transport,
        client,
        request,
        release=release,
        timeout=s.options.upstream_timeout,
        passed_headers=passed_headers,
    )


async def _with_session(
    s: Services, tenant: str, ids: tuple[str, str], messages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Record the turn and return the session's context for this call.

    With the redaction policy on, the context is built from the redacted turns (the server
    keeps no other): its window, the notes it recalls from older turns and the summary hold
    no value the redactor finds, below the trigger too. The caller's leading system
    messages stay as they are.
    """
    user, session = ids
    if s.redact is not None:
        clean, _ = redact_history(s.redact, messages)
        messages = [dict(m) for m in clean]
    start = next(
        (i for i, m in enumerate(messages) if m.get("role") not in ("system", "developer")),
        len(messages),
    )
    body = messages[start:]
    info = await s.histories.info(tenant, session)
    stored = info.message_count if info is not None else 0
    if len(body) > stored:
        await record_turn(s, tenant, (user, session), body[stored:], redacted=True)
    return await s.proxy_memory.build_context(tenant, user, session, messages)


def _session_ids(user: str | None, session: str | None) -> tuple[str, str] | None:
    if user is None and session is None:
        return None
    if not user or not session:
        raise InvalidInput("send both X-Synopsis-User and X-Synopsis-Session, or neither")
    return user, session


@router.post("/v1/chat/completions", responses={**_PROXY_ERRORS, **_ANSWER})
async def chat_completions(
    body: ChatCompletionRequest,
    request: Request,
    tenant: Tenant,
    s: Svc,
    x_synopsis_user: _IdHeader = None,
    x_synopsis_session: _IdHeader = None,
) -> Response:
    """OpenAI chat completions, compacted (and with session memory) on the way through."""
    payload = body.model_dump(exclude_unset=True)
    raw = await request.body()
    return await chat_turn(
        s, tenant, request, (payload, raw), (x_synopsis_user, x_synopsis_session)
    )


async def chat_turn(
    s: Services,
    tenant: str,
    request: Request,
    body: tuple[dict[str, Any], bytes],
    headers: tuple[str | None, str | None] = (None, None),
) -> Response:
    """One chat-completions call of ``tenant``: ``body`` is the request's JSON as
    :class:`ChatCompletionRequest` accepts it (checked by the caller) and its bytes (the
    route's work; the lean route of :mod:`synopsis.server.lean` runs the same)."""
    payload, raw = body
    route = s.upstreams.pick(payload.get("model"), "openai")
    messages: list[dict[str, Any]] = payload["messages"]
    ids = _session_ids(*headers)
    tools = payload.get("tools") if _is_tools(payload.get("tools")) else None
    private = any(PRIVATE_KEYS & m.keys() for m in messages)
    sent: list[dict[str, Any]] | None
    if ids is not None:
        messages = await _with_session(s, tenant, ids, messages)
        sent = await s.compactor.before_model(messages, tools=tools)
    elif not private and surely_below(s.compactor, len(raw), messages, tools):
        sent = None  # the trigger cannot fire: no token count needed (see surely_below)
    else:
        sent = await _compacted(s, tenant, messages, tools)
    if sent is None and not (private if ids is None else _private(messages)):
        # Below the trigger and nothing to strip: the body as it came (validated above; every
        # field the proxy reads is strictly typed, so what it checked is what goes on).
        content = raw
    else:
        payload["messages"] = public_messages(messages if sent is None else sent)
        content = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    upstream = Outgoing(
        "POST",
        route.url("/chat/completions"),
        {**_request_headers(request, route), "content-type": "application/json"},
        content,
        s.http.timeout.as_dict(),
    )
    return await send_upstream(s, tenant, request, upstream)


def _private(messages: list[dict[str, Any]]) -> bool:
    return any(PRIVATE_KEYS & m.keys() for m in messages)


#: Tokens a byte of a request body can cost at most (see :func:`surely_below`).
_TOKENS_PER_BYTE = 4
#: The framing the 15 bytes of the smallest message (``{"role":"user"}``) pay for.
_FRAME_TOKENS = _TOKENS_PER_BYTE * len(b'{"role":"user"}')


def surely_below(
    compactor: AsyncCompactor, size: int, messages: list[dict[str, Any]], tools: Any
) -> bool:
    """True when a request body of ``size`` bytes holding ``messages`` cannot fire the
    compactor's trigger, known without counting its tokens; False when it might.

    Why the bound holds, for messages without ``usage`` or ``meta`` (no provider baseline:
    the count is the sum of the messages' estimates, plus the tools') and without media parts
    (their flat cost does not depend on their size), under an estimator giving at most 4
    tokens per character (:meth:`TokenCounter.text_bound`, the server's default):

    * a message costs the estimate of its text (content and text parts, reasoning, tool-call
      names and arguments) plus a fixed framing of 3 tokens;
    * every character of that text is decoded from at least one byte of the body's JSON (a
      plain character 1 to 4 bytes, an escape 2 to 12), and different strings use different
      bytes, so the text costs at most 4 tokens per body byte it was read from;
    * each message's JSON object holds at least 15 more bytes (``{"role":"user"}``) that
      are not its text, which pays its 3 tokens of framing at 4 per byte.

    So the messages cost at most ``4 * size``; the tools are estimated exactly (they are few).
    """
    counter = compactor.counter
    trigger = compactor.options.trigger
    if counter.text_bound("x") != _TOKENS_PER_BYTE or counter.message_overhead > _FRAME_TOKENS:
        return False  # another estimator, or a larger framing: no bound known
    if trigger.messages and len(messages) > trigger.messages:
        return False
    limit = trigger.threshold_tokens()
    if limit is None:
        return True  # the trigger fires on the message count alone, checked above
    if _TOKENS_PER_BYTE * size > limit:
        return False
    if any(media_parts(m) for m in messages):
        return False
    tool_tokens = counter.estimate_tools(tools) if tools else 0
    return _TOKENS_PER_BYTE * size + tool_tokens <= limit


async def _compacted(
    s: Services, tenant: str, messages: list[dict[str, Any]], tools: Any
) -> list[dict[str, Any]] | None:
    """A stateless history compacted over the trigger (reusing a summary of its prefix);
    None below it."""
    return await compact_stateless(
        s.compactor,
        s.summary_cache,
        tenant,
        messages,
        tools=tools,
        options=s.options.summary_shape(),
        count=lambda outcome: s.metrics.summary_cache.labels(outcome).inc(),
    )


def _is_tools(tools: object) -> bool:
    return isinstance(tools, list) and all(isinstance(t, Mapping) for t in tools)


@router.get("/v1/models", responses={**_PROXY_ERRORS, **_ANSWER})
async def models(request: Request, tenant: Tenant, s: Svc) -> Response:
    """The configured upstreams' models (``--upstreams``), else the upstream's list, passed
    through."""
    if s.upstreams.configured:
        return JSONResponse(s.upstreams.listing())
    route = s.upstreams.pick(None, "openai")
    upstream = httpx.Request(
        "GET",
        route.url("/models"),
        headers=_request_headers(request, route),
        extensions={"timeout": s.http.timeout.as_dict()},
    )
    return await send_upstream(s, tenant, request, upstream)
