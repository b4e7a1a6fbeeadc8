"""Anthropic Messages API models through the official ``anthropic`` SDK.

An edge like :mod:`synopsis.models.openai`: messages are converted with
:func:`synopsis.convert.anthropic.to_anthropic` (system messages go to ``system``), no tools are
ever sent, the SDK's retries are off, and SDK errors are translated here. 429 and 529
("overloaded") are transient; "prompt is too long" is :class:`ContextLengthExceeded`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from synopsis.convert.anthropic import from_anthropic, to_anthropic
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

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicModel", "AsyncAnthropicModel"]

#: The API requires ``max_tokens``; a 9-section summary fits comfortably in this.
DEFAULT_MAX_TOKENS = 8192
_FORBIDDEN_EXTRA = frozenset({"tools", "tool_choice", "messages", "system"})


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError as exc:  # pragma: no cover - the dev environment has the SDK
        raise ConfigError(
            "the Anthropic models need the anthropic SDK: pip install 'synopsis[anthropic]'"
        ) from exc
    return anthropic


def request_body(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    settings: ModelSettings | None,
    *,
    max_tokens: int,
) -> dict[str, Any]:
    """Keyword arguments of ``messages.create``: system split out, no tools, no extensions."""
    system, converted = to_anthropic([strip_extensions(m) for m in messages], keep_meta=False)
    body: dict[str, Any] = {"model": model, "messages": converted, "max_tokens": max_tokens}
    if system:
        body["system"] = system
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


def _block_dict(block: Any) -> dict[str, Any]:
    if isinstance(block, Mapping):
        return dict(block)
    dump = getattr(block, "model_dump", None)
    return dict(dump(exclude_none=True)) if callable(dump) else {"type": "unknown"}


def to_response(message: Any, name: str) -> ModelResponse:
    """Our :class:`ModelResponse` from an SDK ``Message``."""
    blocks = [_block_dict(b) for b in getattr(message, "content", None) or []]
    if not blocks:
        raise InvalidSummary("the response has no content", model=name)
    converted = from_anthropic(None, [{"role": "assistant", "content": blocks}])[0]
    parts = converted.get("content")
    if isinstance(parts, list) and all(p.get("type") == "text" for p in parts):
        # Plain text answers read best as a string, like OpenAI's.
        converted["content"] = "".join(p.get("text", "") for p in parts)
    usage = getattr(message, "usage", None)
    prompt = int(getattr(usage, "input_tokens", 0) or 0)
    completion = int(getattr(usage, "output_tokens", 0) or 0)
    return ModelResponse(
        message=converted,
        model=name,
        usage=None if usage is None else Usage(prompt, completion, prompt + completion),
    )


def translate_error(exc: Exception, name: str) -> ModelError:
    """Our error for an exception the anthropic SDK raised."""
    anthropic = _sdk()
    if isinstance(exc, anthropic.APITimeoutError):
        return ModelTimeout(f"{name}: request timed out", model=name)
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderUnavailable(f"{name}: connection failed: {exc}", model=name)
    if isinstance(exc, anthropic.APIStatusError):
        return error_for_status(
            exc.status_code,
            str(getattr(exc, "message", exc)),
            model=name,
            headers=exc.response.headers,
        )
    return PermanentModelError(f"{name}: {exc}", model=name)


class _AnthropicBase:
    def __init__(
        self,
        model: str,
        *,
        client: Any,
        max_tokens: int,
        context_window: int | None,
        name: str | None,
    ) -> None:
        if not model:
            raise ConfigError("an Anthropic model needs a model id, e.g. 'claude-sonnet-4-5'")
        if max_tokens < 1:
            raise ConfigError(f"max_tokens must be >= 1, got {max_tokens}")
        self.model = model
        self.max_tokens = max_tokens
        self.context_window = context_window
        self._name = name or f"anthropic:{model}"
        self._client = client

    @property
    def name(self) -> str:
        return self._name

    def _body(
        self, messages: Sequence[Mapping[str, Any]], settings: ModelSettings | None
    ) -> dict[str, Any]:
        return request_body(self.model, messages, settings, max_tokens=self.max_tokens)


def _client_options(base_url: str | None, api_key: str | None, timeout: float) -> dict[str, Any]:
    # Only what was given, so that the SDK reads ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL.
    options: dict[str, Any] = {"timeout": timeout, "max_retries": 0}
    if base_url is not None:
        options["base_url"] = base_url
    if api_key is not None:
        options["api_key"] = api_key
    return options


class AnthropicModel(_AnthropicBase):
    """A synchronous Claude model. ``client=`` takes a configured ``anthropic.Anthropic``."""

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        context_window: int | None = None,
        name: str | None = None,
    ) -> None:
        self._owns_client = client is None
        if client is None:
            client = _sdk().Anthropic(**_client_options(base_url, api_key, timeout))
        else:
            client = client.with_options(max_retries=0)
        super().__init__(
            model, client=client, max_tokens=max_tokens, context_window=context_window, name=name
        )

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        """One Messages API call; SDK errors come out as :mod:`synopsis.errors`."""
        try:
            message = self._client.messages.create(**self._body(messages, settings))
        except _sdk().AnthropicError as exc:
            raise translate_error(exc, self.name) from exc
        return to_response(message, self.name)

    def close(self) -> None:
        """Close the HTTP client if this model created it."""
        if self._owns_client:
            self._client.close()


class AsyncAnthropicModel(_AnthropicBase):
    """The async twin of :class:`AnthropicModel`, on ``anthropic.AsyncAnthropic``."""

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        context_window: int | None = None,
        name: str | None = None,
    ) -> None:
        self._owns_client = client is None
        if client is None:
            client = _sdk().AsyncAnthropic(**_client_options(base_url, api_key, timeout))
        else:
            client = client.with_options(max_retries=0)
        super().__init__(
            model, client=client, max_tokens=max_tokens, context_window=context_window, name=name
        )

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        """One Messages API call; SDK errors come out as :mod:`synopsis.errors`."""
        try:
            message = await self._client.messages.create(**self._body(messages, settings))
        except _sdk().AnthropicError as exc:
            raise translate_error(exc, self.name) from exc
        return to_response(message, self.name)

    async def aclose(self) -> None:
        """Close the HTTP client if this model created it."""
        if self._owns_client:
            await self._client.close()
