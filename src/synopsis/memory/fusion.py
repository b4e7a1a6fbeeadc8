"""Hybrid search: one score per memory from its keyword (BM25) and vector (cosine) scores.

Every backend's ``hybrid`` mode fuses with :func:`convex_fusion`, so a query ranks the same on
each. Pure; no I/O.

Each ranking's scores are first scaled to 0..1 over its own candidates (min-max: the best
candidate gets 1, the worst 0), then mixed with a fixed weight::

    score = (1 - w) * keyword01 + w * vector01        w = HYBRID_VECTOR_WEIGHT = 0.7

A memory missing from one ranking (no query term in it, or stored without a vector) gets 0
from that side. Why scores rather than ranks: on LoCoMo (``bench/bench_locomo.py``) plain
reciprocal rank fusion with equal weights left hybrid *below* keyword search alone whenever the
vector ranking was the weaker one, because it throws away how far apart the scores are; the
convex combination of min-max scores measured best of RRF (weighted or not), z-scores and
max-scaling, for every embedder we tried, and is steady for weights 0.55..0.75 (see
``docs/benchmarks.md``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Final, TypeVar

__all__ = ["HYBRID_VECTOR_WEIGHT", "convex_fusion", "min_max"]

K = TypeVar("K", bound=Hashable)

#: The vector side's share of a hybrid score (the keyword side gets the rest).
HYBRID_VECTOR_WEIGHT: Final = 0.7


def min_max(scored: Sequence[tuple[K, float]]) -> dict[K, float]:
    """Scores scaled to 0..1 (best 1, worst 0); all 1.0 when they are all equal."""
    if not scored:
        return {}
    low = min(score for _, score in scored)
    spread = max(score for _, score in scored) - low
    if spread <= 0.0:
        return {ident: 1.0 for ident, _ in scored}
    return {ident: (score - low) / spread for ident, score in scored}


def convex_fusion(
    keyword: Sequence[tuple[K, float]],
    vector: Sequence[tuple[K, float]],
    *,
    weight: float = HYBRID_VECTOR_WEIGHT,
) -> dict[K, float]:
    """Fused scores of every id in either ranking; higher is better.

    ``keyword`` and ``vector`` are ``(id, score)`` pairs, higher scores better (BM25 and
    cosine). The dict lists ids in order of first appearance (keyword ones, then new ones).
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be within 0..1, not {weight}")
    by_keyword, by_vector = min_max(keyword), min_max(vector)
    fused = {ident: (1.0 - weight) * score for ident, score in by_keyword.items()}
    for ident, score in by_vector.items():
        fused[ident] = fused.get(ident, 0.0) + weight * score
    return fused
