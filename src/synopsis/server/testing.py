"""A fake upstream of each wire format and a way to run ASGI apps on a real port (tests, bench,
docs).

:class:`FakeUpstream` answers ``POST /v1/chat/completions``, ``POST /v1/responses`` (OpenAI),
``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` (Anthropic), JSON or SSE in each
API's own event format, and ``GET /v1/models``; it records every request it got, headers and
body, so a test can check exactly what the proxy forwarded. What it does is chosen by the
request's ``model``:

* ``fail-429`` / ``fail-500``: an error in the API's own shape with that status (429 with
  ``Retry-After``);
* ``hang``: no answer until ``hang_seconds`` passed (a hung upstream);
* ``summarizer`` (or any model named ``summarizer-...``): a ``<summary>`` answer after
  ``summary_delay`` seconds, so the fake can stand in for the summarizer too
  (``--model openai-compatible:summarizer@URL``);
* anything else: ``"echo: <last user text>"``, streamed word by word when ``stream`` is set.
  On the Responses and Messages routes, a request with tools whose last item is the user's
  gets a call of its first tool instead (arguments ``{"q": <that text>}``), and one ending
  in a tool's output gets ``"done: <output>"``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
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

    def __init__(self, *, summary_delay: float = 0.0, hang_seconds: float = 3600.0) -> None:
        self.summary_delay = summary_delay
        self.hang_seconds = hang_seconds
        self.calls: list[RecordedCall] = []
        #: Requests that are hanging now (model ``hang``), and those that were abandoned:
        #: their client (the proxy) closed the connection before the answer.
        self.hanging = 0
        self.abandoned = 0
        self._ids = itertools.count(1)  # each answer's ids unique, as a real upstream's are
        self._lock = threading.Lock()
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._scripted(self._chat, _error), methods=["POST"]),
                Route("/v1/responses", self._scripted(self._responses, _error), methods=["POST"]),
                Route(
                    "/v1/messages",
                    self._scripted(self._messages, _anthropic_error),
                    methods=["POST"],
                ),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/fake/stats", self._stats, methods=["GET"]),
            ]
        )

    async def _stats(self, request: Request) -> Response:
        """The hanging and abandoned counts, for a fake run in another process (bench)."""
        with self._lock:
            return JSONResponse({"hanging": self.hanging, "abandoned": self.abandoned})

    def bodies(self, path: str) -> list[Any]:
        """The bodies of every request to ``path`` (e.g. ``/v1/messages``), oldest first."""
        with self._lock:
            return [c.body for c in self.calls if c.path == path]

    async def _hang(self, request: Request) -> None:
        with self._lock:
            self.hanging += 1
        try:
            deadline = time.monotonic() + self.hang_seconds
            while time.monotonic() < deadline:
                if await request.is_disconnected():
                    with self._lock:
                        self.abandoned += 1
                    return
                await asyncio.sleep(0.05)
        finally:
            with self._lock:
                self.hanging -= 1

    async def _read(self, request: Request) -> dict[str, Any]:
        raw = await request.body()
        body = json.loads(raw)
        self._record(request, body, raw)
        return dict(body)

    def _scripted(
        self, answer: Callable[[dict[str, Any], str], Awaitable[Response]], error: Any
    ) -> Callable[[Request], Awaitable[Response]]:
        """A route answering ``answer(body, model)``, unless the model names a failure."""

        async def route(request: Request) -> Response:
            body = await self._read(request)
            model = str(body.get("model", ""))
            if model in ("fail-429", "fail-500", "hang"):
                return await self._fail(request, model, error)
            return await answer(body, model)

        return route

    async def _responses(self, body: dict[str, Any], model: str) -> Response:
        items = body.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
        output = _responses_output(items, body.get("tools") or [], next(self._ids))
        answer = _response(model, output, len(items), "completed")
        if body.get("stream"):
            events = _response_events(answer)
            return StreamingResponse(events, media_type="text/event-stream")
        return JSONResponse(answer)

    async def _messages(self, body: dict[str, Any], model: str) -> Response:
        messages = body.get("messages") or []
        content, stop = _anthropic_content(messages, body.get("tools") or [], next(self._ids))
        answer = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10 * len(messages), "output_tokens": 5},
        }
        if body.get("stream"):
            return StreamingResponse(_anthropic_events(answer), media_type="text/event-stream")
        return JSONResponse(answer)

    async def _count_tokens(self, request: Request) -> Response:
        body = await self._read(request)
        return JSONResponse({"input_tokens": len(json.dumps(body.get("messages"))) // 4})

    async def _fail(self, request: Request, model: str, error: Any) -> Response:
        if model == "hang":
            await self._hang(request)
            return Response(status_code=504)
        if model == "fail-429":
            return error(429, "rate_limit_exceeded")  # type: ignore[no-any-return]
        return error(500, "server_error")  # type: ignore[no-any-return]

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

    async def _chat(self, body: dict[str, Any], model: str) -> Response:
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


def _item_text(item: Any) -> str:
    if not isinstance(item, dict):
        return ""
    if item.get("type") == "function_call_output":
        return str(item.get("output", ""))
    content = item.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _last_user_item(items: list[Any]) -> str:
    for item in reversed(items):
        if isinstance(item, dict) and item.get("role") == "user":
            return _item_text(item)
    return ""


def _responses_output(items: list[Any], tools: list[Any], number: int) -> list[dict[str, Any]]:
    last = items[-1] if items else {}
    names = [t.get("name") for t in tools if isinstance(t, dict) and t.get("type") == "function"]
    if isinstance(last, dict) and last.get("type") == "function_call_output":
        text = f"done: {_item_text(last)}"
    elif names and isinstance(last, dict) and last.get("role") == "user":
        arguments = json.dumps({"q": _item_text(last)})
        return [
            {
                "type": "function_call",
                "id": f"fc_{number}",
                "call_id": f"call_{number}",
                "name": names[0],
                "arguments": arguments,
                "status": "completed",
            }
        ]
    else:
        text = f"echo: {_last_user_item(items)}"
    part = {"type": "output_text", "text": text, "annotations": []}
    message = {
        "type": "message",
        "id": f"msg_{number}",
        "status": "completed",
        "role": "assistant",
        "content": [part],
    }
    return [message]


def _response(model: str, output: list[Any], items: int, status: str) -> dict[str, Any]:
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "temperature": 1.0,
        "top_p": 1.0,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "usage": {
            "input_tokens": 10 * items,
            "output_tokens": 5,
            "total_tokens": 10 * items + 5,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


async def _response_events(answer: dict[str, Any]) -> AsyncIterator[bytes]:
    """The Responses API's events for ``answer``: created, each item (text word by word),
    completed."""
    number = iter(range(1 << 30))

    def event(kind: str, **fields: Any) -> bytes:
        return _sse(kind, {"type": kind, "sequence_number": next(number), **fields})

    yield event("response.created", response={**answer, "status": "in_progress", "output": []})
    for index, item in enumerate(answer["output"]):
        if item["type"] != "message":
            yield event("response.output_item.added", output_index=index, item=item)
            yield event("response.output_item.done", output_index=index, item=item)
            continue
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        text = item["content"][0]["text"]
        yield event(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "content": []},
        )
        empty = {"type": "output_text", "text": "", "annotations": []}
        yield event("response.content_part.added", **where, part=empty)
        for i, word in enumerate(text.split(" ")):
            delta = word if i == 0 else f" {word}"
            yield event("response.output_text.delta", **where, delta=delta, logprobs=[])
        yield event("response.output_text.done", **where, text=text, logprobs=[])
        yield event("response.content_part.done", **where, part=item["content"][0])
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=answer)


def _anthropic_error(status: int, kind: str) -> JSONResponse:
    kinds = {429: "rate_limit_error", 500: "api_error"}
    body = {"type": "error", "error": {"type": kinds.get(status, kind), "message": f"fake {kind}"}}
    headers = {"retry-after": "1"} if status == 429 else None
    return JSONResponse(body, status_code=status, headers=headers)


def _anthropic_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            elif isinstance(block, dict) and block.get("type") == "tool_result":
                texts.append(_anthropic_text(block.get("content")))
        return " ".join(texts)
    return ""


def _anthropic_content(messages: list[Any], tools: list[Any], number: int) -> tuple[list[Any], str]:
    last = messages[-1] if messages else {}
    content = last.get("content") if isinstance(last, dict) else None
    results = isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )
    if results:
        return [{"type": "text", "text": f"done: {_anthropic_text(content)}"}], "end_turn"
    if tools and isinstance(last, dict) and last.get("role") == "user":
        call = {
            "type": "tool_use",
            "id": f"toolu_{number}",
            "name": tools[0].get("name"),
            "input": {"q": _anthropic_text(content)},
        }
        return [call], "tool_use"
    user = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    text = _anthropic_text(user[-1].get("content")) if user else ""
    return [{"type": "text", "text": f"echo: {text}"}], "end_turn"


async def _anthropic_events(answer: dict[str, Any]) -> AsyncIterator[bytes]:
    """The Messages API's events for ``answer``: message_start, each block (text word by word,
    tool input as one JSON delta), message_delta, message_stop."""
    start = {**answer, "content": [], "stop_reason": None}
    start["usage"] = {**answer["usage"], "output_tokens": 1}
    yield _sse("message_start", {"type": "message_start", "message": start})
    yield _sse("ping", {"type": "ping"})
    for index, block in enumerate(answer["content"]):
        where = {"index": index}
        opening: dict[str, Any]
        if block["type"] == "text":
            opening = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": w if i == 0 else f" {w}"}
                for i, w in enumerate(block["text"].split(" "))
            ]
        else:
            opening = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", **where, "content_block": opening},
        )
        for delta in deltas:
            yield _sse(
                "content_block_delta", {"type": "content_block_delta", **where, "delta": delta}
            )
        yield _sse("content_block_stop", {"type": "content_block_stop", **where})
    delta = {"stop_reason": answer["stop_reason"], "stop_sequence": None}
    yield _sse(
        "message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 5}}
    )
    yield _sse("message_stop", {"type": "message_stop"})


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
