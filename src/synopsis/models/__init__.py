"""Models: the protocol, ``"provider:model"`` resolution, and provider adapters.

The adapters (``synopsis.models.openai``, ``synopsis.models.anthropic``,
``synopsis.models.litellm``) are imported on first use, so no SDK is loaded unless it is
needed. :mod:`synopsis.models.limits` knows the context windows of the common model families.
"""

import typing as _typing

from synopsis._lazy import exports as _exports

if _typing.TYPE_CHECKING:
    from synopsis.models._base import AsyncModel, Model, ModelResponse, ModelSettings, Usage
    from synopsis.models._resolve import redact_spec, redact_url, resolve_model
    from synopsis.models.anthropic import AnthropicModel, AsyncAnthropicModel
    from synopsis.models.litellm import AsyncLiteLLMModel, LiteLLMModel
    from synopsis.models.openai import AsyncOpenAIModel, OpenAIModel

__all__ = [
    "AnthropicModel",
    "AsyncAnthropicModel",
    "AsyncLiteLLMModel",
    "AsyncModel",
    "AsyncOpenAIModel",
    "LiteLLMModel",
    "Model",
    "ModelResponse",
    "ModelSettings",
    "OpenAIModel",
    "Usage",
    "redact_spec",
    "redact_url",
    "resolve_model",
]

_EXPORTS = {
    "synopsis.models._base": ("AsyncModel", "Model", "ModelResponse", "ModelSettings", "Usage"),
    "synopsis.models._resolve": ("redact_spec", "redact_url", "resolve_model"),
    "synopsis.models.openai": ("AsyncOpenAIModel", "OpenAIModel"),
    "synopsis.models.anthropic": ("AnthropicModel", "AsyncAnthropicModel"),
    "synopsis.models.litellm": ("AsyncLiteLLMModel", "LiteLLMModel"),
}

# Each name is imported the first time it is read (PEP 562; see synopsis._lazy): the provider
# adapters, and so their SDKs, only when used.
__getattr__, __dir__ = _exports(__name__, _EXPORTS)
