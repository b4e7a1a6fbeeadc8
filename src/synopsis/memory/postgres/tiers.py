"""Impact tiers: exact top-k BM25 over a whole tenant without scoring every candidate (pure).

PostgreSQL indexes each distinct term of an item as a *tier lexeme* ``term/F/L``: ``F`` is
the term's frequency class in the item and ``L`` the item's length class
(:data:`TF_CEILINGS`, :data:`LENGTH_FLOORS`; the schema's ``memory_lexemes`` function assigns
them, in SQL). BM25's per-term factor ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg))``
rises with ``tf`` and falls with ``len`` whatever ``avg`` is, so every item of a tier scores
at most :func:`tier_bound` for that term: the factor at the class's highest frequency and
lowest length, times the term's IDF.

A tenant-wide search then reads each term's tiers best bound first (:class:`TierWalk` picks
which term's next, MaxScore-style), scores the items it fetches exactly (from their own
terms, as every search does) and stops once the k-th best score is strictly above what any
unfetched item could reach: the sum, over the query's terms, of each term's best unfetched
tier (:meth:`TierWalk.unseen`). An item with no fetched tier has
each term's contribution below that term's best unfetched tier, or none at all, so nothing
it could score is missed, ties included (a tie needs an equal score, and the bound is
strictly below the k-th).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from synopsis.memory.ranking import BM25_B, BM25_K1

__all__ = [
    "LENGTH_FLOORS",
    "TF_CEILINGS",
    "Tier",
    "TierWalk",
    "length_class",
    "parse_lexeme",
    "tf_class",
    "tier_bound",
    "tier_plan",
]

#: Highest term frequency of each frequency class (class ``c`` is index ``c - 1``): one class
#: per frequency up to 8, then by powers of two; the last has no ceiling.
TF_CEILINGS: Final = (1, 2, 3, 4, 5, 6, 7, 8, 15, 31, 63, math.inf)
#: Lowest length of each length class (class ``c`` is index ``c - 1``): half octaves.
LENGTH_FLOORS: Final = (
    1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152, 65536, 98304, 131072,
    196608, 262144, 393216, 524288, 786432, 1048576,
)  # fmt: skip
#: Relative slack on every bound, far above the rounding of the few operations in a score.
_SLACK: Final = 1e-9


def tf_class(tf: int) -> int:
    """The frequency class of ``tf`` >= 1 (as the schema's ``memory_lexemes`` assigns it)."""
    for number, ceiling in enumerate(TF_CEILINGS, start=1):
        if tf <= ceiling:
            return number
    raise AssertionError("the last class has no ceiling")  # pragma: no cover


def length_class(length: int) -> int:
    """The length class of an item of ``length`` >= 1 indexed terms."""
    return bisect_right(LENGTH_FLOORS, length)


def parse_lexeme(lexeme: str) -> tuple[str, int, int]:
    """``term/F/L`` -> ``(term, F, L)``; a term never holds ``/`` (only word characters)."""
    term, tf, length = lexeme.rsplit("/", 2)
    return term, int(tf), int(length)


def tier_bound(idf: float, tf_class_: int, length_class_: int, average: float) -> float:
    """The most one term of IDF ``idf`` adds to the BM25 of an item in the given tier."""
    tf = TF_CEILINGS[tf_class_ - 1]
    if math.isinf(tf):
        return idf * (BM25_K1 + 1) * (1 + _SLACK)
    length = LENGTH_FLOORS[length_class_ - 1]
    norm = BM25_K1 * (1 - BM25_B + BM25_B * length / average)
    return idf * tf * (BM25_K1 + 1) / (tf + norm) * (1 + _SLACK)


@dataclass(frozen=True, slots=True)
class Tier:
    """One tier lexeme of a query term: which term (its position), its bound, its size."""

    lexeme: str
    term: int
    bound: float
    items: int


def tier_plan(
    lexemes: Sequence[tuple[str, int]], terms: Sequence[str], idf: Sequence[float], average: float
) -> list[Tier]:
    """The query terms' tiers (``(lexeme, items)`` pairs), best bound first.

    A lexeme of a term not in ``terms`` is left out, and so are empty tiers.
    """
    position = {term: number for number, term in enumerate(terms)}
    tiers = []
    for lexeme, items in lexemes:
        term, tf, length = parse_lexeme(lexeme)
        number = position.get(term)
        if number is None or items <= 0:
            continue
        tiers.append(Tier(lexeme, number, tier_bound(idf[number], tf, length, average), items))
    tiers.sort(key=lambda tier: (-tier.bound, tier.lexeme))
    return tiers


class TierWalk:
    """Which tiers to fetch next, and the bound of every item not fetched yet (MaxScore).

    Each term's tiers are fetched in order of bound, so the term adds at most its first
    unfetched tier's bound to an unfetched item. Between terms, the walk picks the run of
    equal-bound tiers that lowers the sum of those bounds most per item fetched: a rare
    term's last few tiers (which take its whole bound away) go before a common term's large
    tiers, so a query of a common and a rare word reads little of the common one.
    """

    def __init__(self, tiers: Sequence[Tier], width: int) -> None:
        self._queues: list[list[Tier]] = [[] for _ in range(width)]
        for tier in sorted(tiers, key=lambda tier: (-tier.bound, tier.lexeme)):
            self._queues[tier.term].append(tier)
        self._next = [0] * width

    def _top(self, term: int) -> float:
        queue, at = self._queues[term], self._next[term]
        return queue[at].bound if at < len(queue) else 0.0

    def _run(self, term: int) -> tuple[int, int]:
        """End (exclusive) and item count of the term's next run of equal-bound tiers."""
        queue, at = self._queues[term], self._next[term]
        end, items = at, 0
        while end < len(queue) and queue[end].bound == queue[at].bound:
            end, items = end + 1, items + queue[end].items
        return end, items

    def _gain(self, term: int) -> float:
        end, items = self._run(term)
        queue = self._queues[term]
        after = queue[end].bound if end < len(queue) else 0.0
        return (self._top(term) - after) / max(items, 1)

    def done(self) -> bool:
        """Every tier fetched."""
        return all(at >= len(q) for q, at in zip(self._queues, self._next, strict=True))

    def unseen(self) -> float:
        """The best score of an item in no fetched tier."""
        return math.fsum(self._top(term) for term in range(len(self._queues))) * (1 + _SLACK)

    def step(self, target: int) -> list[str]:
        """The lexemes of the next tiers to fetch: at least ``target`` items, or what is left."""
        chosen: list[str] = []
        items = 0
        while not self.done() and (not chosen or items < target):
            open_terms = [t for t in range(len(self._queues)) if self._top(t) > 0.0]
            term = max(open_terms, key=lambda t: (self._gain(t), -t))
            end, run = self._run(term)
            chosen += [tier.lexeme for tier in self._queues[term][self._next[term] : end]]
            items, self._next[term] = items + run, end
        return chosen
