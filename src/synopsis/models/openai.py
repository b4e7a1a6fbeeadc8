"""OpenAI chat-completions models (and any OpenAI-compatible endpoint: vLLM, Ollama, ...).

This is an edge: it does network I/O through the official ``openai`` SDK and, when no client is
given, lets the SDK read ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``. The SDK's own retries are
switched off (``max_retries=0``) so that :mod:`synopsis.models.retry` is the only retry layer.
SDK exceptions are translated here, and only here, into :mod:`synopsis.errors`.

Requests never carry ``tools`` or ``tool_choice`` (a summarizer must answer in text), nor our
``usage`` / ``meta`` message keys.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from synopsis.errors import InvalidSummary, ModelError
from synopsis.messages import strip_extensions
from synopsis.models._base import ModelResponse, ModelSettings, Usage
from synopsis.models._provider import (
    AsyncClientModel,
    ProviderModel,
    SyncClientModel,
    import_sdk,
    settings_body,
    translate_sdk_error,
)

__all__ = ["AsyncOpenAIModel", "OpenAIModel"]

#: Request keys a caller may not smuggle in through ``ModelSettings.extra``.
_FORBIDDEN_EXTRA = frozenset({"tools", "tool_choice", "functions", "function_call", "messages"})


def _sdk() -> Any:
    return import_sdk("openai", "OpenAI")


def request_body(
    model: str, messages: Sequence[Mapping[str, Any]], settings: ModelSettings | None
) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create``: no tools, no extension keys."""
    body: dict[str, Any] = {"model": model, "messages": [strip_extensions(m) for m in messages]}
    return settings_body(body, settings, forbidden=_FORBIDDEN_EXTRA)


def _tool_call(call: Any) -> dict[str, Any]:
    function = getattr(call, "function", None)
    return {
        "id": getattr(call, "id", ""),
        "type": getattr(call, "type", None) or "function",
        "function": {
            "name": getattr(function, "name", ""),
            "arguments": getattr(function, "arguments", "") or "",
        },
    }


def to_response(completion: Any, name: str) -> ModelResponse:
    """Our :class:`ModelResponse` from an SDK ``ChatCompletion``."""
    choices = getattr(completion, "choices", None) or []
    if not choices:
        raise InvalidSummary("the response has no choices", model=name)
    raw = choices[0].message
    message: dict[str, Any] = {"role": "assistant", "content": raw.content}
    if raw.tool_calls:
        message["tool_calls"] = [_tool_call(call) for call in raw.tool_calls]
    if getattr(raw, "refusal", None):
        message["refusal"] = raw.refusal
    usage = getattr(completion, "usage", None)
    return ModelResponse(
        message=message,
        model=name,
        usage=None
        if usage is None
        else Usage(
            prompt_tokens=usage.prompt_tokens or 0,
            completion_tokens=usage.completion_tokens or 0,
            total_tokens=usage.total_tokens or 0,
        ),
    )


def translate_error(exc: Exception, name: str) -> ModelError:
    """Our error for an exception the openai SDK raised."""
    return translate_sdk_error(exc, name, _sdk(), code=getattr(exc, "code", None))


class _OpenAIBase(ProviderModel):
    """An OpenAI chat model, sync or async: everything but the SDK call."""

    provider = "OpenAI"
    example = "gpt-4o-mini"
    key_variable = "OPENAI_API_KEY"
    sdk_module = "openai"
    sdk_error = "OpenAIError"

    def _translate(self, exc: Exception) -> ModelError:
        return translate_error(exc, self.name)

    def _body(
        self, messages: Sequence[Mapping[str, Any]], settings: ModelSettings | None
    ) -> dict[str, Any]:
        return request_body(self.model, messages, settings)

    def _endpoint(self) -> Callable[..., Any]:
        return self._client.chat.completions.create  # type: ignore[no-any-return]

    def _response(self, answer: Any) -> ModelResponse:
        return to_response(answer, self.name)


class OpenAIModel(_OpenAIBase, SyncClientModel):
    """A synchronous OpenAI (or OpenAI-compatible) chat model.

    Pass ``client=`` to use a configured ``openai.OpenAI`` (its retries are switched off on a
    copy); otherwise one is made from ``base_url``, ``api_key`` and ``timeout`` (seconds),
    with the SDK's environment variables filling what is not given.
    """

    client_class = "OpenAI"


class AsyncOpenAIModel(_OpenAIBase, AsyncClientModel):
    """The async twin of :class:`OpenAIModel`, on ``openai.AsyncOpenAI``."""

    client_class = "AsyncOpenAI"
