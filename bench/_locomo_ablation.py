"""Ablation of our keyword ranking on LoCoMo: each idea on its own, then combinations.

Every row ranks the turns of a conversation with :mod:`synopsis.memory.ranking` (its terms,
its BM25) over documents built for that row, and reports turn recall@5 over every question,
over the first half of the conversations (*tune*, where weights were chosen) and over the
other half (*held out*, never looked at when choosing). The rows:

- **baseline**: each turn's terms, every word of the question (the ranking before issue 12);
- **stop words**: the question without English function words (``ranking.STOP_WORDS``);
- **text weight 2**: the turn's terms counted twice (alone it only changes BM25's saturation);
- **neighbours ±N**: each turn indexed with the N turns before and after it in its session
  as context, at the text's weight or at half of it (``indexed_terms``, shipped);
- **session date**: the session's date as context;
- **summary lift**: a second stage adding to each turn's score 0.3 x the best turn score x
  the (normalized) score of its session's summary;
- **PRF**: RM3-style pseudo-relevance feedback, the 10 best terms of the 5 best turns added
  to the query at 0.2 of a query term's weight;
- **b = 0.5**: BM25 with less length normalization (the stores keep b = 0.75, which SQLite
  FTS5 fixes).
- **per-field**: instead of one weighted bag of terms, BM25 of the text plus 0.5 x BM25 of the
  context, each field with its own lengths, IDF over the items holding the term in either
  (what SQLite FTS5 computes for ``bm25(fts, 1.0, 0.5)`` on a two-column table). It stores
  no repeated terms and leaves the scores of items without context as they were.

The shipped ranking is "stop words + neighbours ±2 at half weight" (``query_terms`` and
``indexed_terms`` with ``neighbour_contexts``), which the store rows of ``bench_locomo.py``
measure through the real backends.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from synopsis.memory.ranking import (
    BM25_K1,
    TEXT_WEIGHT,
    bm25_scores,
    document_terms,
    neighbour_contexts,
    query_terms,
)

TURN = "turn"
SUMMARY = "summary"
K = 5


@dataclass(frozen=True, slots=True)
class Variant:
    """How one row builds each turn's terms and ranks them."""

    name: str
    stop_words: bool = False
    text_weight: int = 1
    window: int = 0
    date: bool = False
    summary_lift: float = 0.0
    feedback: float = 0.0
    b: float = 0.75
    per_field: float = 0.0  # > 0: text BM25 + per_field x context BM25 (see the docstring)
    extra: dict[str, Any] = field(default_factory=dict)


SHIPPED: dict[str, Any] = {"stop_words": True, "text_weight": TEXT_WEIGHT, "window": 2}
PER_FIELD: dict[str, Any] = {"stop_words": True, "window": 2, "per_field": 0.5}
VARIANTS = (
    Variant("baseline (before issue 12)"),
    Variant("stop words", stop_words=True),
    Variant("text weight 2", text_weight=2),
    Variant("neighbours ±1, same weight", window=1),
    Variant("neighbours ±2, same weight", window=2),
    Variant("neighbours ±2, half weight", text_weight=TEXT_WEIGHT, window=2),
    Variant("session date as context (vs text weight 2)", text_weight=TEXT_WEIGHT, date=True),
    Variant("summary lift", summary_lift=0.3),
    Variant("PRF (RM3-style)", feedback=0.2),
    Variant("b = 0.5", b=0.5),
    Variant("**shipped: stop words + neighbours ±2, half weight**", **SHIPPED),
    Variant("shipped + summary lift", summary_lift=0.3, **SHIPPED),
    Variant("shipped + b = 0.5", b=0.5, **SHIPPED),
    Variant("stop words + neighbours ±2, per-field (context 0.5)", **PER_FIELD),
)


def _fields(variant: Variant, conversation: Any) -> tuple[list[Any], list[str]]:
    """The turns of ``conversation`` and the context of each under ``variant``."""
    turns = [d for d in conversation.docs if d.kind == TURN]
    by_session: dict[int, list[int]] = {}
    for index, doc in enumerate(turns):
        by_session.setdefault(doc.session, []).append(index)
    contexts = [""] * len(turns)
    if variant.window:
        for positions in by_session.values():
            texts = [turns[i].text for i in positions]
            around = neighbour_contexts(texts, window=variant.window)
            for i, context in zip(positions, around, strict=True):
                contexts[i] = context
    if variant.date:
        contexts = [conversation.dates.get(doc.session, "") for doc in turns]
    return turns, contexts


def _turn_terms(variant: Variant, conversation: Any) -> tuple[list[Any], list[list[str]]]:
    """The turns of ``conversation`` and the terms each is indexed by under ``variant``."""
    turns, contexts = _fields(variant, conversation)
    terms = [
        document_terms(doc.text) * variant.text_weight + document_terms(context)
        for doc, context in zip(turns, contexts, strict=True)
    ]
    return turns, terms


