"""Turn what a user wrote into a model: ``"provider:model"`` strings, objects or callables.

Accepted specs:

- ``"openai:gpt-4o-mini"``: :class:`~synopsis.models.openai.OpenAIModel` (options such as
  ``base_url=``, ``api_key=``, ``timeout=`` are passed on);
- ``"anthropic:claude-sonnet-4-5"``: :class:`~synopsis.models.anthropic.AnthropicModel`;
- ``"openai-compatible:MODEL@http://host:port/v1"``: any OpenAI-compatible endpoint (vLLM,
  llama.cpp, LM Studio, ...), split at the last ``@`` that starts a URL (so a model id may hold
  ``@``). Credentials in the URL never reach the model's name or any message: a lone secret
  (``https://KEY@host/v1``) is the API key, ``user:password@`` becomes HTTP basic auth. The API
  key otherwise defaults to ``OPENAI_API_KEY`` or a placeholder, since local servers usually
  ignore it;
- ``"ollama:MODEL"``: the same against Ollama's default ``http://localhost:11434/v1``;
- ``"litellm:MODEL"``: :class:`~synopsis.models.litellm.LiteLLMModel`, any provider LiteLLM
  speaks (``"litellm:bedrock/anthropic.claude-3-5-haiku-20241022-v1:0"``);
- ``"extractive"``: the offline extractive summarizer (no model at all);
- an object with ``name`` and ``complete`` (a :class:`Model` / :class:`AsyncModel`): as is;
- a LangChain chat model: asked with LangChain messages, its answer's text taken;
- a Pydantic AI model (any ``pydantic_ai.models.Model``): driven through Pydantic AI's direct
  API with no tools (:mod:`synopsis.models.pydantic_ai`); an ``Agent`` is refused with the
  advice to pass its model;
- a plain callable ``fn(messages) -> str`` (or async): wrapped into a model.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, overload

from synopsis.errors import ConfigError
from synopsis.models._base import AsyncModel, Model, ModelResponse, ModelSettings
from synopsis.models._urls import parse_endpoint, redact_spec, redact_url, split_model_url

__all__ = [
    "KNOWN_PROVIDERS",
    "AsyncCallableModel",
    "CallableModel",
    "redact_spec",
    "redact_url",
    "resolve_model",
]

KNOWN_PROVIDERS = ("anthropic", "extractive", "ollama", "openai", "openai-compatible", "litellm")
_OLLAMA_URL = "http://localhost:11434/v1"
_PLACEHOLDER_KEY = "not-needed"

ModelFunction = Callable[[list[dict[str, Any]]], Any]
ModelSpec = str | Model | AsyncModel | ModelFunction


def _as_response(value: Any, name: str) -> ModelResponse:
    if isinstance(value, ModelResponse):
        return value
    if isinstance(value, str):
        return ModelResponse(message={"role": "assistant", "content": value}, model=name)
    if isinstance(value, Mapping):
        return ModelResponse(message={"role": "assistant", **dict(value)}, model=name)
    raise ConfigError(
        f"model function {name} returned {type(value).__name__}; return a str, a message "
        "dict or a ModelResponse"
    )


def _function_name(fn: Callable[..., Any]) -> str:
    return f"function:{getattr(fn, '__name__', type(fn).__name__)}"


class CallableModel:
    """A :class:`Model` made from ``fn(messages) -> str | dict | ModelResponse``."""

    def __init__(self, fn: ModelFunction, *, name: str | None = None) -> None:
        self.fn = fn
        self._name = name or _function_name(fn)

    @property
    def name(self) -> str:
        return self._name

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        return _as_response(self.fn([dict(m) for m in messages]), self._name)


class AsyncCallableModel:
    """An :class:`AsyncModel` made from a sync or async function of the messages."""

    def __init__(
        self, fn: Callable[[list[dict[str, Any]]], Awaitable[Any] | Any], *, name: str | None = None
    ) -> None:
        self.fn = fn
        self._name = name or _function_name(fn)

    @property
    def name(self) -> str:
        return self._name

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        value = self.fn([dict(m) for m in messages])
        if inspect.isawaitable(value):
            value = await value
        return _as_response(value, self._name)


@overload
def resolve_model(spec: ModelSpec, *, async_: Literal[False] = False, **options: Any) -> Model: ...
@overload
def resolve_model(spec: ModelSpec, *, async_: Literal[True], **options: Any) -> AsyncModel: ...
def resolve_model(spec: ModelSpec, *, async_: bool = False, **options: Any) -> Model | AsyncModel:
    """A sync (or, with ``async_=True``, async) model for ``spec``; see the module docstring.

    ``options`` go to the provider class (``base_url``, ``api_key``, ``timeout``,
    ``context_window``, ``max_tokens`` for Anthropic, ...).
    """
    if isinstance(spec, str):
        return _from_string(spec, async_, options)
    if _is_model(spec):
        _check_flavour(spec, async_)
        return spec  # type: ignore[return-value]
    if _is_pydantic_ai(spec, "pydantic_ai.models", "Model"):
        return _load("synopsis.models.pydantic_ai", "PydanticAIModel", async_)(spec, **options)  # type: ignore[no-any-return]
    if _is_pydantic_ai(spec, "pydantic_ai.agent", "AbstractAgent"):
        raise ConfigError(
            "a Pydantic AI Agent cannot be the summarizer (its tools and instructions would "
            "run too); pass its model instead, e.g. model=agent.model or an OpenAIChatModel"
        )
    if _is_langchain_chat_model(spec):
        options.setdefault("name", f"langchain:{type(spec).__name__}")
        spec = _langchain_callable(spec, async_)
    if callable(spec):
        return AsyncCallableModel(spec, **options) if async_ else _sync_callable(spec, options)
    raise ConfigError(
        f"cannot use {type(spec).__name__} as a model; pass 'provider:model', a model object "
        "or a function of the messages"
    )


def _is_pydantic_ai(spec: object, module: str, name: str) -> bool:
    """An instance of Pydantic AI's ``module.name``; never imports Pydantic AI (a user who
    holds one has imported it)."""
    loaded = sys.modules.get(module)
    kind = getattr(loaded, name, None)
    return isinstance(kind, type) and isinstance(spec, kind)


def _is_langchain_chat_model(spec: object) -> bool:
    """A LangChain chat model (any ``BaseChatModel``: ``invoke`` and ``ainvoke`` of messages)."""
    return all(callable(getattr(spec, name, None)) for name in ("invoke", "ainvoke", "batch"))


def _langchain_callable(model: Any, async_: bool) -> Any:
    """A function of our messages that asks a LangChain chat model and returns its text."""
    from synopsis.convert import to_langchain

    def text(answer: Any) -> str:
        return str(getattr(answer, "text", None) or getattr(answer, "content", "") or "")

    if async_:

        async def ask_async(messages: Any) -> str:
            return text(await model.ainvoke(to_langchain(messages, keep_extras=False)))

        return ask_async

    def ask(messages: Any) -> str:
        return text(model.invoke(to_langchain(messages, keep_extras=False)))

    return ask


def _is_model(spec: object) -> bool:
    return callable(getattr(spec, "complete", None)) and hasattr(spec, "name")


def _check_flavour(model: object, async_: bool) -> None:
    is_async = inspect.iscoroutinefunction(getattr(model, "complete", None))
    if is_async != async_:
        wanted, got = ("an async", "a sync") if async_ else ("a sync", "an async")
        raise ConfigError(
            f"{wanted} model is needed here but {getattr(model, 'name', model)!r} is {got} one; "
            "use the matching twin (e.g. AsyncOpenAIModel) or the other API"
        )


def _sync_callable(fn: ModelFunction, options: dict[str, Any]) -> CallableModel:
    if inspect.iscoroutinefunction(fn):
        raise ConfigError("an async function cannot be a sync model; use the async API")
    return CallableModel(fn, **options)


def _from_string(spec: str, async_: bool, options: dict[str, Any]) -> Model | AsyncModel:
    provider, _, rest = spec.strip().partition(":")
    provider = provider.lower()
    if provider == "extractive" and not rest:
        return _load("synopsis.models.extractive", "ExtractiveModel", async_)(**options)  # type: ignore[no-any-return]
    if provider not in KNOWN_PROVIDERS or not rest:
        raise ConfigError(
            f"unknown model {redact_spec(spec)!r}: write 'provider:model' with provider one of "
            f"{', '.join(KNOWN_PROVIDERS)} (e.g. 'openai:gpt-4o-mini'), or pass a model object"
        )
    if provider == "anthropic":
        return _load("synopsis.models.anthropic", "AnthropicModel", async_)(rest, **options)  # type: ignore[no-any-return]
    if provider == "openai":
        return _openai(rest, async_, options)
    if provider == "litellm":
        return _load("synopsis.models.litellm", "LiteLLMModel", async_)(rest, **options)  # type: ignore[no-any-return]
    return _openai_compatible(provider, rest, async_, options)


def _openai_compatible(
    provider: str, rest: str, async_: bool, options: dict[str, Any]
) -> Model | AsyncModel:
    if provider == "ollama":
        model, url = rest, options.pop("base_url", None) or _OLLAMA_URL
    else:
        model, url = split_model_url(rest)
    endpoint = parse_endpoint(url)
    if endpoint.api_key is not None:
        options.setdefault("api_key", endpoint.api_key)
    if endpoint.headers():
        options["headers"] = {**endpoint.headers(), **(options.get("headers") or {})}
    # Reading the environment is fine here: this is the edge where configuration enters.
    options.setdefault("api_key", os.environ.get("OPENAI_API_KEY") or _PLACEHOLDER_KEY)
    options.setdefault("name", f"{provider}:{model}")
    return _openai(model, async_, {**options, "base_url": endpoint.url})


def _openai(model: str, async_: bool, options: dict[str, Any]) -> Model | AsyncModel:
    return _load("synopsis.models.openai", "OpenAIModel", async_)(model, **options)  # type: ignore[no-any-return]


def _load(module: str, name: str, async_: bool) -> Any:
    """Import ``module`` only now, so that a missing optional SDK costs nothing until used."""
    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"{module} is not available: {exc}") from exc
    return getattr(loaded, f"Async{name}" if async_ else name)
