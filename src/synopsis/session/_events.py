"""The errors session memory reports when a time limit runs out (both twins use them)."""

from __future__ import annotations

from synopsis.errors import ModelTimeout

__all__ = ["abandoned_error", "summarize_timeout_error"]


def summarize_timeout_error(timeout: float) -> ModelTimeout:
    """What a summarizer call that outlived ``summarize_timeout`` fails with (both twins)."""
    return ModelTimeout(f"the summarizer gave no answer within {timeout:g} s (summarize_timeout)")


def abandoned_error(close_timeout: float) -> TimeoutError:
    """What a job still unfinished when ``close()`` stopped waiting is reported with."""
    return TimeoutError(
        f"job still running when close() stopped waiting after {close_timeout:g} s "
        "(close_timeout); it was abandoned"
    )
