"""Which errors of a model call are transient: worth the same request again after a pause.

Our provider models already raise :mod:`synopsis.errors` (:class:`TransientModelError` for a
timeout, a lost connection, 429 and 5xx; :class:`PermanentModelError` for other 4xx). A
summarizer may also be a LangChain chat model, a Pydantic AI model or a plain function,
which raise their SDK's own errors; :func:`is_transient` classifies those the same way,
without importing any SDK:

- Python's ``TimeoutError`` and ``ConnectionError`` (``asyncio`` timeouts included);
- an HTTP status on the error (``status_code``, or ``response.status_code``, as the
  OpenAI, Anthropic, LiteLLM, httpx and Pydantic AI errors carry): 408, 409 (a conflict such
  as a busy lock), 429 and every 5xx are transient, as the OpenAI SDK's own retry has them;
  any other status is not;
- by class name, for errors without a status: a timeout or a failed connection of
  httpx, requests, the OpenAI / Anthropic SDKs or LiteLLM (``APITimeoutError``,
  ``APIConnectionError``, ``TimeoutException``, ``ConnectError``, ``Timeout``, ...).

Everything else is permanent: a bad request, an authentication failure, a validation error,
our :class:`~synopsis.errors.ContextLengthExceeded` and :class:`~synopsis.errors.ConfigError`,
or a bug (``KeyError``, ``AssertionError``): repeating the request cannot fix it.
"""

from __future__ import annotations

from typing import Final

from synopsis.errors import ModelError, TransientModelError

__all__ = ["TRANSIENT_STATUSES", "is_transient", "status_of"]

#: HTTP statuses worth retrying below 500 (every 5xx is).
TRANSIENT_STATUSES: Final = frozenset({408, 409, 429})

#: Exception classes (by name, anywhere in the class's MRO) that mean a timeout or a failed
#: connection in the SDKs a summarizer may use.
_TRANSIENT_NAMES: Final = frozenset(
    {
        "APITimeoutError",  # openai, anthropic
        "APIConnectionError",  # openai, anthropic, litellm
        "TimeoutException",  # httpx (ConnectTimeout, ReadTimeout, PoolTimeout, ...)
        "NetworkError",  # httpx (ConnectError, ReadError, ...)
        "RemoteProtocolError",  # httpx: the server closed the connection mid-answer
        "ConnectError",  # httpx
        "ConnectionError",  # requests (not the built-in one)
        "Timeout",  # requests, litellm
        "ServerDisconnectedError",  # aiohttp
        "ClientConnectionError",  # aiohttp
    }
)


def status_of(error: BaseException) -> int | None:
    """The HTTP status an SDK error carries (``status_code`` or ``response.status_code``)."""
    for holder in (error, getattr(error, "response", None)):
        status = getattr(holder, "status_code", None)
        if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
            return status
    return None


def is_transient(error: BaseException) -> bool:
    """True when ``error`` is worth retrying as it is (see the module docstring)."""
    if isinstance(error, TransientModelError):
        return True
    if isinstance(error, ModelError):  # ours are already classified
        return False
    if isinstance(error, TimeoutError | ConnectionError):
        return True
    status = status_of(error)
    if status is not None:
        return status >= 500 or status in TRANSIENT_STATUSES
    return any(kind.__name__ in _TRANSIENT_NAMES for kind in type(error).__mro__)
