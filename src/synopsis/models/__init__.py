"""Models: the protocol, ``"provider:model"`` resolution, and provider adapters.

The adapters (``synopsis.models.openai``, ``synopsis.models.anthropic``,
``synopsis.models.litellm``) are imported on first use, so no SDK is loaded unless it is
needed. :mod:`synopsis.models.limits` knows the context windows of the common model families.
"""

from typing import Any

from synopsis.models._base import AsyncModel, Model, ModelResponse, ModelSettings, Usage
from synopsis.models._resolve import redact_spec, redact_url, resolve_model

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

_LAZY = {
    "OpenAIModel": "synopsis.models.openai",
    "AsyncOpenAIModel": "synopsis.models.openai",
    "AnthropicModel": "synopsis.models.anthropic",
    "AsyncAnthropicModel": "synopsis.models.anthropic",
    "LiteLLMModel": "synopsis.models.litellm",
    "AsyncLiteLLMModel": "synopsis.models.litellm",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'synopsis.models' has no attribute {name!r}")
