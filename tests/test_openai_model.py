"""OpenAIModel / AsyncOpenAIModel end to end against a scripted local OpenAI-compatible server."""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from synopsis.cli import main
from synopsis.compaction.compactor import Compactor
from synopsis.errors import (
    AllModelsFailed,
    ContextLengthExceeded,
    InvalidSummary,
    ModelTimeout,
    PermanentModelError,
    ProviderUnavailable,
    RateLimited,
)
from synopsis.models._base import ModelResponse, ModelSettings
from synopsis.models.failover import require_text
from synopsis.models.openai import AsyncOpenAIModel, OpenAIModel
from synopsis.models.retry import (
    AttemptRecord,
    RetryPolicy,
    arun_with_failover,
    run_with_failover,
)
from synopsis.testing import RecordingSleep

SUMMARY_TEXT = "<summary>1. Primary Request and Intent: keep going</summary>"

HISTORY = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hello", "meta": {"content_type": "note"}},
    {
        "role": "assistant",
        "content": "hi",
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    },
    {"role": "user", "content": "summarize please"},
]


@dataclass
class Scripted:
    """One scripted answer: HTTP status, JSON body, extra headers, delay before answering."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def completion(text: str | None = "<summary>done</summary>", **message: Any) -> Scripted:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "local-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": text, **message},
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    return Scripted(body=body)


def tool_call_completion() -> Scripted:
    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    return completion(None, tool_calls=[call])


def error(status: int, message: str, code: str | None = None, **headers: str) -> Scripted:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    return Scripted(status=status, body=body, headers=headers)


class Server:
    """A ThreadingHTTPServer on 127.0.0.1 answering /chat/completions from a script."""

    def __init__(self) -> None:
        self.script: list[Scripted] = []
        self.requests: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                with server._lock:
                    server.raw.append(raw)
                    server.headers.append(dict(self.headers.items()))
                    server.requests.append(json.loads(raw))
                    reply = server.script.pop(0) if server.script else Scripted(status=599)
                if reply.delay:
                    time.sleep(reply.delay)
                data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key.replace("_", "-"), value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


@pytest.fixture
def sync_model(server: Server) -> Iterator[OpenAIModel]:
    model = OpenAIModel("local-model", base_url=server.base_url, api_key="test", timeout=5.0)
    yield model
    model.close()


def summarize_attempt(model: Any) -> ModelResponse:
    """The validating attempt a summarizer would use: text only, no tool calls."""
    return require_text(model.complete(HISTORY, settings=ModelSettings(max_tokens=100)))


def run(models: list[Any], sleep: RecordingSleep, records: list[AttemptRecord] | None = None):
    return run_with_failover(
        models,
        summarize_attempt,
        policy=RetryPolicy(),
        on_attempt=None if records is None else records.append,
        sleep=sleep,
        rng=random.Random(7),
    )


def test_plain_completion_maps_message_and_usage(server: Server, sync_model: OpenAIModel) -> None:
    """A 200 answer becomes a ModelResponse with the assistant message and usage."""
    server.script = [completion("hello there")]
    response = sync_model.complete(HISTORY)
    assert response.text == "hello there"
    assert response.message["role"] == "assistant"
    assert response.usage is not None
    assert response.usage.total_tokens == 15
    assert response.model == "openai:local-model"


def test_request_never_carries_tools_usage_or_meta(server: Server, sync_model: OpenAIModel) -> None:
    """The body sent has no tools/tool_choice and no usage/meta keys on any message."""
    server.script = [completion()]
    settings = ModelSettings(extra={"tools": [{"type": "function"}], "tool_choice": "auto"})
    sync_model.complete(HISTORY, settings=settings)
    body = server.requests[0]
    assert "tools" not in body
    assert "tool_choice" not in body
    assert all("usage" not in m and "meta" not in m for m in body["messages"])
    assert b'"meta"' not in server.raw[0]
    assert [m["content"] for m in body["messages"]] == [m["content"] for m in HISTORY]
    assert HISTORY[1]["meta"] == {"content_type": "note"}  # caller's messages untouched


def test_500_then_success_is_retried_with_backoff(server: Server, sync_model: OpenAIModel) -> None:
    """A 500 is retried; the recorded backoff lies within [initial_delay, max_delay]."""
    server.script = [error(500, "boom"), completion()]
    sleep = RecordingSleep()
    records: list[AttemptRecord] = []
    result = run([sync_model], sleep, records)
    assert result.value.text == "<summary>done</summary>"
    assert result.attempts == 2
    assert len(sleep.delays) == 1
    assert 1.0 <= sleep.delays[0] <= 10.0
    assert isinstance(records[0].error, ProviderUnavailable)
    assert records[0].error.status_code == 500


def test_429_retry_after_is_honoured(server: Server, sync_model: OpenAIModel) -> None:
    """A 429 with Retry-After: 2 waits at least 2 s before the retry."""
    server.script = [error(429, "slow down", None, **{"Retry-After": "2"}), completion()]
    sleep = RecordingSleep()
    records: list[AttemptRecord] = []
    run([sync_model], sleep, records)
    assert isinstance(records[0].error, RateLimited)
    assert records[0].error.retry_after == 2.0
    assert sleep.delays[0] >= 2.0


def test_retry_after_ms_header_is_read(server: Server, sync_model: OpenAIModel) -> None:
    """A 429 with retry-after-ms gives retry_after in seconds."""
    server.script = [error(429, "slow down", None, **{"retry-after-ms": "1500"})]
    with pytest.raises(RateLimited) as info:
        sync_model.complete(HISTORY)
    assert info.value.retry_after == 1.5


def test_tool_call_response_is_rejected_and_retried(
    server: Server, sync_model: OpenAIModel
) -> None:
    """A response that calls a tool counts as a failed attempt and is retried."""
    server.script = [tool_call_completion(), completion()]
    records: list[AttemptRecord] = []
    result = run([sync_model], RecordingSleep(), records)
    assert isinstance(records[0].error, InvalidSummary)
    assert result.value.text == "<summary>done</summary>"
    assert result.attempts == 2


def test_empty_text_is_rejected(server: Server, sync_model: OpenAIModel) -> None:
    """An empty answer is invalid and retried."""
    server.script = [completion(""), completion()]
    records: list[AttemptRecord] = []
    run([sync_model], RecordingSleep(), records)
    assert isinstance(records[0].error, InvalidSummary)


def test_timeout_becomes_model_timeout_and_is_retried(server: Server) -> None:
    """A server slower than the client timeout gives ModelTimeout, then the retry succeeds."""
    model = OpenAIModel("local-model", base_url=server.base_url, api_key="t", timeout=0.2)
    server.script = [Scripted(delay=0.6, body={}), completion()]
    records: list[AttemptRecord] = []
    try:
        result = run([model], RecordingSleep(), records)
    finally:
        model.close()
    assert isinstance(records[0].error, ModelTimeout)
    assert result.attempts == 2


def test_failover_after_primary_exhausts_retries(server: Server) -> None:
    """The next model is tried after the first one's 4 attempts; records show the phases."""
    first = OpenAIModel("m1", base_url=server.base_url, api_key="t", name="first")
    second = OpenAIModel("m2", base_url=server.base_url, api_key="t", name="second")
    server.script = [error(503, "busy")] * 4 + [completion("<summary>ok</summary>")]
    records: list[AttemptRecord] = []
    try:
        result = run([first, second], RecordingSleep(), records)
    finally:
        first.close()
        second.close()
    assert [(r.phase, r.model, r.attempt) for r in records] == [
        ("primary", "first", 1),
        ("primary", "first", 2),
        ("primary", "first", 3),
        ("primary", "first", 4),
        ("failover", "second", 1),
    ]
    assert result.model == "second"
    assert [r["model"] for r in server.requests] == ["m1"] * 4 + ["m2"]
    events = [r.to_event().to_dict() for r in records]
    assert events[0]["error"]["type"] == "ProviderUnavailable"
    json.dumps(events)


