"""Where the proxy sends a request, and how: the upstream of a model, per-tenant slots, and a
forwarding step that streams the answer back and cancels the upstream call when the client
goes away.

* :class:`Upstreams` picks the upstream of a request's ``model``: the configured one naming
  it exactly, else the one with the longest matching prefix (``gpt-4.1*``), else the single
  ``--upstream`` (OpenAI format) when there is one. A model no upstream serves is a
  :class:`~synopsis.errors.NotFound`; one served in another wire format than the route's is
  an :class:`~synopsis.errors.InvalidInput` naming the route that serves it.
* :class:`TenantSlots` bounds the upstream calls one tenant has in flight
  (``upstream_concurrency``): one more is :class:`~synopsis.errors.RateLimited` (429 with
  ``Retry-After``). A tenant whose upstream hangs so holds at most that many connections of the
  shared pool, and every other tenant's requests still go through.
* :func:`forward` sends the request and passes the answer on as it arrives, JSON or SSE alike
  (nothing is held whole in memory, however large). While it waits for the upstream's
  headers it watches the client: a client that disconnects cancels the upstream call, which
  closes its connection; a client that leaves mid-stream ends the stream the same way. The
  tenant's slot is held until the answer is sent (or abandoned).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from synopsis.config import UpstreamFormat, UpstreamSpec
from synopsis.errors import (
    InvalidInput,
    ModelTimeout,
    NotFound,
    ProviderUnavailable,
    RateLimited,
    UpstreamNotConfigured,
)
from synopsis.server.upstream_aiohttp import exchange, session_of

__all__ = ["Answer", "Outgoing", "Route", "TenantSlots", "Upstreams", "forward"]

#: The routes of each wire format, for an error naming where a model is served.
_ROUTES: Mapping[UpstreamFormat, str] = {
    "openai": "/v1/chat/completions or /v1/responses",
    "anthropic": "/v1/messages",
}


class Answer(Protocol):
    """What the forwarding step reads of an upstream's answer: an ``httpx.Response``, or
    :class:`~synopsis.server.upstream_aiohttp.AiohttpAnswer` (header names in lower case)."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    async def aread(self) -> bytes: ...
    def aiter_bytes(self) -> AsyncIterator[bytes]: ...
    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Route:
    """The upstream one request goes to."""

    name: str
    base_url: str
    format: UpstreamFormat
    api_key: str | None

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"


class Upstreams:
    """The proxy's upstreams, by model (see the module docstring)."""

    def __init__(
        self, specs: tuple[UpstreamSpec, ...], default: str | None, default_key: str | None
    ) -> None:
        self.specs = specs
        self._exact: dict[str, Route] = {}
        self._prefixes: list[tuple[str, Route]] = []
        for spec in specs:
            route = Route(spec.name, spec.base_url.rstrip("/"), spec.format, spec.api_key)
            for model in spec.models:
                if model.endswith("*"):
                    self._prefixes.append((model[:-1], route))
                else:
                    self._exact[model] = route
        self._prefixes.sort(key=lambda found: -len(found[0]))
        self.default = (
            Route("upstream", default.rstrip("/"), "openai", default_key) if default else None
        )

    @property
    def configured(self) -> bool:
        """Upstreams come from a file (``/v1/models`` lists them rather than asking one)."""
        return bool(self.specs)

    def pick(self, model: object, wire: UpstreamFormat) -> Route:
        """The upstream of ``model`` for a route of format ``wire``."""
        route = self._find(model)
        if route.format != wire:
            raise InvalidInput(
                f"model {model!r} is served by upstream {route.name!r} in the {route.format} "
                f"format: send it to {_ROUTES[route.format]}"
            )
        return route

    def any_of(self, wire: UpstreamFormat) -> Route:
        """An upstream of format ``wire`` (for a route without a model, as ``count_tokens``'s
        fallback); UpstreamNotConfigured when there is none."""
        for route in (*self._exact.values(), *(r for _, r in self._prefixes), self.default):
            if route is not None and route.format == wire:
                return route
        raise UpstreamNotConfigured(f"no {wire} upstream configured")

    def _find(self, model: object) -> Route:
        if isinstance(model, str):
            found = self._exact.get(model)
            if found is not None:
                return found
            for prefix, route in self._prefixes:
                if model.startswith(prefix):
                    return route
        if self.default is not None:
            return self.default
        if not self.specs:
            raise UpstreamNotConfigured(
                "no upstream configured: start the server with --upstream URL or --upstreams FILE"
            )
        raise NotFound(f"the model {model!r} does not exist: no upstream serves it")

    def listing(self) -> dict[str, Any]:
        """``/v1/models`` of the configured upstreams: each name (a prefix with its ``*``)."""
        data = [
            {"id": model, "object": "model", "created": 0, "owned_by": spec.name}
            for spec in self.specs
            for model in spec.models
        ]
        return {"object": "list", "data": data}


