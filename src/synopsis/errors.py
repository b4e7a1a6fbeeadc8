"""The exception tree, grouped by what the caller does next.

::

    SynopsisError
    ├── ConfigError                 a programming or configuration mistake; never retried
    │   └── UpstreamNotConfigured   the service's proxy has no upstream to forward to
    ├── InvalidInput                bad messages, transcripts or arguments (also ValueError)
    │   ├── InvalidMessage          one message is wrong; .index and .field say where
    │   └── SessionConflict         the service's session id is taken by another user
    ├── Unauthorized                the service got no API key, or an unknown or revoked one
    ├── ModelError                  a model call failed; .model
    │   ├── TransientModelError     worth retrying
    │   │   ├── RateLimited         .retry_after seconds, when the provider said
    │   │   ├── ModelTimeout
    │   │   └── ProviderUnavailable 5xx, connection reset, ...
    │   ├── ContextLengthExceeded   the request does not fit the model's window
    │   ├── PermanentModelError     4xx other than the above; .status_code
    │   ├── InvalidSummary          the model answered, but not with a usable summary (retried)
    │   ├── RetryExhausted          .attempts, .last_error
    │   ├── AllModelsFailed         every model of a failover chain failed (also an ExceptionGroup)
    │   └── CoolingDown             calls refused for .retry_in seconds after repeated failures
    ├── CompactionError             compaction could not produce a valid history
    └── StoreError                  a memory or summary store failed
        ├── InvalidNamespace        (also ValueError)
        ├── TenantMismatch          a caller tried to reach another tenant's data
        ├── NotFound                (also KeyError)
        ├── MigrationError
        └── UserDeleted             a write lost to delete_user; nothing was written

The service (``synopsis serve``) answers each with the HTTP status that
:mod:`synopsis.server.errors` maps it to, and its JSON body names the class.

Third-party exceptions (openai, anthropic, httpx, psycopg, sqlite3) are translated only where
they are raised, with ``raise ... from exc``; nothing above those seams sees them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "AllModelsFailed",
    "CompactionError",
    "ConfigError",
    "ContextLengthExceeded",
    "CoolingDown",
    "InvalidInput",
    "InvalidMessage",
    "InvalidNamespace",
    "InvalidSummary",
    "MigrationError",
    "ModelError",
    "ModelTimeout",
    "NotFound",
    "PermanentModelError",
    "ProviderUnavailable",
    "RateLimited",
    "RetryExhausted",
    "SessionConflict",
    "StoreError",
    "SynopsisError",
    "TenantMismatch",
    "TransientModelError",
    "Unauthorized",
    "UpstreamNotConfigured",
    "UserDeleted",
]


class SynopsisError(Exception):
    """Root of every error synopsis raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # The message and the attributes, without calling __init__ again: several errors take
        # keyword-only attributes or build their message, which the default reduction (the
        # class called with ``args``) cannot reproduce, so a pickled one could not be loaded.
        return _restored, (type(self), self.args, vars(self))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable description: type, message and structured attributes."""
        data: dict[str, Any] = {"type": type(self).__name__, "message": str(self)}
        for name, value in vars(self).items():
            if name.startswith("_") or name in {"args", "exceptions"}:
                continue
            if isinstance(value, BaseException):
                data[name] = _exception_dict(value)
            elif isinstance(value, str | int | float | bool) or value is None:
                data[name] = value
            elif isinstance(value, tuple | list):
                data[name] = [str(item) for item in value]
        return data


def _restored(cls: type[SynopsisError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


def _exception_dict(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, SynopsisError):
        return exc.to_dict()
    return {"type": type(exc).__name__, "message": str(exc)}


def describe_error(exc: BaseException) -> dict[str, Any]:
    """A JSON-serializable description of any exception (ours in detail, others by type)."""
    return _exception_dict(exc)


class ConfigError(SynopsisError, ValueError):
    """An option or combination of options that cannot work; fix the code or config."""


class InvalidInput(SynopsisError, ValueError):
    """Input data (messages, transcripts, arguments) is malformed.

    ``index`` is the position of the offending entry when a batch was checked, else None.
    """

    index: int | None = None


class UpstreamNotConfigured(ConfigError):
    """The service's proxy has no upstream to forward to (HTTP 503)."""


class Unauthorized(SynopsisError):
    """The service got no API key, or one that is unknown or revoked (HTTP 401)."""


