"""LiteLLMModel / AsyncLiteLLMModel: answers, usage, settings and every error translated.

No network: LiteLLM's own ``mock_response`` answers (or raises) without a request, and a
scripted local OpenAI-compatible server gives real HTTP status codes and headers.
"""

from __future__ import annotations

import os

# LiteLLM fetches a model price list from GitHub at import unless told to use its bundled copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import asyncio
import contextlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

from synopsis.errors import (  # noqa: E402
    ConfigError,
    ContextLengthExceeded,
    ModelTimeout,
    PermanentModelError,
    ProviderUnavailable,
    RateLimited,
)
from synopsis.models._base import ModelSettings, Usage  # noqa: E402
from synopsis.models._provider import DEFAULT_TIMEOUT  # noqa: E402
from synopsis.models._resolve import resolve_model  # noqa: E402
from synopsis.models.litellm import AsyncLiteLLMModel, LiteLLMModel, translate_error  # noqa: E402
from synopsis.models.retry import RetryPolicy  # noqa: E402
from synopsis.summarizer import AsyncSummarizer, Summarizer  # noqa: E402
from tests.test_openai_model import (  # noqa: E402
    HISTORY,
    Server,
    completion,
    error,
)

# LiteLLM builds pydantic schemas for TypedDicts with ReadOnly items on its first call.
pytestmark = pytest.mark.filterwarnings("ignore:Items? .*`ReadOnly` qualifier:UserWarning")

SUMMARY = "<summary>1. Primary Request and Intent: summarize the session</summary>"
NO_SLEEP = RetryPolicy(max_retries=0)


def mocked(reply: Any, model: str = "gpt-4o-mini", **options: Any) -> LiteLLMModel:
    """A model whose every call LiteLLM answers with ``reply`` (a text or an exception)."""
    return LiteLLMModel(model, completion_options={"mock_response": reply}, **options)


@pytest.fixture(autouse=True)
def _close_litellm_event_loop(request: pytest.FixtureRequest) -> Iterator[None]:
    """LiteLLM's sync calls ask for the thread's event loop for their logging hooks, which
    makes one that nobody closes; close it after each sync test, or its garbage collection
    later fails an unrelated test with an "unclosed event loop" warning."""
    yield
    if request.node.get_closest_marker("asyncio") is not None:
        return
    with contextlib.suppress(RuntimeError):
        leftover = asyncio.get_event_loop_policy().get_event_loop()
        if not leftover.is_running():
            leftover.close()
    asyncio.set_event_loop(None)


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def local(server: Server, **options: Any) -> LiteLLMModel:
    return LiteLLMModel("openai/local-model", base_url=server.base_url, api_key="k", **options)


def test_a_mocked_completion_maps_message_and_usage() -> None:
    """LiteLLM's answer becomes our ModelResponse: assistant text, usage, our model name."""
    response = mocked(SUMMARY).complete(HISTORY)
    assert response.text == SUMMARY
    assert response.message["role"] == "assistant"
    assert response.usage == Usage(10, 20, 30)  # LiteLLM's mock usage
    assert response.model == "litellm:gpt-4o-mini"


def test_requests_carry_settings_no_tools_no_extensions_and_no_retries(server: Server) -> None:
    """The request has max_tokens and temperature, no tools, no usage/meta keys; LiteLLM's
    retries are off, so one failing call is one request."""
    server.script = [completion(SUMMARY)]
    settings = ModelSettings(max_tokens=77, temperature=0.0, extra={"tools": [{"x": 1}]})
    local(server).complete(HISTORY, settings=settings)
    body = server.requests[0]
    assert (body["max_tokens"], body["temperature"]) == (77, 0.0)
    assert "tools" not in body and "tool_choice" not in body
    assert all("usage" not in m and "meta" not in m for m in body["messages"])
    assert server.headers[0]["authorization"] == "Bearer k"
    server.script = [error(503, "busy"), completion(SUMMARY)]
    with pytest.raises(ProviderUnavailable):
        local(server).complete(HISTORY)
    assert len(server.requests) == 2  # the 503 was not retried inside LiteLLM


def test_every_call_has_a_finite_timeout_and_no_retries() -> None:
    """The default timeout is finite (also when None is passed) and num_retries is 0."""
    assert LiteLLMModel("gpt-4o")._client["timeout"] == DEFAULT_TIMEOUT
    assert LiteLLMModel("gpt-4o", timeout=None)._client["timeout"] == DEFAULT_TIMEOUT
    assert LiteLLMModel("gpt-4o", timeout=3)._client["num_retries"] == 0
    with pytest.raises(ConfigError, match="num_retries"):
        LiteLLMModel("gpt-4o", completion_options={"num_retries": 3})


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("litellm.RateLimitError", RateLimited),
        ("litellm.ContextWindowExceededError", ContextLengthExceeded),
        ("litellm.InternalServerError", ProviderUnavailable),
    ],
)
def test_mocked_errors_are_translated(reply: str, expected: type[Exception]) -> None:
    """LiteLLM's rate-limit, context-window and server errors come out as ours, chained."""
    with pytest.raises(expected) as info:
        mocked(reply).complete(HISTORY)
    assert info.value.model == "litellm:gpt-4o-mini"  # type: ignore[attr-defined]
    assert type(info.value.__cause__).__module__ == "litellm.exceptions"


