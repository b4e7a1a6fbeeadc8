"""Provider HTTP errors mapped onto our error tree: the one place status codes are read.

Used by every provider adapter at its seam (``models/openai.py``, ``models/anthropic.py``), so
a 429 is :class:`~synopsis.errors.RateLimited` with the same ``retry_after`` whichever SDK
raised it.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping

from synopsis.errors import (
    ContextLengthExceeded,
    ModelError,
    ModelTimeout,
    PermanentModelError,
    ProviderUnavailable,
    RateLimited,
)

__all__ = ["error_for_status", "looks_like_context_overflow", "parse_retry_after"]


def parse_retry_after(headers: Mapping[str, str], *, now: float) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` or ``Retry-After`` (seconds or date).

    ``now`` is the current Unix time, needed for the HTTP-date form. Unparseable or negative
    hints give ``None``.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = _as_float(lowered.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    seconds = _as_float(raw)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - now, 0.0)


def _as_float(raw: str | None) -> float | None:
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and value >= 0 else None


_CONTEXT_WORDS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input is too long",
)


def looks_like_context_overflow(message: str, code: str | None = None) -> bool:
    """True when a provider's 400 message or code says the request does not fit."""
    text = f"{code or ''} {message}".lower()
    return any(word in text for word in _CONTEXT_WORDS)


def error_for_status(
    status: int,
    message: str,
    *,
    model: str,
    headers: Mapping[str, str] | None = None,
    code: str | None = None,
    now: float | None = None,
) -> ModelError:
    """Translate an HTTP error of a provider into our error tree.

    429 is :class:`RateLimited` (with ``retry_after`` from the headers), 408 a timeout,
    5xx (including Anthropic's 529 "overloaded") and 409 (a conflict, such as a busy lock)
    :class:`ProviderUnavailable`, a 400/413 about
    the context length :class:`ContextLengthExceeded`, any other 4xx
    :class:`PermanentModelError`.
    """
    detail = f"{model}: HTTP {status}: {message}"
    if status == 429:
        hint = parse_retry_after(headers or {}, now=time.time() if now is None else now)
        return RateLimited(detail, model=model, retry_after=hint)
    if status == 408:
        return ModelTimeout(detail, model=model)
    if status >= 500 or status == 409:
        return ProviderUnavailable(detail, model=model, status_code=status)
    if status in (400, 413, 422) and looks_like_context_overflow(message, code):
        return ContextLengthExceeded(detail, model=model)
    return PermanentModelError(detail, model=model, status_code=status)