def test_context_length_400_is_not_retried(server: Server, sync_model: OpenAIModel) -> None:
    """A 400 context_length_exceeded is final for that model: one attempt, then give up."""
    server.script = [
        error(400, "This model's maximum context length is 8192 tokens", "context_length_exceeded")
    ]
    sleep = RecordingSleep()
    with pytest.raises(AllModelsFailed) as info:
        run([sync_model], sleep)
    exhausted = info.value.exceptions[0]
    assert isinstance(exhausted.last_error, ContextLengthExceeded)  # type: ignore[attr-defined]
    assert len(server.requests) == 1
    assert sleep.delays == []


def test_other_4xx_is_permanent(server: Server, sync_model: OpenAIModel) -> None:
    """A 401 becomes PermanentModelError carrying the status code."""
    server.script = [error(401, "bad key")]
    with pytest.raises(PermanentModelError) as info:
        sync_model.complete(HISTORY)
    assert info.value.status_code == 401


def test_connection_refused_is_provider_unavailable() -> None:
    """Nothing listening: ProviderUnavailable, not an SDK exception."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = srv.server_address[1]
    srv.server_close()
    model = OpenAIModel("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="t", timeout=2.0)
    try:
        with pytest.raises(ProviderUnavailable):
            model.complete(HISTORY)
    finally:
        model.close()


# ---------------------------------------------------------------------------------------------
# Async twins


async def asummarize_attempt(model: Any) -> ModelResponse:
    """The async validating attempt."""
    return require_text(await model.complete(HISTORY))


async def arun(models: list[Any], sleep: RecordingSleep, records: list[AttemptRecord]):
    return await arun_with_failover(
        models,
        asummarize_attempt,
        on_attempt=records.append,
        sleep=sleep.asleep,
        rng=random.Random(7),
    )


async def test_async_500_then_success(server: Server) -> None:
    """The async model retries a 500 and returns the later success."""
    model = AsyncOpenAIModel("local-model", base_url=server.base_url, api_key="t")
    server.script = [error(502, "bad gateway"), completion()]
    sleep, records = RecordingSleep(), []
    try:
        result = await arun([model], sleep, records)
    finally:
        await model.aclose()
    assert result.attempts == 2
    assert 1.0 <= sleep.delays[0] <= 10.0


async def test_async_429_and_tool_call_then_success(server: Server) -> None:
    """Retry-After is honoured and a tool-call answer is rejected, async."""
    model = AsyncOpenAIModel("local-model", base_url=server.base_url, api_key="t")
    server.script = [
        error(429, "slow", None, **{"Retry-After": "3"}),
        tool_call_completion(),
        completion(),
    ]
    sleep, records = RecordingSleep(), []
    try:
        result = await arun([model], sleep, records)
    finally:
        await model.aclose()
    assert sleep.delays[0] >= 3.0
    assert isinstance(records[1].error, InvalidSummary)
    assert result.attempts == 3
    assert all("tools" not in body for body in server.requests)


async def test_async_timeout_and_failover(server: Server) -> None:
    """An async timeout is ModelTimeout; after exhaustion the failover model answers."""
    slow = AsyncOpenAIModel("m1", base_url=server.base_url, api_key="t", timeout=0.2, name="a")
    fast = AsyncOpenAIModel("m2", base_url=server.base_url, api_key="t", name="b")
    server.script = [Scripted(delay=0.6, body={}), error(400, "prompt is too long"), completion()]
    sleep, records = RecordingSleep(), []
    try:
        result = await arun([slow, fast], sleep, records)
    finally:
        await slow.aclose()
        await fast.aclose()
    assert isinstance(records[0].error, ModelTimeout)
    assert isinstance(records[1].error, ContextLengthExceeded)
    assert [(r.phase, r.attempt) for r in records] == [
        ("primary", 1),
        ("primary", 2),
        ("failover", 1),
    ]
    assert result.model == "b"


# ---------------------------------------------------------------------------------------------
# Credentials in the endpoint URL and the default timeout


def test_url_credentials_show_up_nowhere(
    server: Server, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """'openai-compatible:MODEL@http://user:PASS@host/v1': the server gets basic auth, and no
    event, log record (DEBUG included), repr, report or CLI output holds the password."""
    caplog.set_level(logging.DEBUG)
    url = server.base_url.replace("http://", "http://user:PASS@")
    spec = f"openai-compatible:local-model@{url}"
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "word " * 40}
        for i in range(12)
    ]
    events: list[Any] = []
    server.script = [error(503, "busy"), completion(SUMMARY_TEXT)]
    compactor = Compactor(model=spec, retry=RetryPolicy(max_retries=0), on_event=[events.append])
    failed, done = compactor.compact(history), compactor.compact(history)
    assert failed.error is not None and done.compacted
    assert {h.get("authorization", h.get("Authorization")) for h in server.headers} == {
        "Basic dXNlcjpQQVNT"
    }
    transcript = tmp_path / "t.json"
    transcript.write_text(json.dumps(history), encoding="utf-8")
    server.script = [error(503, "busy")]
    cli = CliRunner().invoke(main, ["compact", str(transcript), "--model", spec, "--force"])
    assert cli.exit_code == 3  # summarization failed, history kept
    shown = [
        repr(compactor.options),
        repr(compactor.summarizer.models[0]),  # type: ignore[attr-defined]
        json.dumps([event.to_dict() for event in events]),
        json.dumps([failed.report(), done.report()]),
        caplog.text,
        *(str(record.args) for record in caplog.records),
        cli.stdout,
        cli.stderr,
    ]
    for text in shown:
        assert "PASS" not in text and "dXNlcjpQQVNT" not in text


def test_the_default_timeout_is_finite() -> None:
    """Without a timeout (or with None) a provider call gives up after 120 seconds."""
    for model in (OpenAIModel("m", api_key="k"), OpenAIModel("m", api_key="k", timeout=None)):
        assert model._client.timeout == 120.0
        model.close()
