"""The model protocol every summarizer model satisfies, sync and async.

A model takes chat messages (OpenAI shape, already stripped of ``usage`` and ``meta``) and
returns one assistant message. Wrappers (retry, failover, compaction) satisfy the same
protocol, so they stack in any order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from synopsis.messages import text_of

__all__ = ["AsyncModel", "Model", "ModelResponse", "ModelSettings", "Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage a provider reported for one call."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        """The usage of two calls together (what a chunked, retried summary cost)."""
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """Per-call settings. ``None`` leaves the provider's default."""

    max_tokens: int | None = None
    temperature: float | None = None
    timeout: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def given(self) -> dict[str, Any]:
        """``max_tokens``, ``temperature`` and ``timeout``, those that are set."""
        chosen = {"max_tokens": self.max_tokens, "temperature": self.temperature}
        return {k: v for k, v in {**chosen, "timeout": self.timeout}.items() if v is not None}


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """One assistant message and what the provider said about it."""

    message: Mapping[str, Any]
    model: str
    usage: Usage | None = None
    retry_after: float | None = None

    @property
    def text(self) -> str:
        return text_of(self.message)

    @property
    def tool_calls(self) -> list[Mapping[str, Any]]:
        return list(self.message.get("tool_calls") or [])


@runtime_checkable
class Model(Protocol):
    """A synchronous chat model."""

    @property
    def name(self) -> str: ...

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse: ...


@runtime_checkable
class AsyncModel(Protocol):
    """An asynchronous chat model; the twin of :class:`Model`."""

    @property
    def name(self) -> str: ...

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse: ...
