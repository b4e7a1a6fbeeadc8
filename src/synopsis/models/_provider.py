"""What the provider adapters share, so that each model class only holds its SDK call.

Both official SDKs (``openai``, ``anthropic``) are generated from the same template: a client
taking ``base_url`` / ``api_key`` / ``timeout`` / ``max_retries``, ``with_options``, and the
exception classes ``APITimeoutError``, ``APIConnectionError`` and ``APIStatusError``. This
module holds the one copy of what follows from that: the client options (SDK retries off, so
:mod:`synopsis.models.retry` is the only retry layer), the per-call settings of a request body,
the translation of SDK errors into :mod:`synopsis.errors`, and :class:`ProviderModel`, the base
of the four provider classes (client ownership, name, translation around the call).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Set
from contextlib import contextmanager
from typing import Any, ClassVar

from synopsis.errors import (
    ConfigError,
    ModelError,
    ModelTimeout,
    PermanentModelError,
    ProviderUnavailable,
)
from synopsis.models._base import ModelSettings
from synopsis.models._http import error_for_status

__all__ = [
    "AsyncClientModel",
    "ProviderModel",
    "SyncClientModel",
    "client_options",
    "import_sdk",
    "settings_body",
    "translate_sdk_error",
]


def import_sdk(module: str, provider: str) -> Any:
    """The SDK module, imported only now: a missing optional SDK costs nothing until used."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - the dev environment has both SDKs
        raise ConfigError(
            f"the {provider} models need the {module} SDK: pip install 'synopsis[{module}]'"
        ) from exc


def client_options(base_url: str | None, api_key: str | None, timeout: float) -> dict[str, Any]:
    """SDK client options: only what was given, so the SDK reads its environment variables."""
    options: dict[str, Any] = {"timeout": timeout, "max_retries": 0}
    if base_url is not None:
        options["base_url"] = base_url
    if api_key is not None:
        options["api_key"] = api_key
    return options


def settings_body(
    body: dict[str, Any], settings: ModelSettings | None, *, forbidden: Set[str]
) -> dict[str, Any]:
    """``body`` with the call's settings; ``extra`` keys in ``forbidden`` are dropped."""
    if settings is None:
        return body
    if settings.max_tokens is not None:
        body["max_tokens"] = settings.max_tokens
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.timeout is not None:
        body["timeout"] = settings.timeout
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
        return ProviderUnavailable(f"{name}: connection failed: {exc}", model=name)
    if isinstance(exc, sdk.APIStatusError):
        return error_for_status(
            exc.status_code,
            str(getattr(exc, "message", exc)),
            model=name,
            headers=exc.response.headers,
            code=code,
        )
    return PermanentModelError(f"{name}: {exc}", model=name)


class ProviderModel:
    """The shared part of a provider model: its id, name, window and SDK client.

    A provider's base names it and its SDK (``provider``, ``example``, ``key_variable``,
    ``sdk_module``, ``sdk_error``) and says how to translate its errors (``_translate``); each
    sync or async class then names its ``client_class``, takes ``close`` or ``aclose`` from
    :class:`SyncClientModel` / :class:`AsyncClientModel`, and only adds ``complete``: one SDK
    call inside :meth:`_translated`.
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
        timeout: float = 60.0,
        context_window: int | None = None,
        name: str | None = None,
    ) -> None:
        if not model:
            raise ConfigError(f"an {self.provider} model needs a model id, e.g. {self.example!r}")
        self.model = model
        self.context_window = context_window
        self._name = name or f"{self.provider.lower()}:{model}"
        self._owns_client = client is None
        if client is None:
            self._client = self._make_client(client_options(base_url, api_key, timeout))
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

    def _make_client(self, options: dict[str, Any]) -> Any:
        sdk = self._sdk()
        try:
            return getattr(sdk, self.client_class)(**options)
        except getattr(sdk, self.sdk_error) as exc:
            raise ConfigError(
                f"cannot create the {self.provider} client ({exc}); "
                f"pass api_key=... or set {self.key_variable}"
            ) from exc

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Around an SDK call: its exceptions come out as :mod:`synopsis.errors`."""
        try:
            yield
        except getattr(self._sdk(), self.sdk_error) as exc:
            raise self._translate(exc) from exc


class SyncClientModel(ProviderModel):
    """A provider model on a synchronous SDK client."""

    def close(self) -> None:
        """Close the HTTP client if this model created it."""
        if self._owns_client:
            self._client.close()


class AsyncClientModel(ProviderModel):
    """A provider model on an async SDK client."""

    async def aclose(self) -> None:
        """Close the HTTP client if this model created it."""
        if self._owns_client:
            await self._client.close()