def _ranker(variant: Variant, conversation: Any) -> Callable[[str], list[str]]:
    """Question -> turn ids, best first, under ``variant``."""
    turns, terms = _turn_terms(variant, conversation)
    counts = [Counter(t) for t in terms]
    lengths = [len(t) for t in terms]
    summaries = [d for d in conversation.docs if d.kind == SUMMARY]
    summary_counts = [Counter(document_terms(d.text)) for d in summaries]

    _, contexts = _fields(variant, conversation)
    fields = [
        [Counter(document_terms(doc.text)) for doc in turns],
        [Counter(document_terms(context)) for context in contexts],
    ]

    def bm25(query: Mapping[str, float]) -> list[float]:
        if variant.per_field:
            return _per_field_bm25(query, fields, variant)
        return _weighted_bm25(query, counts, lengths, variant.b)

    def rank(question: str) -> list[str]:
        stop = None if variant.stop_words else ()
        words = query_terms(question) if stop is None else query_terms(question, stop_words=stop)
        query = dict.fromkeys(words, 1.0)
        scores = bm25(query)
        if variant.feedback:
            scores = bm25(_expanded(query, scores, counts, variant.feedback))
        if variant.summary_lift and summaries:
            lift = _summary_scores(words, summaries, summary_counts)
            best = max(scores, default=0.0)
            scores = [
                s + variant.summary_lift * best * lift.get(doc.session, 0.0) if s > 0 else s
                for s, doc in zip(scores, turns, strict=True)
            ]
        order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: -scores[i])
        return [turns[i].ident for i in order]

    return rank


def _weighted_bm25(
    query: Mapping[str, float], counts: Sequence[Counter[str]], lengths: Sequence[int], b: float
) -> list[float]:
    """``bm25_scores`` summed per query term, each scaled by its weight (PRF terms < 1)."""
    total = [0.0] * len(counts)
    for term, weight in query.items():
        for i, score in enumerate(bm25_scores([term], counts, lengths, b=b, k1=BM25_K1)):
            total[i] += weight * score
    return total


def _per_field_bm25(
    query: Mapping[str, float], fields: Sequence[Sequence[Counter[str]]], variant: Variant
) -> list[float]:
    """Text BM25 + ``variant.per_field`` x context BM25; IDF over items holding the term."""
    texts, contexts = fields
    size = len(texts)
    averages = [(sum(c.total() for c in counts) / size) or 1.0 for counts in fields]
    total = [0.0] * size
    for term, weight in query.items():
        hits = sum(1 for i in range(size) if term in texts[i] or term in contexts[i])
        idf = max(math.log((size - hits + 0.5) / (hits + 0.5)), 1e-6)
        for scale, column, average in zip((1.0, variant.per_field), fields, averages, strict=True):
            for i, counts in enumerate(column):
                tf = counts.get(term, 0)
                if tf:
                    norm = BM25_K1 * (1 - variant.b + variant.b * counts.total() / average)
                    total[i] += weight * scale * idf * tf * (BM25_K1 + 1) / (tf + norm)
    return total


def _expanded(
    query: dict[str, float], scores: Sequence[float], counts: Sequence[Counter[str]], weight: float
) -> dict[str, float]:
    """RM3-style: the query plus the 10 best terms of the 5 best turns (by score share)."""
    best = sorted(range(len(scores)), key=lambda i: -scores[i])[:5]
    top = scores[best[0]] if best and scores[best[0]] > 0 else 0.0
    if not top:
        return query
    mass: Counter[str] = Counter()
    for i in best:
        size = sum(counts[i].values()) or 1
        for term, tf in counts[i].items():
            mass[term] += tf / size * scores[i] / top
    expanded = dict(query)
    peak = max(mass.values())
    for term, value in mass.most_common(10):
        expanded.setdefault(term, weight * value / peak)
    return expanded


def _summary_scores(
    words: Sequence[str], summaries: Sequence[Any], counts: Sequence[Counter[str]]
) -> dict[int, float]:
    """Each session's summary score for the question, divided by the best one."""
    scores = bm25_scores(words, counts, [c.total() for c in counts])
    best = max(scores, default=0.0) or 1.0
    return {doc.session: score / best for doc, score in zip(summaries, scores, strict=True)}


def recalls(variant: Variant, conversation: Any) -> list[float]:
    """Turn recall@K of ``variant`` for each question of ``conversation``."""
    rank = _ranker(variant, conversation)
    values = []
    for question in conversation.questions:
        top = set(rank(question.text)[:K])
        values.append(len(top & question.turns) / len(question.turns))
    return values


def ablation(conversations: Sequence[Any]) -> None:
    """Print the ablation table: all conversations, the tune half and the held-out half."""
    half = len(conversations) // 2
    tune, held = conversations[:half], conversations[half:]
    if not tune:  # one conversation: no split
        tune = held
    names = ", ".join(c.sample_id for c in held)
    print(f"\n### Keyword ranking ablation, turn R@{K} (held out: {names})\n")
    print("| idea | all | tune | held out | held out vs baseline |")
    print("|---|---:|---:|---:|---:|")
    base = None
    for variant in VARIANTS:
        per = {c.sample_id: recalls(variant, c) for c in conversations}
        row = [
            statistics.fmean(v for c in group for v in per[c.sample_id])
            for group in (conversations, tune, held)
        ]
        base = row[2] if base is None else base
        cells = " | ".join(f"{value:.3f}" for value in row)
        print(f"| {variant.name} | {cells} | {row[2] - base:+.3f} |")