class TenantSlots:
    """At most ``limit`` upstream calls in flight per tenant (one event loop: no lock)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._busy: dict[str, int] = {}

    def in_flight(self, tenant: str) -> int:
        return self._busy.get(tenant, 0)

    def take(self, tenant: str) -> Callable[[], None]:
        """Hold a slot; the returned function gives it back (calling it again does nothing)."""
        busy = self._busy.get(tenant, 0)
        if busy >= self.limit:
            raise RateLimited(
                f"too many upstream calls in flight for this key ({self.limit}); retry later",
                retry_after=1.0,
            )
        self._busy[tenant] = busy + 1
        given_back = False

        def give_back() -> None:
            nonlocal given_back
            if given_back:
                return
            given_back = True
            left = self._busy.get(tenant, 1) - 1
            if left > 0:
                self._busy[tenant] = left
            else:
                self._busy.pop(tenant, None)

        return give_back


async def _disconnected(request: Request) -> None:
    """Returns when the client disconnects (the request body has been read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _refused(exc: httpx.TimeoutException) -> bool:
    """A connection error reported as a timeout: httpx-aiohttp maps every aiohttp connection
    error (a refused connection too) to ConnectTimeout; its cause tells them apart."""
    cause = exc.__cause__
    return isinstance(cause, OSError) and not isinstance(cause, TimeoutError)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A request for the upstream as the proxy builds it: aiohttp's session takes it as it
    is; any other transport gets the ``httpx.Request`` made from it (:meth:`httpx_request`)."""

    method: str
    url: str
    headers: Mapping[str, str]
    content: bytes
    #: httpx's timeouts by phase (``connect``, ``read``, ``write``, ``pool``).
    timeouts: Mapping[str, float | None]

    @classmethod
    def of(cls, request: httpx.Request) -> Outgoing:
        timeouts = request.extensions.get("timeout", {})
        return cls(request.method, str(request.url), request.headers, request.content, timeouts)

    def httpx_request(self) -> httpx.Request:
        return httpx.Request(
            self.method,
            self.url,
            headers=self.headers,
            content=self.content,
            extensions={"timeout": dict(self.timeouts)},
        )


async def _send(transport: httpx.AsyncBaseTransport, request: httpx.Request | Outgoing) -> Answer:
    """The upstream's response to ``request`` (headers read), from the transport itself: the
    client's per-request work (URL merging, cookie jar, auth and redirect hooks) is not the
    proxy's to do, and a cookie one tenant's upstream sets must never reach another's call.
    Through aiohttp's session directly when the transport is aiohttp's
    (:mod:`synopsis.server.upstream_aiohttp`)."""
    session = session_of(transport)
    try:
        if session is not None:
            out = request if isinstance(request, Outgoing) else Outgoing.of(request)
            return await exchange(
                session, out.method, out.url, out.headers, out.content, out.timeouts
            )
        sent = request if isinstance(request, httpx.Request) else request.httpx_request()
        response = await transport.handle_async_request(sent)
    except httpx.TimeoutException as exc:
        if _refused(exc):
            raise ProviderUnavailable("the upstream is unreachable (ConnectError)") from exc
        raise ModelTimeout("the upstream timed out") from exc
    except httpx.HTTPError as exc:
        raise ProviderUnavailable(f"the upstream is unreachable ({type(exc).__name__})") from exc
    response.request = sent
    return response


async def _watched(
    transport: httpx.AsyncBaseTransport, client: Request, request: httpx.Request | Outgoing
) -> Answer | None:
    """The upstream's response (headers read, body not), or None: the client left first, and
    the upstream call was cancelled (its connection closed)."""
    sending = asyncio.ensure_future(_send(transport, request))
    gone = asyncio.ensure_future(_disconnected(client))
    try:
        await asyncio.wait({sending, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not sending.done():
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)
        return None
    return sending.result()


async def _body(upstream: Answer, deadline: float) -> AsyncIterator[bytes]:
    """The upstream's (decoded) body as it arrives, within the upstream timeout overall."""
    chunks = upstream.aiter_bytes()
    while True:
        try:
            async with asyncio.timeout_at(deadline):  # no task per chunk, unlike wait_for
                chunk = await anext(chunks)
        except StopAsyncIteration:
            return
        except (TimeoutError, httpx.HTTPError):
            return  # the status is sent already: the answer ends short (the client sees it)
        yield chunk


class _Passed(StreamingResponse):
    """The upstream's answer, streamed; ``on_close`` runs however the sending ends (to its
    end, the client gone mid-stream, or an error), unlike a background task."""

    def __init__(
        self, upstream: Answer, on_close: Callable[[], Awaitable[None]], **kw: Any
    ) -> None:
        super().__init__(**kw)
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._on_close()


#: An answer declaring at most this many bytes is read whole and sent in one piece.
_WHOLE_BYTES = 64 << 10


async def _whole(upstream: Answer, deadline: float, release: Callable[[], None]) -> bytes:
    """A small answer's body, within the deadline (its connection closed and the slot given
    back either way). Nothing is sent yet, so an answer that ends short or late is a 502 or
    a 504 rather than a truncated body."""
    try:
        async with asyncio.timeout_at(deadline):  # no task, unlike wait_for
            return await upstream.aread()
    except TimeoutError as exc:
        raise ModelTimeout("the upstream timed out") from exc
    except httpx.HTTPError as exc:
        raise ProviderUnavailable(
            f"the upstream's answer broke off ({type(exc).__name__})"
        ) from exc
    finally:
        try:
            await upstream.aclose()
        finally:
            release()


async def forward(
    transport: httpx.AsyncBaseTransport,
    client: Request,
    request: httpx.Request | Outgoing,
    *,
    release: Callable[[], None],
    timeout: float,  # noqa: ASYNC109 - it bounds the streamed answer too, not only this await
    passed_headers: Callable[[Answer], dict[str, str]],
) -> Response:
    """Send ``request`` upstream and stream its answer back (see the module docstring).

    ``release`` is called once the answer is over, sent or abandoned; ``timeout`` bounds the
    whole call; ``passed_headers`` picks the upstream headers the client gets.
    """
    deadline = asyncio.get_running_loop().time() + timeout
    try:
        upstream = await _watched(transport, client, request)
    except BaseException:
        release()
        raise
    if upstream is None:  # the client left first
        release()
        return Response(status_code=499)  # nobody reads it

    async def close() -> None:
        try:
            await upstream.aclose()
        finally:
            release()

    headers = passed_headers(upstream)
    length = upstream.headers.get("content-length")
    small = length is not None and length.isdigit() and int(length) <= _WHOLE_BYTES
    if small and not upstream.headers.get("content-encoding"):
        # A small answer is read whole and sent in one piece (no streaming machinery).
        body = await _whole(upstream, deadline, release)
        media_type = upstream.headers.get("content-type")
        return Response(body, upstream.status_code, headers, media_type)
    if length is not None and not upstream.headers.get("content-encoding"):
        headers["content-length"] = length  # the bytes pass as they came: same length
    return _Passed(
        upstream,
        close,
        content=_body(upstream, deadline),  # decoded: its content-encoding is not passed on
        status_code=upstream.status_code,
        headers=headers,
        media_type=upstream.headers.get("content-type"),
    )
