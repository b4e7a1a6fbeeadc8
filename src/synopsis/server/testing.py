"""A fake OpenAI-compatible upstream and a way to run ASGI apps on a real port (tests, bench, docs).

:class:`FakeUpstream` answers ``POST /v1/chat/completions`` (JSON or SSE) and ``GET /v1/models``
and records every request it got, headers and body, so a test can check exactly what the
proxy forwarded. What it does is chosen by the request's ``model``:

* ``fail-429`` / ``fail-500``: an OpenAI-style error with that status (429 with ``Retry-After``);
* ``summarizer`` (or any model named ``summarizer-...``): a ``<summary>`` answer after
  ``summary_delay`` seconds, so the fake can stand in for the summarizer too
  (``--model openai-compatible:summarizer@URL``);
* anything else: ``"echo: <last user text>"``, streamed word by word when ``stream`` is set.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from synopsis.server.options import UVICORN_HTTP

__all__ = ["FakeUpstream", "RecordedCall", "running"]


@dataclass(frozen=True, slots=True)
class RecordedCall:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    #: The body's bytes as they arrived.
    raw: bytes = b""


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _error(status: int, kind: str) -> JSONResponse:
    body = {"error": {"message": f"fake {kind}", "type": kind, "param": None, "code": kind}}
    headers = {"retry-after": "1"} if status == 429 else None
    return JSONResponse(body, status_code=status, headers=headers)


class FakeUpstream:
    """An in-process OpenAI-compatible server; see the module docstring."""

    def __init__(self, *, summary_delay: float = 0.0) -> None:
        self.summary_delay = summary_delay
        self.calls: list[RecordedCall] = []
        self._lock = threading.Lock()
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    def _record(self, request: Request, body: Any, raw: bytes = b"") -> None:
        call = RecordedCall(request.method, request.url.path, dict(request.headers), body, raw)
        with self._lock:
            self.calls.append(call)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """The bodies of every chat-completions request, oldest first."""
        with self._lock:
            return [c.body for c in self.calls if c.path.endswith("/chat/completions")]

    @property
    def raw_bodies(self) -> list[bytes]:
        """The bytes of every chat-completions request, oldest first."""
        with self._lock:
            return [c.raw for c in self.calls if c.path.endswith("/chat/completions")]

    async def _models(self, request: Request) -> Response:
        self._record(request, None)
        data = [{"id": "fake-model", "object": "model", "created": 0, "owned_by": "synopsis"}]
        return JSONResponse({"object": "list", "data": data})

    async def _chat(self, request: Request) -> Response:
        raw = await request.body()
        body = json.loads(raw)
        self._record(request, body, raw)
        model = str(body.get("model", ""))
        if model == "fail-429":
            return _error(429, "rate_limit_exceeded")
        if model == "fail-500":
            return _error(500, "server_error")
        messages = body.get("messages") or []
        if model.startswith("summarizer"):
            await asyncio.sleep(self.summary_delay)
            text = f"<summary>\n1. Primary request: {_last_user_text(messages)[:200]}\n</summary>"
        else:
            text = f"echo: {_last_user_text(messages)}"
        if body.get("stream"):
            return StreamingResponse(_chunks(model, text), media_type="text/event-stream")
        return JSONResponse(_completion(model, text, len(messages)))


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _text(message.get("content"))
    return ""


def _completion(model: str, text: str, prompt_messages: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt_messages * 10,
            "completion_tokens": len(text) // 4,
            "total_tokens": prompt_messages * 10 + len(text) // 4,
        },
    }


async def _chunks(model: str, text: str) -> AsyncIterator[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(data)}\n\n".encode()

    yield chunk({"role": "assistant", "content": ""})
    for word in text.split(" "):
        yield chunk({"content": word + " "})
    yield chunk({}, "stop")
    yield b"data: [DONE]\n\n"


@contextmanager
def running(
    app: ASGIApp, *, host: str = "127.0.0.1", lifespan: Literal["auto", "on", "off"] = "auto"
) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free port in a thread; yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan=lifespan,
        access_log=False,
        **UVICORN_HTTP,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()
