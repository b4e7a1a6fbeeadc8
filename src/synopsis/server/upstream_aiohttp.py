"""The upstream call straight through aiohttp, when the proxy's transport is aiohttp's.

``httpx-aiohttp`` puts aiohttp under httpx's API: each call builds an httpx response around
aiohttp's, and reads its body through httpx's chunking and decoding layers. The proxy needs
none of it for an answer it passes on as it came, so :func:`exchange` asks the transport's
own ``aiohttp.ClientSession`` and wraps its answer in :class:`AiohttpAnswer`, which offers
the few members of ``httpx.Response`` the forwarding step reads (status, headers, whole body,
chunks, close), with aiohttp's errors translated to httpx's, so the step treats both alike.
Every other transport (httpx's own pool, a test's ASGI app) is used as it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

__all__ = ["AiohttpAnswer", "cookieless_transport", "exchange", "session_of"]

#: Bytes read at a time from a streamed answer (httpx-aiohttp's own chunk size).
_CHUNK = 16 << 10


def cookieless_transport(limits: httpx.Limits) -> AiohttpTransport:
    """httpx-aiohttp's transport over a session that keeps no cookies.

    The transport's own session has aiohttp's default cookie jar, shared by every call: a
    cookie one tenant's upstream sets would ride along on the next tenant's call to the same
    host. The proxy relays each call on its own, so its session keeps none. The connector is
    the one the transport would make (its limits and TLS context)."""
    made = AiohttpTransport(limits=limits)

    def session() -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=limits.max_connections or 0,  # aiohttp's 0 and httpx's None: no ceiling
            keepalive_timeout=limits.keepalive_expiry,
            ssl=made.ssl_context,
        )
        return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())

    made.client = session
    return made


def session_of(transport: httpx.AsyncBaseTransport) -> aiohttp.ClientSession | None:
    """The aiohttp session under ``transport`` (made on first use, then kept by the
    transport, which closes it), or None for any other transport."""
    if not isinstance(transport, AiohttpTransport):
        return None
    if not isinstance(transport.client, aiohttp.ClientSession):
        transport.client = transport.get_client()
    return transport.client


def _lowered(raw: tuple[tuple[bytes, bytes], ...]) -> dict[str, str]:
    """Header names in lower case, a repeated one's values joined (as httpx reads them)."""
    headers: dict[str, str] = {}
    for name, value in raw:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers


class AiohttpAnswer:
    """An aiohttp answer as the forwarding step reads an ``httpx.Response``."""

    __slots__ = ("_response", "headers", "status_code")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status_code: int = response.status
        self.headers = _lowered(response.raw_headers)

    async def aread(self) -> bytes:
        try:
            return await self._response.read()
        except aiohttp.ClientError as exc:
            raise httpx.ReadError(str(exc)) from exc

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_chunked(_CHUNK):
                yield chunk
        except aiohttp.ClientError as exc:
            raise httpx.ReadError(str(exc)) from exc

    async def aclose(self) -> None:
        self._response.release()


async def exchange(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    headers: Mapping[str, str],
    content: bytes,
    timeouts: Mapping[str, float | None],
) -> AiohttpAnswer:
    """A request sent through ``session`` (``timeouts``: httpx's, by phase); its answer with
    the headers read. Errors as httpx raises them (a refused connection a ``ConnectError``,
    a timeout a timeout)."""
    try:
        response = await session.request(
            method,
            url,
            headers=headers,
            data=content or None,
            allow_redirects=False,
            compress=False,
            timeout=aiohttp.ClientTimeout(
                sock_connect=timeouts.get("connect"),
                sock_read=timeouts.get("read"),
                connect=timeouts.get("pool"),
            ),
        )
    except TimeoutError as exc:  # aiohttp's own timeouts are TimeoutErrors too
        raise httpx.ReadTimeout(str(exc) or "timed out") from exc
    except aiohttp.ClientConnectorError as exc:
        raise httpx.ConnectError(str(exc)) from exc
    except aiohttp.ClientError as exc:
        raise httpx.RemoteProtocolError(str(exc)) from exc
    return AiohttpAnswer(response)
