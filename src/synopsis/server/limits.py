"""What keeps one request from stalling the others: a body limit and a CPU worker pool.

:class:`RequestLimits` is a pure ASGI middleware around the whole app:

* **Body limit.** A request whose body passes ``max_body_bytes`` gets a 413 naming the limit,
  before any of it is parsed: a declared ``Content-Length`` over the limit is refused at once,
  a streamed body as soon as it passes it. The body is read here (FastAPI reads it whole
  anyway) and handed on; later ``receive`` calls (a client's disconnect) go through untouched.
* **Nesting limit.** JSON nested deeper than :data:`MAX_JSON_DEPTH` is refused with a 422
  after one linear scan of the bytes, before the parser recurses through it.
* **Worker pool.** Within a request, the library's async drivers advance their flows
  (planning, redaction, token counting) and the extractive model summarizes in worker
  threads bounded by one :class:`anyio.CapacityLimiter` (:func:`synopsis._flow.offloading`),
  so a 2 MB compaction never holds the event loop that answers ``/healthz`` and every other
  tenant. The summary workers get the same pool (:func:`worker_pool`).

:func:`quiet_access_log` keeps query strings (recall and search terms) out of uvicorn's
access log.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any, Final

import anyio
import anyio.to_thread
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from synopsis._flow import Offload, offloading

__all__ = [
    "MAX_JSON_DEPTH",
    "RequestLimits",
    "json_depth",
    "quiet_access_log",
    "replay",
    "worker_pool",
]

#: Deeper JSON than this is refused (a chat message's ``meta`` never needs more).
MAX_JSON_DEPTH: Final = 64
#: Bodies up to this size have their nesting scanned on the event loop (well under 1 ms).
_INLINE_SCAN_BYTES: Final = 64 << 10
#: A bracket, or a whole JSON string (escapes included), whose brackets do not count.
_BRACKET_OR_STRING: Final = re.compile(rb'[\[\]{}]|"(?:[^"\\]|\\.)*+"', re.DOTALL)


def worker_pool(threads: int) -> Offload:
    """Run callables in at most ``threads`` worker threads at once (the rest wait their turn)."""
    limiter = anyio.CapacityLimiter(threads)

    async def offload(run: Callable[[], Any]) -> Any:
        return await anyio.to_thread.run_sync(run, limiter=limiter)

    return offload


def json_depth(body: bytes, limit: int = MAX_JSON_DEPTH) -> int:
    """How deep ``body``'s JSON nests, counted up to ``limit + 1`` (one pass, no recursion);
    strings are skipped whole, so brackets inside them do not count."""
    depth = deepest = 0
    for match in _BRACKET_OR_STRING.finditer(body):
        byte = match.group()
        if byte in (b"[", b"{"):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        elif byte in (b"]", b"}"):
            depth -= 1
    return deepest


def _nests_too_deep(body: bytes) -> bool:
    """``body`` nests deeper than :data:`MAX_JSON_DEPTH`. Nesting needs as many opening
    brackets (counted in C, strings included), so a body with fewer is not scanned."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return False
    return json_depth(body) > MAX_JSON_DEPTH


async def _answer(send: Send, status: int, kind: str, message: str, **extra: Any) -> None:
    body = json.dumps({"error": {"type": kind, "message": message, **extra}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class RequestLimits:
    """The middleware; see the module docstring."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, offload: Offload) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.offload = offload

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with offloading(self.offload):
            if scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
                await self.app(scope, receive, send)
                return
            body = await self._read(scope, receive)
            if body is None:
                await self._too_large(send)
                return
            if body[:1] in (b"{", b"[") or body.lstrip()[:1] in (b"{", b"["):
                # A small body is scanned here (microseconds; a thread hop costs more).
                small = len(body) <= _INLINE_SCAN_BYTES
                deep = (
                    _nests_too_deep(body)
                    if small
                    else await self.offload(lambda: _nests_too_deep(body))
                )
                if deep:
                    message = f"the JSON body nests deeper than {MAX_JSON_DEPTH} levels"
                    await _answer(send, 422, "InvalidInput", message, field="body")
                    return
            await self.app(scope, replay(body, receive), send)

    async def _read(self, scope: Scope, receive: Receive) -> bytes | None:
        """The body, or None as soon as it is known to pass the limit."""
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def _too_large(self, send: Send) -> None:
        limit = self.max_body_bytes
        message = f"the request body is larger than the server's limit of {limit} bytes"
        await _answer(send, 413, "PayloadTooLarge", message, limit=limit)


def replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` that gives ``body`` once, then whatever the client sends next."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class _NoQueryStrings(logging.Filter):
    """Drops the query string from uvicorn's access lines: recall and search terms (an
    e-mail address, a name) travel there and must not land in the logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            path, mark, _ = args[2].partition("?")
            if mark:
                record.args = (*args[:2], f"{path}?<query omitted>", *args[3:])
        return True


_ACCESS_FILTER: Final = _NoQueryStrings()


def quiet_access_log() -> None:
    """Install the filter on uvicorn's access logger (once, however many apps are built)."""
    logger = logging.getLogger("uvicorn.access")
    if _ACCESS_FILTER not in logger.filters:
        logger.addFilter(_ACCESS_FILTER)
