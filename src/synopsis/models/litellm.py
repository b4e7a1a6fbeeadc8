"""Any provider LiteLLM speaks (Bedrock, Vertex, Azure, Groq, Mistral, Ollama, ...) as a model.

An edge like :mod:`synopsis.models.openai`, over ``litellm.completion`` /
``litellm.acompletion``: ``LiteLLMModel("bedrock/anthropic.claude-3-5-haiku-20241022-v1:0")``
or ``"litellm:<model>"`` in a spec. LiteLLM keeps no client, so the connection options
(``base_url`` -> ``api_base``, ``api_key``, ``timeout``, ``headers``) and any further
``completion_options`` (e.g. ``{"aws_region_name": "eu-west-1"}``) go with every call. Its own
retries are off (``num_retries=0``) so :mod:`synopsis.models.retry` is the only retry layer,
and its exceptions are translated here, and only here, into :mod:`synopsis.errors`. Requests
never carry tools, nor our ``usage`` / ``meta`` message keys.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Unpack

from synopsis.errors import (
    ConfigError,
    ContextLengthExceeded,
    ModelError,
    ModelTimeout,
    PermanentModelError,
    ProviderUnavailable,
)
from synopsis.messages import strip_extensions
from synopsis.models._base import ModelResponse, ModelSettings
from synopsis.models._http import error_for_status
from synopsis.models._provider import (
    AsyncClientModel,
    ConnectionKeywords,
    ProviderModel,
    SyncClientModel,
    import_sdk,
    settings_body,
)
from synopsis.models._urls import redact_url
from synopsis.models.openai import to_response

__all__ = ["AsyncLiteLLMModel", "LiteLLMModel"]

#: Keyword arguments a caller may not smuggle in through ``ModelSettings.extra`` or
#: ``completion_options``: no tools, and no way to switch LiteLLM's own retries back on.
_FORBIDDEN = frozenset(
    {"tools", "tool_choice", "functions", "function_call", "messages", "model", "stream"}
    | {"num_retries", "max_retries"}
)


def _sdk() -> Any:
    return import_sdk("litellm", "LiteLLM")


def request_kwargs(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    settings: ModelSettings | None,
    call_options: Mapping[str, Any],
) -> dict[str, Any]:
    """The keyword arguments of ``litellm.completion``: connection options, then the call's
    settings (its ``extra`` keys are LiteLLM keyword arguments too)."""
    body: dict[str, Any] = {
        **call_options,
        "model": model,
        "messages": [strip_extensions(m) for m in messages],
    }
    body = settings_body(body, settings, forbidden=_FORBIDDEN)
    body.update(body.pop("extra_body", {}))
    return body


def translate_error(exc: Exception, name: str) -> ModelError:
    """Our error for an exception LiteLLM raised (its classes subclass the openai SDK's)."""
    errors = _sdk().exceptions
    message = redact_url(str(getattr(exc, "message", None) or exc))
    if isinstance(exc, errors.ContextWindowExceededError):
        return ContextLengthExceeded(f"{name}: {message}", model=name)
    if isinstance(exc, errors.Timeout):
        return ModelTimeout(f"{name}: request timed out", model=name)
    if isinstance(exc, errors.APIConnectionError):
        return ProviderUnavailable(f"{name}: connection failed: {message}", model=name)
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and not isinstance(exc, errors.BudgetExceededError):
        return error_for_status(status, message, model=name, headers=_headers(exc))
    return PermanentModelError(f"{name}: {message}", model=name)


def _headers(exc: Exception) -> Mapping[str, str]:
    """The response headers an exception kept (``Retry-After`` lives there)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if isinstance(headers, Mapping) and headers:
        return headers
    kept = getattr(exc, "litellm_response_headers", None) or getattr(exc, "headers", None)
    return kept if isinstance(kept, Mapping) else {}


class _LiteLLMBase(ProviderModel):
    """A LiteLLM model, sync or async: everything but the call."""

    provider = "LiteLLM"
    example = "anthropic/claude-3-5-haiku-20241022"
    key_variable = "the provider's key variable"
    sdk_module = "litellm"
    sdk_error = "OpenAIError"

    def __init__(
        self,
        model: str,
        *,
        completion_options: Mapping[str, Any] | None = None,
        **options: Unpack[ConnectionKeywords],
    ) -> None:
        given = dict(completion_options or {})
        refused = sorted(set(given) & _FORBIDDEN)
        if refused:
            raise ConfigError(f"completion_options may not set {', '.join(refused)}")
        self._extra_options = given
        # LiteLLM keeps no client: ``client=`` is refused here as it is by the signature.
        super().__init__(model, client=None, **options)

    def _make_client(self, options: dict[str, Any]) -> dict[str, Any]:
        """LiteLLM keeps no client: the "client" is the keyword arguments of every call."""
        # A missing litellm is a ConfigError now, not at the first call. LiteLLM prints a help
        # banner on stdout for every failed call unless told not to, and stdout may carry our
        # CLI's transcript: the errors reach the caller as ours anyway.
        self._sdk().suppress_debug_info = True
        call: dict[str, Any] = {"timeout": options["timeout"], "num_retries": 0}
        renamed = {"base_url": "api_base", "api_key": "api_key", "default_headers": "extra_headers"}
        call.update({ours: options[key] for key, ours in renamed.items() if key in options})
        return {**call, **self._extra_options}

    def _translated_types(self) -> tuple[type[BaseException], ...]:
        # LiteLLM's exceptions subclass the openai SDK's (a dependency of LiteLLM), except a
        # few of its own.
        errors = self._sdk().exceptions
        base = import_sdk("openai", "LiteLLM").OpenAIError
        return (base, errors.OpenAIError, errors.BudgetExceededError)

    def _translate(self, exc: Exception) -> ModelError:
        return translate_error(exc, self.name)

    def _body(
        self, messages: Sequence[Mapping[str, Any]], settings: ModelSettings | None
    ) -> dict[str, Any]:
        return request_kwargs(self.model, messages, settings, self._client)

    def _response(self, answer: Any) -> ModelResponse:
        return to_response(answer, self.name)


class LiteLLMModel(_LiteLLMBase, SyncClientModel):
    """A synchronous model over ``litellm.completion``; see the module docstring."""

    def _endpoint(self) -> Callable[..., Any]:
        return self._sdk().completion  # type: ignore[no-any-return]

    def close(self) -> None:
        """Nothing to close: LiteLLM owns its HTTP clients (here for parity with the others)."""


class AsyncLiteLLMModel(_LiteLLMBase, AsyncClientModel):
    """The async twin of :class:`LiteLLMModel`, over ``litellm.acompletion``."""

    def _endpoint(self) -> Callable[..., Any]:
        return self._sdk().acompletion  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        """Nothing to close: LiteLLM owns its HTTP clients (here for parity with the others)."""
