"""The upstream's answer relayed as it came, through aiohttp's session directly (the shipped
transport): its bytes, its status, the headers the proxy passes on (whatever their case)."""

from __future__ import annotations

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from synopsis.server.app import upstream_transport
from synopsis.server.testing import running
from synopsis.server.upstream_aiohttp import session_of

from .conftest import StartServer

#: An answer no JSON serializer would write this way (spacing, key order, escapes).
ANSWER = b'{ "id":"x",  "choices" : [{"message":{"role":"assistant","content":"\\u00e9t\\u00e9"}}]}'


async def _odd(request: Request) -> Response:
    await request.body()
    headers = {
        "X-RateLimit-Remaining-Requests": "41",
        "x-request-id": "req-7",
        "Retry-After": "3",
        "X-Private": "not passed",
    }
    return Response(ANSWER, status_code=429, headers=headers, media_type="application/json")


def test_the_answer_is_relayed_byte_for_byte_with_its_passed_headers(
    start_server: StartServer,
) -> None:
    upstream = Starlette(routes=[Route("/v1/chat/completions", _odd, methods=["POST"])])
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with (
        running(upstream) as url,
        start_server(upstream=f"{url}/v1") as live,
        live.client(live.key("acme")) as client,
    ):
        answer = client.post("/v1/chat/completions", json=body)
    assert (answer.status_code, answer.content) == (429, ANSWER)
    assert answer.headers["x-ratelimit-remaining-requests"] == "41"
    assert answer.headers["x-request-id"] == "req-7"
    assert answer.headers["retry-after"] == "3"
    assert "x-private" not in answer.headers


async def test_the_shipped_transport_is_used_through_its_aiohttp_session() -> None:
    transport = upstream_transport()
    session = session_of(transport)
    assert session is not None and session_of(transport) is session  # made once, then kept
    await transport.aclose()
    assert session.closed
    assert session_of(httpx.AsyncHTTPTransport()) is None


def test_a_cookie_one_tenants_upstream_sets_never_reaches_another_tenants_call(
    start_server: StartServer,
) -> None:
    """aiohttp's default session keeps every cookie an answer sets and sends it on the next
    call to that host; the shipped transport's session keeps none. (The upstream is named
    ``localhost``: aiohttp's jar keeps no cookie of a bare IP address.)"""
    cookies_seen: list[str | None] = []

    async def setting_a_cookie(request: Request) -> Response:
        await request.body()
        cookies_seen.append(request.headers.get("cookie"))
        answer = b'{"id":"x","choices":[{"message":{"role":"assistant","content":"ok"}}]}'
        response = Response(answer, media_type="application/json")
        response.set_cookie("session", f"secret-of-call-{len(cookies_seen)}")
        return response

    upstream = Starlette(routes=[Route("/v1/chat/completions", setting_a_cookie, methods=["POST"])])
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with running(upstream) as url, start_server(upstream=f"{by_name(url)}/v1") as live:
        for tenant in ("acme", "globex", "acme"):
            with live.client(live.key(tenant)) as client:
                assert client.post("/v1/chat/completions", json=body).status_code == 200
    assert cookies_seen == [None, None, None]


def by_name(url: str) -> str:
    named = url.replace("127.0.0.1", "localhost")
    assert named != url, url
    return named
