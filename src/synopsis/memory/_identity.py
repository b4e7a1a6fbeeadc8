"""Which model made a vector: the identity of an embedder (pure; no I/O).

Vectors of two models live in two spaces: a cosine between them means nothing, and with other
dimensions it is always 0. So every stored vector carries the identity of the embedder that
made it, and a store compares query vectors only with vectors of its own embedder; the others
count as missing, for search as for ``count_unembedded`` and ``reembed``.

An identity is a short string naming a model and its version. It is, in order:

1. the ``embedder_id`` a store was given (``SQLiteStore(..., embedder_id="my-model@3")``);
2. the embedder's own ``embedder_id`` attribute, when it is a string: the bundled
   :class:`~synopsis.embeddings.StaticEmbedder` says ``static:minilm_static@<hash>`` and
   :class:`~synopsis.embeddings.E5Embedder` ``e5:multilingual-e5-small-q4@<hash>``, the hash
   being of the model files, so a new version of a model is a new identity;
3. for any other callable, ``callable:<module>.<qualified name>`` of the function, or of the
   class of a callable object. That tells two functions apart but not two versions of one:
   give such an embedder an ``embedder_id`` (or the store one) that changes with its model.

Vectors stored before identities were recorded have none (NULL): they count as made by an
unknown model, that is as missing, until ``reembed`` replaces them.
"""

from __future__ import annotations

from typing import Final

from synopsis.errors import ConfigError
from synopsis.memory._types import Embedder, has_control

__all__ = ["MAX_EMBEDDER_ID_CHARS", "check_embedder_id", "embedder_identity"]

MAX_EMBEDDER_ID_CHARS: Final = 200


def check_embedder_id(value: object, where: str = "embedder_id") -> str:
    """``value`` if it is a usable identity, else ConfigError naming ``where``."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where} must be a non-empty string")
    if len(value) > MAX_EMBEDDER_ID_CHARS or has_control(value):
        raise ConfigError(f"{where} must be at most {MAX_EMBEDDER_ID_CHARS} printable characters")
    return value


def embedder_identity(embedder: Embedder | None, override: str | None = None) -> str | None:
    """The identity vectors of ``embedder`` are stored with (see the module docstring).

    None for a store without an embedder; ``override`` without an embedder is a ConfigError.
    """
    if embedder is None:
        if override is not None:
            raise ConfigError("embedder_id names the model of an embedder: pass an embedder too")
        return None
    if override is not None:
        return check_embedder_id(override)
    own = getattr(embedder, "embedder_id", None)
    if own is not None:
        return check_embedder_id(own, f"{type(embedder).__name__}.embedder_id")
    named = embedder if hasattr(embedder, "__qualname__") else type(embedder)
    module = getattr(named, "__module__", None) or "?"
    name = f"callable:{module}.{getattr(named, '__qualname__', '?')}"
    return check_embedder_id(name[:MAX_EMBEDDER_ID_CHARS])
