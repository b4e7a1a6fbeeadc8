"""Fakes for tests, shipped with the library: scripted models, embedders, a clock, sleeps.

Use them instead of mocks::

    model = FakeModel(["<summary>1. Primary Request and Intent: ...</summary>"])
    compactor = Compactor(model=model, trigger_tokens=1000)
    ...
    assert len(model.requests) == 1
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from synopsis.models import ModelResponse, ModelSettings, Usage

__all__ = [
    "AsymmetricEmbedder",
    "AsyncFakeModel",
    "BigramEmbedder",
    "FakeClock",
    "FakeModel",
    "FunctionModel",
    "RecordingSleep",
    "Reply",
    "tool_call_reply",
]

#: What a scripted model may be told to do on one call: answer a text, answer a full
#: assistant message (dict) or a ModelResponse, or raise an exception.
Reply = str | Mapping[str, Any] | ModelResponse | BaseException


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    messages: list[dict[str, Any]]
    settings: ModelSettings | None


def _to_response(reply: Reply, model: str) -> ModelResponse:
    if isinstance(reply, BaseException):
        raise reply
    if isinstance(reply, ModelResponse):
        return reply
    if isinstance(reply, str):
        message: Mapping[str, Any] = {"role": "assistant", "content": reply}
    else:
        message = {"role": "assistant", **dict(reply)}
    size = len(str(message.get("content") or "")) // 4
    return ModelResponse(message=message, model=model, usage=Usage(0, size, size))


def tool_call_reply(name: str = "read_file", arguments: str = "{}") -> dict[str, Any]:
    """An assistant reply that calls a tool instead of answering (a bad summary)."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_fake",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        ],
    }


@dataclass(eq=False)
class FakeModel:
    """A synchronous model that answers from a script and records every request.

    ``replies`` are used in order; when they run out, ``default`` (if set) answers every
    further call, otherwise the call fails with an AssertionError naming the request count.
    """

    replies: Iterable[Reply] = ()
    name: str = "fake:model"
    default: Reply | None = None
    context_window: int | None = None
    requests: list[RecordedRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._script = list(self.replies)

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        self.requests.append(RecordedRequest([dict(m) for m in messages], settings))
        return _to_response(self._next(), self.name)

    def _next(self) -> Reply:
        if self._script:
            return self._script.pop(0)
        if self.default is not None:
            return self.default
        raise AssertionError(f"{self.name}: no scripted reply for call {len(self.requests)}")


@dataclass(eq=False)
class AsyncFakeModel(FakeModel):
    """The async twin of :class:`FakeModel`; ``delay`` seconds of real ``asyncio.sleep``."""

    delay: float = 0.0

    async def complete(  # type: ignore[override]
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        self.requests.append(RecordedRequest([dict(m) for m in messages], settings))
        reply = self._next()
        if self.delay:
            await asyncio.sleep(self.delay)
        return _to_response(reply, self.name)


@dataclass(eq=False)
class FunctionModel:
    """A model whose answer is computed by ``fn(messages) -> str | dict | ModelResponse``."""

    fn: Callable[[list[dict[str, Any]]], Reply]
    name: str = "function:model"
    context_window: int | None = None

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        return _to_response(self.fn([dict(m) for m in messages]), self.name)


@dataclass
class FakeClock:
    """A clock that only moves when told to (or when a RecordingSleep sleeps)."""

    now: float = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class RecordingSleep:
    """A sleep function that records the delays and advances an optional FakeClock."""

    clock: FakeClock | None = None
    delays: list[float] = field(default_factory=list)

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self.clock is not None:
            self.clock.advance(seconds)

    async def asleep(self, seconds: float) -> None:
        self(seconds)


class BigramEmbedder:
    """A deterministic embedder: character bigrams hashed into a fixed number of buckets.

    Texts that share many bigrams get close vectors; no model, no randomness.
    """

    def __init__(self, dims: int = 64) -> None:
        self.dims = dims
        self.calls = 0

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> list[float]:
        vector = [0.0] * self.dims
        folded = f" {text.casefold()} "
        for i in range(len(folded) - 1):
            digest = hashlib.blake2b(folded[i : i + 2].encode(), digest_size=4).digest()
            vector[int.from_bytes(digest, "big") % self.dims] += 1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]


class AsymmetricEmbedder(BigramEmbedder):
    """Embeds stored texts as they are and queries through a synonym table (like E5's prefixes).

    It records what each side was asked, so a test can tell which side a store used.
    """

    def __init__(self, synonyms: dict[str, str]) -> None:
        super().__init__()
        self.synonyms = synonyms
        self.stored: list[str] = []
        self.queried: list[str] = []

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.stored.extend(texts)
        return super().__call__(texts)

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        self.queried.extend(texts)
        return super().__call__([self.synonyms.get(text, text) for text in texts])