def _raised(kind: str) -> Exception:
    errors, common = litellm.exceptions, {"llm_provider": "openai", "model": "gpt-4o-mini"}
    made: dict[str, Exception] = {
        "timeout": errors.Timeout(message="slow", **common),
        "connection": errors.APIConnectionError(message="refused", **common),
        "auth": errors.AuthenticationError(message="bad key", **common),
        "unavailable": errors.ServiceUnavailableError(message="overloaded", **common),
        "bad request": errors.BadRequestError(message="nope", **common),
        "budget": errors.BudgetExceededError(current_cost=2.0, max_budget=1.0),
    }
    return made[kind]


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("timeout", ModelTimeout),
        ("connection", ProviderUnavailable),
        ("auth", PermanentModelError),
        ("unavailable", ProviderUnavailable),
        ("bad request", PermanentModelError),
    ],
)
def test_raised_errors_are_translated(kind: str, expected: type[Exception]) -> None:
    """Timeouts, connection, auth, 503 and 400 errors each map onto our tree."""
    model = LiteLLMModel("gpt-4o-mini", completion_options={"mock_response": _raised(kind)})
    with pytest.raises(expected):
        model.complete(HISTORY)


def test_budget_errors_are_permanent() -> None:
    """LiteLLM's own budget error (not an HTTP error) is permanent: retrying cannot help."""
    translated = translate_error(_raised("budget"), "litellm:gpt-4o-mini")
    assert isinstance(translated, PermanentModelError)
    assert translated.model == "litellm:gpt-4o-mini"


@pytest.mark.parametrize(
    ("scripted", "expected", "attribute"),
    [
        (error(429, "slow down", None, **{"Retry-After": "2"}), RateLimited, ("retry_after", 2.0)),
        (
            error(400, "This model's maximum context length is 8192 tokens", "context_length"),
            ContextLengthExceeded,
            None,
        ),
        (error(503, "busy"), ProviderUnavailable, ("status_code", 503)),
        (error(401, "bad key"), PermanentModelError, ("status_code", 401)),
    ],
)
def test_http_errors_of_a_real_server_are_translated(
    server: Server, scripted: Any, expected: type[Exception], attribute: Any
) -> None:
    """Status codes and Retry-After from a real HTTP answer reach our errors."""
    server.script = [scripted]
    with pytest.raises(expected) as info:
        local(server).complete(HISTORY)
    if attribute is not None:
        assert getattr(info.value, attribute[0]) == attribute[1]


def test_connection_refused_is_provider_unavailable() -> None:
    """Nothing listening: ProviderUnavailable, not a LiteLLM exception."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = srv.server_address[1]
    srv.server_close()
    model = LiteLLMModel("openai/m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
    with pytest.raises(ProviderUnavailable):
        model.complete(HISTORY)


def test_litellm_spec_resolves_to_the_twins() -> None:
    """'litellm:MODEL' builds the sync or async model; the table knows its window."""
    model = resolve_model("litellm:anthropic/claude-3-5-haiku-20241022")
    assert isinstance(model, LiteLLMModel)
    assert model.name == "litellm:anthropic/claude-3-5-haiku-20241022"
    assert (model.context_window, model.max_output_tokens) == (200_000, 8_192)
    assert isinstance(resolve_model("litellm:gpt-4o", async_=True), AsyncLiteLLMModel)


def test_a_summarizer_on_litellm_reports_the_cost() -> None:
    """End to end: a Summarizer over a LiteLLM model returns the summary and its usage."""
    summarizer = Summarizer(model=mocked(SUMMARY), retry=NO_SLEEP)
    result = summarizer.summarize(HISTORY[1:])
    assert result.text == "1. Primary Request and Intent: summarize the session"
    assert (result.model, result.calls) == ("litellm:gpt-4o-mini", 1)
    assert result.usage == Usage(10, 20, 30)


async def test_async_twin_answers_and_translates() -> None:
    """AsyncLiteLLMModel over acompletion: the same answer, the same error translation."""
    model = AsyncLiteLLMModel("gpt-4o-mini", completion_options={"mock_response": SUMMARY})
    assert (await model.complete(HISTORY)).text == SUMMARY
    failing = AsyncLiteLLMModel(
        "gpt-4o-mini", completion_options={"mock_response": "litellm.RateLimitError"}
    )
    with pytest.raises(RateLimited):
        await failing.complete(HISTORY)
    result = await AsyncSummarizer(model=model, retry=NO_SLEEP).summarize(HISTORY[1:])
    assert result.usage == Usage(10, 20, 30)