class InvalidMessage(InvalidInput):
    """One message is malformed; ``index`` is its position and ``field`` the offending key."""

    def __init__(self, message: str, *, index: int | None = None, field: str | None = None):
        where = f"message {index}" if index is not None else "message"
        if field:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")
        self.index = index
        self.field = field
        self.reason = message


class SessionConflict(InvalidInput):
    """The session id is taken by another user of the same tenant, or a concurrent write to
    the same rows conflicted and the request may be retried (HTTP 409)."""


class ModelError(SynopsisError):
    """A call to a language model failed."""

    def __init__(self, message: str, *, model: str | None = None):
        super().__init__(message)
        self.model = model


class TransientModelError(ModelError):
    """A failure that may go away if the same call is repeated."""


class RateLimited(TransientModelError):
    """The provider asked us to slow down; ``retry_after`` is its hint in seconds, if any."""

    def __init__(self, message: str, *, model: str | None = None, retry_after: float | None = None):
        super().__init__(message, model=model)
        self.retry_after = retry_after


class ModelTimeout(TransientModelError):
    """The call took longer than its timeout."""


class ProviderUnavailable(TransientModelError):
    """The provider failed on its side (5xx, connection error); ``status_code`` if known."""

    def __init__(self, message: str, *, model: str | None = None, status_code: int | None = None):
        super().__init__(message, model=model)
        self.status_code = status_code


class ContextLengthExceeded(ModelError):
    """The request is larger than the model's context window. Compacting may help."""


class PermanentModelError(ModelError):
    """A failure that repeating the same call will not fix (bad request, auth, not found)."""

    def __init__(self, message: str, *, model: str | None = None, status_code: int | None = None):
        super().__init__(message, model=model)
        self.status_code = status_code


class InvalidSummary(ModelError):
    """The model answered, but not with a usable summary (empty, tool calls, ...). Retried."""


class RetryExhausted(ModelError):
    """Every attempt on one model failed; ``last_error`` is the final failure."""

    def __init__(self, *, model: str | None, attempts: int, last_error: BaseException):
        super().__init__(
            f"{model or 'model'} failed after {attempts} attempt(s): {last_error}", model=model
        )
        self.attempts = attempts
        self.last_error = last_error


class AllModelsFailed(ModelError, ExceptionGroup[Exception]):
    """Every model of a failover chain failed. ``except*`` splits it by cause."""

    def __new__(cls, message: str, errors: Sequence[Exception]) -> AllModelsFailed:
        return super().__new__(cls, message, list(errors))

    def __init__(self, message: str, errors: Sequence[Exception]):
        ExceptionGroup.__init__(self, message, list(errors))
        self.model = None
        self.models = tuple(getattr(e, "model", None) or "?" for e in errors)

    def derive(self, excs: Sequence[Exception]) -> AllModelsFailed:  # type: ignore[override]
        return AllModelsFailed(self.message, excs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "AllModelsFailed",
            "message": self.message,
            "models": list(self.models),
            "errors": [_exception_dict(e) for e in self.exceptions],
        }


class CompactionError(SynopsisError):
    """Compaction could not produce a valid history; the original is left untouched."""


class StoreError(SynopsisError):
    """A memory or summary store failed."""


class InvalidNamespace(StoreError, ValueError):
    """A namespace is empty, has an empty or non-string label, or is otherwise unusable.

    ``index`` is the position of the offending entry when a batch was checked, else None.
    """

    index: int | None = None


class TenantMismatch(StoreError, PermissionError):
    """A request tried to read or write data of a tenant it does not belong to."""


class NotFound(StoreError, KeyError):
    """The addressed item does not exist (or is not visible to this tenant)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


class MigrationError(StoreError):
    """The database schema could not be brought to the version this code needs."""


class UserDeleted(StoreError):
    """A write lost to ``delete_user``: the user's deletion generation is no longer the one
    the write was made with. Nothing was written."""

    def __init__(self, tenant: str, user_id: str, *, expected: int, current: int) -> None:
        super().__init__(
            f"user {user_id!r} was deleted meanwhile (generation {current}, not {expected})"
        )
        self.tenant = tenant
        self.user_id = user_id
        self.expected = expected
        self.current = current


class CoolingDown(ModelError):
    """Calls are refused for ``retry_in`` more seconds after repeated complete failures.

    Not transient on purpose: retrying inside the cooldown is exactly the storm it prevents.
    """

    def __init__(self, message: str, *, retry_in: float):
        super().__init__(message)
        self.retry_in = retry_in
