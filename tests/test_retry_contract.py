"""Only transient errors are retried (issue 20, the summarizer contract): timeouts, lost
connections, 408/409/429 and 5xx, whichever SDK raised them; never a bad request, an auth
failure or a validation error; an invalid answer once, then the backup model."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import openai
import pytest

from synopsis import AllModelsFailed, AsyncSummarizer, RetryPolicy, Summarizer
from synopsis.errors import (
    ContextLengthExceeded,
    InvalidSummary,
    PermanentModelError,
    ProviderUnavailable,
    RateLimited,
)
from synopsis.models._http import error_for_status
from synopsis.models.retry import is_retryable
from synopsis.models.transient import is_transient
from synopsis.testing import AsyncFakeModel, FakeModel

HISTORY = [{"role": "user", "content": "please fix the parser"}]
REQUEST = httpx.Request("POST", "https://api.example.test/v1/chat/completions")


def status_error(status: int) -> openai.APIStatusError:
    response = httpx.Response(status, request=REQUEST, json={"error": {"message": "x"}})
    return openai.APIStatusError("x", response=response, body=None)


class Flaky:
    """A plain function summarizer that raises ``errors`` in turn, then answers."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "The user wants the parser fixed."


TRANSIENT = [
    TimeoutError("slow"),
    BrokenPipeError("pipe"),
    ConnectionResetError("reset"),
    httpx.ReadTimeout("slow", request=REQUEST),
    httpx.ConnectError("refused", request=REQUEST),
    openai.APITimeoutError(request=REQUEST),
    openai.APIConnectionError(request=REQUEST),
    status_error(429),
    status_error(500),
    status_error(503),
    status_error(408),
    status_error(409),
    httpx.HTTPStatusError("x", request=REQUEST, response=httpx.Response(502, request=REQUEST)),
    RateLimited("slow down"),
    ProviderUnavailable("down"),
]
PERMANENT = [
    status_error(400),
    status_error(401),
    status_error(403),
    status_error(404),
    status_error(422),
    httpx.HTTPStatusError("x", request=REQUEST, response=httpx.Response(401, request=REQUEST)),
    PermanentModelError("bad key", status_code=401),
    ContextLengthExceeded("too long"),
    ValueError("validation failed"),
    KeyError("choices"),
    AssertionError("bug"),
]


@pytest.mark.parametrize("error", TRANSIENT, ids=lambda e: type(e).__name__)
def test_transient_errors_of_any_sdk_are_retried(error: BaseException) -> None:
    assert is_transient(error) and is_retryable(error)
    summarize = Flaky(error)
    summarizer = Summarizer(model=summarize, sleep=lambda seconds: None)
    assert summarizer.summarize(HISTORY).attempts == 2 and summarize.calls == 2


@pytest.mark.parametrize("error", PERMANENT, ids=lambda e: type(e).__name__)
def test_deterministic_errors_are_not_retried_but_fail_over(error: BaseException) -> None:
    assert not is_transient(error) and not is_retryable(error)
    primary, backup = Flaky(error, error, error), FakeModel(default="From the backup.")
    summarizer = Summarizer(model=primary, failover=[backup], sleep=lambda seconds: None)
    result = summarizer.summarize(HISTORY)
    assert primary.calls == 1 and result.text == "From the backup." and result.attempts == 2


def test_an_invalid_answer_is_retried_once_then_the_backup_is_asked() -> None:
    """A model that keeps answering nothing is asked twice, not four times."""
    primary, backup = FakeModel(default=""), FakeModel(default="From the backup.")
    summarizer = Summarizer(model=primary, failover=[backup], sleep=lambda seconds: None)
    result = summarizer.summarize(HISTORY)
    assert len(primary.requests) == 2 and result.text == "From the backup."
    with pytest.raises(AllModelsFailed) as failed:
        Summarizer(model=FakeModel(default=""), sleep=lambda seconds: None).summarize(HISTORY)
    [exhausted] = failed.value.exceptions
    assert exhausted.attempts == 2 and isinstance(exhausted.last_error, InvalidSummary)  # type: ignore[attr-defined]


def test_invalid_retries_is_a_setting_and_transient_retries_are_not_capped_by_it() -> None:
    never = RetryPolicy(invalid_retries=0, initial_delay=0, max_delay=0)
    model = FakeModel(["", "ok"])
    with pytest.raises(AllModelsFailed):
        Summarizer(model=model, retry=never).summarize(HISTORY)
    assert len(model.requests) == 1
    flaky = Flaky(TimeoutError(), TimeoutError(), TimeoutError())
    assert Summarizer(model=flaky, retry=never).summarize(HISTORY).attempts == 4


def test_the_async_summarizer_follows_the_same_contract() -> None:
    primary, backup = AsyncFakeModel(default=""), AsyncFakeModel(default="From the backup.")
    summarizer = AsyncSummarizer(model=primary, failover=[backup], sleep=_no_sleep)
    assert asyncio.run(summarizer.summarize(HISTORY)).text == "From the backup."
    assert len(primary.requests) == 2

    async def timing_out(messages: list[dict[str, Any]]) -> str:
        calls.append(1)
        if len(calls) < 3:
            raise TimeoutError
        return "done"

    calls: list[int] = []
    result = asyncio.run(AsyncSummarizer(model=timing_out, sleep=_no_sleep).summarize(HISTORY))
    assert result.text == "done" and len(calls) == 3


async def _no_sleep(seconds: float) -> None:
    return None


def test_a_409_from_a_provider_is_transient_like_the_sdks_own_retry_has_it() -> None:
    assert isinstance(error_for_status(409, "busy", model="m"), ProviderUnavailable)
    assert isinstance(error_for_status(400, "bad", model="m"), PermanentModelError)
