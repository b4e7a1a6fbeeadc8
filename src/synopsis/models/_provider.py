"""What the provider adapters share, so that each model class only holds its SDK call.

Both official SDKs (``openai``, ``anthropic``) are generated from the same template: a client
taking ``base_url`` / ``api_key`` / ``timeout`` / ``max_retries``, ``with_options``, and the
exception classes ``APITimeoutError``, ``APIConnectionError`` and ``APIStatusError``. This
module holds the one copy of what follows from that: the client options (SDK retries off, so
:mod:`synopsis.models.retry` is the only retry layer), the per-call settings of a request body,
the translation of SDK errors into :mod:`synopsis.errors`, and :class:`ProviderModel`, the base
of the provider classes (client ownership, name, limits, translation around the call).

Every provider model has a finite request timeout (:data:`DEFAULT_TIMEOUT` unless given), and
knows its context window and output limit (``context_window=`` / ``max_output_tokens=``, or the
table in :mod:`synopsis.models.limits`), which the summarizer fits its requests into.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence, Set
from contextlib import contextmanager
from typing import Any, ClassVar, Final, TypedDict

from synopsis.errors import (
    ConfigError,
    ModelError,
    ModelTimeout,
    PermanentModelError,
    ProviderUnavailable,
)
from synopsis.models._base import ModelResponse, ModelSettings
from synopsis.models._http import error_for_status
from synopsis.models._urls import redact_url
from synopsis.models.limits import limits_for

__all__ = [
    "DEFAULT_TIMEOUT",
    "AsyncClientModel",
    "ClientKeywords",
    "ConnectionKeywords",
    "ProviderModel",
    "SyncClientModel",
    "client_options",
    "import_sdk",
    "settings_body",
    "translate_sdk_error",
]

#: Seconds a provider call may take when no ``timeout`` is given: a summary of a long history
#: can take a minute, a hung connection must not hang the agent.
DEFAULT_TIMEOUT: Final = 120.0


def import_sdk(module: str, provider: str) -> Any:
    """The SDK module, imported only now: a missing optional SDK costs nothing until used."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - the dev environment has both SDKs
        raise ConfigError(
            f"the {provider} models need the {module} SDK: pip install 'synopsis[{module}]'"
        ) from exc


