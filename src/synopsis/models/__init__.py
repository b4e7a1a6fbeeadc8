"""Models: the protocol, provider adapters and ``"provider:model"`` resolution."""

from synopsis.models._base import AsyncModel, Model, ModelResponse, ModelSettings, Usage

__all__ = ["AsyncModel", "Model", "ModelResponse", "ModelSettings", "Usage"]
