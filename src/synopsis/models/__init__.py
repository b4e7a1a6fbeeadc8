"""Models: the protocol, ``"provider:model"`` resolution, and provider adapters.

The adapters (``synopsis.models.openai``, ``synopsis.models.anthropic``) are imported on
first use, so neither SDK is loaded unless it is needed.
"""

from typing import Any

from synopsis.models._base import AsyncModel, Model, ModelResponse, ModelSettings, Usage
from synopsis.models._resolve import resolve_model

__all__ = [
    "AnthropicModel",
    "AsyncAnthropicModel",
    "AsyncModel",
    "AsyncOpenAIModel",
    "Model",
    "ModelResponse",
    "ModelSettings",
    "OpenAIModel",
    "Usage",
    "resolve_model",
]

_LAZY = {
    "OpenAIModel": "synopsis.models.openai",
    "AsyncOpenAIModel": "synopsis.models.openai",
    "AnthropicModel": "synopsis.models.anthropic",
    "AsyncAnthropicModel": "synopsis.models.anthropic",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'synopsis.models' has no attribute {name!r}")
