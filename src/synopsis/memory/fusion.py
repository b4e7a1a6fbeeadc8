"""Hybrid search: one score per memory from its keyword (BM25) and vector (cosine) scores.

Every backend's ``hybrid`` mode fuses with :func:`convex_fusion`, so a query ranks the same on
each. Pure; no I/O.

Each ranking's scores are first standardized over its own candidates (z-scores: minus their
mean, divided by their population standard deviation), then mixed with a fixed weight::

    score = (1 - w) * keyword_z + w * vector_z        w = HYBRID_VECTOR_WEIGHT = 0.6

A memory missing from one ranking (no query term in it, or stored without a vector) gets that
ranking's lowest z-score: it is no better there than the worst candidate that was found. Why
scores rather than ranks: on LoCoMo (``bench/bench_locomo.py``) plain reciprocal rank fusion
with equal weights left hybrid *below* keyword search alone whenever the vector ranking was
the weaker one, because it throws away how far apart the scores are. Why z-scores at 0.6:
with keyword search indexing each turn's neighbours as context, they measured best of RRF
(weighted or not), min-max at 0.3..0.7 and z-scores at 0.4..0.8, chosen on three of the six
conversations and best on the other three too (see ``docs/benchmarks.md``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Final, TypeVar

__all__ = ["HYBRID_VECTOR_WEIGHT", "convex_fusion", "min_max", "z_scores"]

K = TypeVar("K", bound=Hashable)

#: The vector side's share of a hybrid score (the keyword side gets the rest).
HYBRID_VECTOR_WEIGHT: Final = 0.6


def min_max(scored: Sequence[tuple[K, float]]) -> dict[K, float]:
    """Scores scaled to 0..1 (best 1, worst 0); all 1.0 when they are all equal."""
    if not scored:
        return {}
    low = min(score for _, score in scored)
    spread = max(score for _, score in scored) - low
    if spread <= 0.0:
        return {ident: 1.0 for ident, _ in scored}
    return {ident: (score - low) / spread for ident, score in scored}


def z_scores(scored: Sequence[tuple[K, float]]) -> dict[K, float]:
    """Scores minus their mean, over their population standard deviation (all 0.0 if equal)."""
    if not scored:
        return {}
    mean = math.fsum(score for _, score in scored) / len(scored)
    spread = math.sqrt(math.fsum((score - mean) ** 2 for _, score in scored) / len(scored))
    if spread <= 0.0:
        return {ident: 0.0 for ident, _ in scored}
    return {ident: (score - mean) / spread for ident, score in scored}


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
    by_keyword, by_vector = z_scores(keyword), z_scores(vector)
    keyword_floor = min(by_keyword.values(), default=0.0)
    vector_floor = min(by_vector.values(), default=0.0)
    ids = dict.fromkeys([*by_keyword, *by_vector])
    return {
        ident: (1.0 - weight) * by_keyword.get(ident, keyword_floor)
        + weight * by_vector.get(ident, vector_floor)
        for ident in ids
    }
