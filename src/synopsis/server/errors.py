"""Errors at the HTTP edge: the library's exception tree as JSON ``{"error": {type, message}}``.

Every error class, the service's own included (:class:`~synopsis.errors.Unauthorized`,
:class:`~synopsis.errors.UpstreamNotConfigured`, :class:`~synopsis.errors.SessionConflict`),
lives in :mod:`synopsis.errors`; this module only maps each to its HTTP status.

Bad input is a 4xx naming the field, never a 500; a 500 says nothing about its cause (it is
logged instead). The status follows what the caller should do next, as the tree does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from synopsis.errors import (
    ConfigError,
    CoolingDown,
    InvalidInput,
    InvalidNamespace,
    MigrationError,
    ModelError,
    ModelTimeout,
    NotFound,
    RateLimited,
    SessionConflict,
    StoreError,
    SynopsisError,
    TenantMismatch,
    Unauthorized,
    UpstreamNotConfigured,
)
from synopsis.server.schemas import ErrorBody

__all__ = ["ERRORS", "error_response", "install", "status_of", "synopsis_error"]

_log = logging.getLogger("synopsis.server")

#: Most specific first: the first class an exception is an instance of decides its status.
_STATUS: Sequence[tuple[type[BaseException], int]] = (
    (Unauthorized, 401),
    (UpstreamNotConfigured, 503),
    (SessionConflict, 409),
    (NotFound, 404),
    (TenantMismatch, 404),  # never say that another tenant's object exists
    (InvalidNamespace, 422),
    (InvalidInput, 422),
    (ConfigError, 422),  # an option of this request that cannot work
    (RateLimited, 429),
    (CoolingDown, 503),
    (ModelTimeout, 504),
    (ModelError, 502),
    (MigrationError, 503),
    (StoreError, 503),
)

#: The error responses every route may give, for the OpenAPI document.
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in (
        (400, "The body could not be read (not UTF-8 JSON)."),
        (401, "No API key, or an unknown or revoked one."),
        (404, "Not found (or another tenant's)."),
        (413, "The request body is larger than the server's limit (named in the answer)."),
        (422, "Invalid input; the message names the field."),
        (503, "The database is unavailable."),
    )
}


def status_of(exc: BaseException) -> int:
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 500


def error_response(
    status: int, kind: str, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    body = {"error": {"type": kind, "message": message, **extra}}
    return JSONResponse(body, status_code=status, headers=headers)


async def synopsis_error(request: Request, exc: Exception) -> JSONResponse:
    """The answer to a library error (the app's handler; the proxy's lean route uses it too)."""
    assert isinstance(exc, SynopsisError)
    status = status_of(exc)
    if status >= 500:
        _log.warning("%s %s failed: %r", request.method, request.url.path, exc)
    detail = exc.to_dict()
    if isinstance(exc, TenantMismatch):
        detail = {"type": "NotFound", "message": "not found"}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, RateLimited) and exc.retry_after is not None:
        headers = {"Retry-After": str(max(int(exc.retry_after), 1))}
    return JSONResponse({"error": detail}, status_code=status, headers=headers)


def _field(location: Sequence[Any]) -> str:
    parts = [str(p) for p in location]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    return ".".join(parts) or "body"


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    field = _field(first.get("loc", ()))
    where = str(first.get("loc", ("body",))[0])
    message = f"{where} field {field!r}: {first.get('msg', 'invalid')}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more)"
    return error_response(422, "InvalidInput", message, field=field)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    kind = {400: "InvalidInput", 404: "NotFound", 405: "MethodNotAllowed"}.get(
        exc.status_code, "HTTPError"
    )
    headers = dict(exc.headers) if exc.headers else None
    return error_response(exc.status_code, kind, str(exc.detail), headers=headers)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    _log.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error_response(500, "InternalError", "internal server error")


def install(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.add_exception_handler(SynopsisError, synopsis_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