def client_options(
    base_url: str | None,
    api_key: str | None,
    timeout: float | None,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """SDK client options: only what was given, so the SDK reads its environment variables.
    The timeout is always finite and SDK retries are always off."""
    options: dict[str, Any] = {"timeout": finite_timeout(timeout), "max_retries": 0}
    if base_url is not None:
        options["base_url"] = base_url
    if api_key is not None:
        options["api_key"] = api_key
    if headers:
        options["default_headers"] = dict(headers)
    return options


def finite_timeout(timeout: float | None) -> float:
    """``timeout`` seconds, :data:`DEFAULT_TIMEOUT` for None; ConfigError unless positive."""
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def settings_body(
    body: dict[str, Any], settings: ModelSettings | None, *, forbidden: Set[str]
) -> dict[str, Any]:
    """``body`` with the call's settings; ``extra`` keys in ``forbidden`` are dropped."""
    if settings is None:
        return body
    body.update(settings.given())
    extra = {k: v for k, v in settings.extra.items() if k not in forbidden}
    if extra:
        body["extra_body"] = extra
    return body


def translate_sdk_error(
    exc: Exception, name: str, sdk: Any, *, code: str | None = None
) -> ModelError:
    """Our error for an exception an SDK raised (``sdk`` is the SDK module)."""
    if isinstance(exc, sdk.APITimeoutError):
        return ModelTimeout(f"{name}: request timed out", model=name)
    if isinstance(exc, sdk.APIConnectionError):
        return ProviderUnavailable(f"{name}: connection failed: {redact_url(str(exc))}", model=name)
    if isinstance(exc, sdk.APIStatusError):
        return error_for_status(
            exc.status_code,
            redact_url(str(getattr(exc, "message", exc))),
            model=name,
            headers=exc.response.headers,
            code=code,
        )
    return PermanentModelError(f"{name}: {redact_url(str(exc))}", model=name)


class ConnectionKeywords(TypedDict, total=False):
    """The keyword options of every provider model (see :class:`ProviderModel`): a provider
    class that takes one more option passes these on with ``**options``."""

    base_url: str | None
    api_key: str | None
    timeout: float | None
    context_window: int | None
    max_output_tokens: int | None
    name: str | None
    headers: Mapping[str, str] | None


class ClientKeywords(ConnectionKeywords, total=False):
    """:class:`ConnectionKeywords` and ``client``: a configured SDK client to use."""

    client: Any


class ProviderModel:
    """The shared part of a provider model: its id, name, limits and SDK client.

    A provider's base names it and its SDK (``provider``, ``example``, ``key_variable``,
    ``sdk_module``, ``sdk_error``), says how to translate its errors (``_translate``), how to
    build a request (``_body``), which SDK function takes it (``_endpoint``) and how to read
    the answer (``_response``); each sync or async class then names its ``client_class`` and
    takes ``complete`` and ``close`` or ``aclose`` from :class:`SyncClientModel` /
    :class:`AsyncClientModel`: one SDK call inside :meth:`_translated`.
    """

    provider: ClassVar[str]
    example: ClassVar[str]
    key_variable: ClassVar[str]
    sdk_module: ClassVar[str]
    sdk_error: ClassVar[str]
    client_class: ClassVar[str]

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not model:
            raise ConfigError(f"an {self.provider} model needs a model id, e.g. {self.example!r}")
        self.model = model
        known = limits_for(model)
        self.context_window = _positive("context_window", context_window) or known.window
        self.max_output_tokens = (
            _positive("max_output_tokens", max_output_tokens) or known.max_output
        )
        self._name = name or f"{self.provider.lower()}:{model}"
        self._owns_client = client is None
        if client is None:
            options = client_options(base_url, api_key, timeout, headers)
            self._client = self._make_client(options)
        else:
            self._client = client.with_options(max_retries=0)

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r})"

    def _sdk(self) -> Any:
        return import_sdk(self.sdk_module, self.provider)

    def _translate(self, exc: Exception) -> ModelError:
        """Our error for an exception of the SDK."""
        raise NotImplementedError

    def _body(
        self, messages: Sequence[Mapping[str, Any]], settings: ModelSettings | None
    ) -> dict[str, Any]:
        """The keyword arguments of one call of :meth:`_endpoint`."""
        raise NotImplementedError

    def _endpoint(self) -> Callable[..., Any]:
        """The SDK function one completion calls (its async twin's on an async model)."""
        raise NotImplementedError

    def _response(self, answer: Any) -> ModelResponse:
        """Our :class:`ModelResponse` from what :meth:`_endpoint` returned."""
        raise NotImplementedError

    def _make_client(self, options: dict[str, Any]) -> Any:
        sdk = self._sdk()
        try:
            return getattr(sdk, self.client_class)(**options)
        except getattr(sdk, self.sdk_error) as exc:
            raise ConfigError(
                f"cannot create the {self.provider} client ({exc}); "
                f"pass api_key=... or set {self.key_variable}"
            ) from exc

    def _translated_types(self) -> type[BaseException] | tuple[type[BaseException], ...]:
        """The exceptions of the SDK that :meth:`_translate` turns into ours."""
        return getattr(self._sdk(), self.sdk_error)  # type: ignore[no-any-return]

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Around an SDK call: its exceptions come out as :mod:`synopsis.errors`."""
        try:
            yield
        except self._translated_types() as exc:
            raise self._translate(exc) from exc  # type: ignore[arg-type]


def _positive(option: str, value: int | None) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{option} must be a positive integer or None, got {value!r}")
    return value


class SyncClientModel(ProviderModel):
    """A provider model on a synchronous SDK client."""

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        """One call of the provider's API; SDK errors come out as :mod:`synopsis.errors`."""
        with self._translated():
            answer = self._endpoint()(**self._body(messages, settings))
        return self._response(answer)

    def close(self) -> None:
        """Close the HTTP client if this model created it."""
        if self._owns_client:
            self._client.close()


class AsyncClientModel(ProviderModel):
    """A provider model on an async SDK client."""

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        """One call of the provider's API; SDK errors come out as :mod:`synopsis.errors`."""
        with self._translated():
            answer = await self._endpoint()(**self._body(messages, settings))
        return self._response(answer)

    async def aclose(self) -> None:
        """Close the HTTP client if this model created it."""
        if self._owns_client:
            await self._client.close()
