"""Anthropic Messages API models through the official ``anthropic`` SDK.

An edge like :mod:`synopsis.models.openai`: messages are converted with
:func:`synopsis.convert.anthropic.to_anthropic` (system messages go to ``system``), no tools are
ever sent, the SDK's retries are off, and SDK errors are translated here. 429 and 529
("overloaded") are transient; "prompt is too long" is :class:`ContextLengthExceeded`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Unpack

from synopsis.convert.anthropic import from_anthropic, to_anthropic
from synopsis.errors import ConfigError, InvalidSummary, ModelError
from synopsis.messages import strip_extensions
from synopsis.models._base import ModelResponse, ModelSettings, Usage
from synopsis.models._provider import (
    AsyncClientModel,
    ClientKeywords,
    ProviderModel,
    SyncClientModel,
    import_sdk,
    settings_body,
    translate_sdk_error,
)

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicModel", "AsyncAnthropicModel"]

#: The API requires ``max_tokens``; a 9-section summary fits comfortably in this.
DEFAULT_MAX_TOKENS = 8192
_FORBIDDEN_EXTRA = frozenset({"tools", "tool_choice", "messages", "system"})


def _sdk() -> Any:
    return import_sdk("anthropic", "Anthropic")


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
    body = settings_body(body, settings, forbidden=_FORBIDDEN_EXTRA)
    if "temperature" in body:
        # Recent SDKs dropped the keyword (it raised TypeError); the API still reads the field.
        body["extra_body"] = {"temperature": body.pop("temperature"), **body.get("extra_body", {})}
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
    return translate_sdk_error(exc, name, _sdk())


class _AnthropicBase(ProviderModel):
    """A Claude model, sync or async: everything but the SDK call."""

    provider = "Anthropic"
    example = "claude-sonnet-4-5"
    key_variable = "ANTHROPIC_API_KEY"
    sdk_module = "anthropic"
    sdk_error = "AnthropicError"

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        **options: Unpack[ClientKeywords],
    ) -> None:
        super().__init__(model, **options)
        if max_tokens < 1:
            raise ConfigError(f"max_tokens must be >= 1, got {max_tokens}")
        self.max_tokens = max_tokens

    def _translate(self, exc: Exception) -> ModelError:
        return translate_error(exc, self.name)

    def _body(
        self, messages: Sequence[Mapping[str, Any]], settings: ModelSettings | None
    ) -> dict[str, Any]:
        return request_body(self.model, messages, settings, max_tokens=self.max_tokens)

    def _endpoint(self) -> Callable[..., Any]:
        return self._client.messages.create  # type: ignore[no-any-return]

    def _response(self, answer: Any) -> ModelResponse:
        return to_response(answer, self.name)


class AnthropicModel(_AnthropicBase, SyncClientModel):
    """A synchronous Claude model. ``client=`` takes a configured ``anthropic.Anthropic``."""

    client_class = "Anthropic"


class AsyncAnthropicModel(_AnthropicBase, AsyncClientModel):
    """The async twin of :class:`AnthropicModel`, on ``anthropic.AsyncAnthropic``."""

    client_class = "AsyncAnthropic"
