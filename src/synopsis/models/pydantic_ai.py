"""Any Pydantic AI model as a synopsis model: the summarizer can be a ``pydantic_ai.models.Model``.

:func:`~synopsis.models.resolve_model` wraps a ``pydantic_ai.models.Model`` instance (an
``OpenAIChatModel``, ``AnthropicModel``, ``FunctionModel``, ``TestModel``, ...) in
:class:`PydanticAIModel` or :class:`AsyncPydanticAIModel`. A request goes through Pydantic
AI's own direct API (``pydantic_ai.direct.model_request``): our messages converted by
:func:`synopsis.convert.to_pydantic_ai`, no tools offered, the call's ``max_tokens``,
``temperature`` and ``timeout`` as Pydantic AI model settings; the window and output limit
are those :mod:`synopsis.models.limits` knows for the model's name. The answer comes back as our
assistant message (its tool calls too, which the summarizer refuses as an invalid summary)
with the usage Pydantic AI reported. Errors are left as Pydantic AI raised them; the retry
layer classifies them (:mod:`synopsis.models.transient`: a ``ModelHTTPError`` carries its
``status_code``).

This module imports Pydantic AI, so it is loaded only when such a model is given (the
``pydantic-ai`` extra).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic_ai.direct import model_request, model_request_sync
from pydantic_ai.messages import ModelResponse as PydanticResponse
from pydantic_ai.models import Model as PydanticModel
from pydantic_ai.settings import ModelSettings as PydanticSettings

from synopsis.convert.pydantic_ai import from_pydantic_ai, to_pydantic_ai
from synopsis.models._base import ModelResponse, ModelSettings, Usage
from synopsis.models.limits import limits_for

__all__ = ["AsyncPydanticAIModel", "PydanticAIModel"]


class _Wrapped:
    """What both twins share: the wrapped model, its name, the request and the answer."""

    def __init__(self, model: PydanticModel, *, name: str | None = None) -> None:
        self.model = model
        self._name = name or f"pydantic-ai:{model.model_name}"
        known = limits_for(model.model_name)  # what the summarizer fits its requests into
        self.context_window, self.max_output_tokens = known.window, known.max_output

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r})"

    def _request(
        self, messages: Sequence[Mapping[str, Any]], settings: ModelSettings | None
    ) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": to_pydantic_ai(messages, keep_extras=False),
            "model_settings": _settings(settings),
        }

    def _answer(self, response: PydanticResponse) -> ModelResponse:
        [message] = from_pydantic_ai([response])
        usage = response.usage
        prompt, completion = usage.input_tokens or 0, usage.output_tokens or 0
        reported = Usage(prompt, completion, prompt + completion) if prompt or completion else None
        return ModelResponse(message=message, model=self._name, usage=reported)


class PydanticAIModel(_Wrapped):
    """A synchronous synopsis model over a Pydantic AI model (``model_request_sync``, which
    runs on the calling thread's event loop: call it where no loop is running, as a sync agent
    or a worker thread does)."""

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        return self._answer(model_request_sync(**self._request(messages, settings)))


class AsyncPydanticAIModel(_Wrapped):
    """The async twin of :class:`PydanticAIModel` (``model_request``)."""

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        return self._answer(await model_request(**self._request(messages, settings)))


def _settings(settings: ModelSettings | None) -> PydanticSettings | None:
    """Our per-call settings as Pydantic AI model settings (None when there are none)."""
    chosen = settings.given() if settings is not None else {}
    return PydanticSettings(**chosen) if chosen else None  # type: ignore[typeddict-item]
