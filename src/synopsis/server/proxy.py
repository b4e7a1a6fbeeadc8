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

``GET /v1/models`` is passed through. An unreachable upstream is a 502, a timeout a 504.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

import httpx
from fastapi import APIRouter, Header, Request
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask

from synopsis.errors import (
    InvalidInput,
    ModelTimeout,
    ProviderUnavailable,
    UpstreamNotConfigured,
)
from synopsis.redact import redact_history
from synopsis.server.deps import Services, Svc, Tenant
from synopsis.server.errors import ERRORS
from synopsis.server.schemas import ChatCompletionRequest, ErrorBody
from synopsis.server.summary_cache import compact_stateless
from synopsis.server.turns import PRIVATE_KEYS, public_messages, record_turn

__all__ = ["router"]

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


def _upstream(s: Services, path: str) -> str:
    base = s.options.upstream_url
    if base is None:
        raise UpstreamNotConfigured("no upstream configured: start the server with --upstream URL")
    return f"{base}{path}"


def _request_headers(request: Request, s: Services) -> dict[str, str]:
    headers = {
        name: request.headers[name] for name in _FORWARDED_REQUEST if name in request.headers
    }
    passed = request.headers.get("x-upstream-authorization")
    key = passed.removeprefix("Bearer ").strip() if passed else s.options.upstream_api_key
    if key:
        headers["authorization"] = f"Bearer {key}"
    return headers


def _response_headers(upstream: httpx.Response) -> dict[str, str]:
    headers = {n: upstream.headers[n] for n in _FORWARDED_RESPONSE if n in upstream.headers}
    headers.update({n: v for n, v in upstream.headers.items() if n.startswith("x-ratelimit-")})
    return headers


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


async def _send(s: Services, request: httpx.Request, stream: bool) -> httpx.Response:
    try:
        return await s.http.send(request, stream=stream)
    except httpx.TimeoutException as exc:
        if _refused(exc):
            raise ProviderUnavailable("the upstream is unreachable (ConnectError)") from exc
        raise ModelTimeout("the upstream timed out") from exc
    except httpx.HTTPError as exc:
        raise ProviderUnavailable(f"the upstream is unreachable ({type(exc).__name__})") from exc


def _refused(exc: httpx.TimeoutException) -> bool:
    """A connection error reported as a timeout: httpx-aiohttp maps every aiohttp connection
    error (a refused connection too) to ConnectTimeout; its cause tells them apart."""
    cause = exc.__cause__
    return isinstance(cause, OSError) and not isinstance(cause, TimeoutError)


async def _passed_through(s: Services, request: httpx.Request) -> Response:
    upstream = await _send(s, request, stream=False)
    return Response(
        upstream.content,
        status_code=upstream.status_code,
        headers=_response_headers(upstream),
        media_type=upstream.headers.get("content-type"),
    )


async def _streamed(s: Services, request: httpx.Request) -> Response:
    upstream = await _send(s, request, stream=True)
    if upstream.status_code >= 400:  # an error is one JSON body: read it and pass it on
        content = await upstream.aread()
        await upstream.aclose()
        return Response(
            content,
            status_code=upstream.status_code,
            headers=_response_headers(upstream),
            media_type=upstream.headers.get("content-type"),
        )
    return StreamingResponse(
        upstream.aiter_bytes(),  # decoded: the upstream's content-encoding is not passed on
        status_code=upstream.status_code,
        headers=_response_headers(upstream),
        media_type=upstream.headers.get("content-type", "text/event-stream"),
        background=BackgroundTask(upstream.aclose),
    )


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
    url = _upstream(s, "/chat/completions")
    payload = body.model_dump(exclude_unset=True)
    messages: list[dict[str, Any]] = payload["messages"]
    ids = _session_ids(x_synopsis_user, x_synopsis_session)
    tools = payload.get("tools") if _is_tools(payload.get("tools")) else None
    sent: list[dict[str, Any]] | None
    if ids is not None:
        messages = await _with_session(s, tenant, ids, messages)
        sent = await s.compactor.before_model(messages, tools=tools)
    else:
        sent = await _compacted(s, tenant, messages, tools)
    if sent is None and not any(PRIVATE_KEYS & m.keys() for m in messages):
        # Below the trigger and nothing to strip: the body as it came (validated above; every
        # field the proxy reads is strictly typed, so what it checked is what goes on).
        content = await request.body()
    else:
        payload["messages"] = public_messages(messages if sent is None else sent)
        content = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    headers = {**_request_headers(request, s), "content-type": "application/json"}
    upstream = s.http.build_request("POST", url, content=content, headers=headers)
    if payload.get("stream"):
        return await _streamed(s, upstream)
    return await _passed_through(s, upstream)


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
    """The upstream's model list, passed through."""
    url = _upstream(s, "/models")
    return await _passed_through(
        s, s.http.build_request("GET", url, headers=_request_headers(request, s))
    )
