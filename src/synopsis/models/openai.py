"""OpenAI chat-completions models (and any OpenAI-compatible endpoint: vLLM, Ollama, ...).

This is an edge: it does network I/O through the official ``openai`` SDK and, when no client is
given, lets the SDK read ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``. The SDK's own retries are
switched off (``max_retries=0``) so that :mod:`synopsis.models.retry` is the only retry layer.
SDK exceptions are translated here, and only here, into :mod:`synopsis.errors`.

Requests never carry ``tools`` or ``tool_choice`` (a summarizer must answer in text), nor our
``usage`` / ``meta`` message keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from synopsis.errors import (
    ConfigError,
    InvalidSummary,
    ModelError,
    ModelTimeout,
    PermanentModelError,
    ProviderUnavailable,
)
from synopsis.messages import strip_extensions
from synopsis.models._base import ModelResponse, ModelSettings, Usage
from synopsis.models._http import error_for_status

__all__ = ["AsyncOpenAIModel", "OpenAIModel"]

#: Request keys a caller may not smuggle in through ``ModelSettings.extra``.
_FORBIDDEN_EXTRA = frozenset({"tools", "tool_choice", "functions", "function_call", "messages"})


def _sdk() -> Any:
    try:
        import openai
    except ImportError as exc:  # pragma: no cover - the dev environment has the SDK
        raise ConfigError(
            "the OpenAI models need the openai SDK: pip install 'synopsis[openai]'"
        ) from exc
    return openai


def _client_options(base_url: str | None, api_key: str | None, timeout: float) -> dict[str, Any]:
    # Only pass what was given, so that the SDK falls back to its environment variables.
    options: dict[str, Any] = {"timeout": timeout, "max_retries": 0}
    if base_url is not None:
        options["base_url"] = base_url
    if api_key is not None:
        options["api_key"] = api_key
    return options


def _make_client(factory: Any, options: dict[str, Any]) -> Any:
    try:
        return factory(**options)
    except _sdk().OpenAIError as exc:
        raise ConfigError(
            f"cannot create the OpenAI client ({exc}); pass api_key=... or set OPENAI_API_KEY"
        ) from exc


def request_body(
    model: str, messages: Sequence[Mapping[str, Any]], settings: ModelSettings | None
) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create``: no tools, no extension keys."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [strip_extensions(m) for m in messages],
    }
    if settings is None:
        return body
    if settings.max_tokens is not None:
        body["max_tokens"] = settings.max_tokens
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.timeout is not None:
        body["timeout"] = settings.timeout
    extra = {k: v for k, v in settings.extra.items() if k not in _FORBIDDEN_EXTRA}
    if extra:
        body["extra_body"] = extra
    return body


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
    openai = _sdk()
    if isinstance(exc, openai.APITimeoutError):
        return ModelTimeout(f"{name}: request timed out", model=name)
    if isinstance(exc, openai.APIConnectionError):
        return ProviderUnavailable(f"{name}: connection failed: {exc}", model=name)
    if isinstance(exc, openai.APIStatusError):
        return error_for_status(
            exc.status_code,
            str(getattr(exc, "message", exc)),
            model=name,
            headers=exc.response.headers,
            code=getattr(exc, "code", None),
        )
    return PermanentModelError(f"{name}: {exc}", model=name)


class _OpenAIBase:
    def __init__(
        self,
        model: str,
        *,
        client: Any,
        context_window: int | None,
        name: str | None,
    ) -> None:
        if not model:
            raise ConfigError("an OpenAI model needs a model id, e.g. 'gpt-4o-mini'")
        self.model = model
        self.context_window = context_window
        self._name = name or f"openai:{model}"
        self._client = client

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r})"


class OpenAIModel(_OpenAIBase):
    """A synchronous OpenAI (or OpenAI-compatible) chat model.

    Pass ``client=`` to use a configured ``openai.OpenAI`` (its retries are switched off on a
    copy); otherwise one is made from ``base_url``, ``api_key`` and ``timeout`` (seconds),
    with the SDK's environment variables filling what is not given.
    """

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        context_window: int | None = None,
        name: str | None = None,
    ) -> None:
        self._owns_client = client is None
        if client is None:
            client = _make_client(_sdk().OpenAI, _client_options(base_url, api_key, timeout))
        else:
            client = client.with_options(max_retries=0)
        super().__init__(model, client=client, context_window=context_window, name=name)

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        """One chat completion; SDK errors come out as :mod:`synopsis.errors`."""
        body = request_body(self.model, messages, settings)
        try:
            completion = self._client.chat.completions.create(**body)
        except _sdk().OpenAIError as exc:
            raise translate_error(exc, self.name) from exc
        return to_response(completion, self.name)

    def close(self) -> None:
        """Close the HTTP client if this model created it."""
        if self._owns_client:
            self._client.close()


class AsyncOpenAIModel(_OpenAIBase):
    """The async twin of :class:`OpenAIModel`, on ``openai.AsyncOpenAI``."""

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        context_window: int | None = None,
        name: str | None = None,
    ) -> None:
        self._owns_client = client is None
        if client is None:
            client = _make_client(_sdk().AsyncOpenAI, _client_options(base_url, api_key, timeout))
        else:
            client = client.with_options(max_retries=0)
        super().__init__(model, client=client, context_window=context_window, name=name)

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        """One chat completion; SDK errors come out as :mod:`synopsis.errors`."""
        body = request_body(self.model, messages, settings)
        try:
            completion = await self._client.chat.completions.create(**body)
        except _sdk().OpenAIError as exc:
            raise translate_error(exc, self.name) from exc
        return to_response(completion, self.name)

    async def aclose(self) -> None:
        """Close the HTTP client if this model created it."""
        if self._owns_client:
            await self._client.close()
