"""BM25 from scope statistics: candidates alone score as the whole scope does."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from synopsis.memory.ranking import bm25_scope_scores, bm25_scores

TERMS = ["a", "b", "c", "d"]


@given(st.randoms(use_true_random=False), st.integers(1, 40), st.integers(1, 3))
def test_candidates_score_as_in_the_whole_scope(rng: random.Random, size: int, width: int) -> None:
    """Leaving out documents that hold no query term changes no score, bit for bit."""
    documents = [
        {term: rng.randint(1, 3) for term in rng.sample(TERMS, rng.randint(0, 3))}
        for _ in range(size)
    ]
    lengths = [sum(doc.values()) + rng.randint(0, 5) for doc in documents]
    query = TERMS[:width]
    whole = bm25_scores(query, documents, lengths)
    kept = [i for i, doc in enumerate(documents) if any(term in doc for term in query)]
    scores = bm25_scope_scores(
        [[documents[i].get(term, 0) for term in query] for i in kept],
        [lengths[i] for i in kept],
        scope_size=size,
        scope_length=sum(lengths),
    )
    assert scores == [whole[i] for i in kept]
    assert all(whole[i] == 0.0 for i in range(size) if i not in kept)


def test_an_empty_scope_scores_nothing() -> None:
    assert bm25_scope_scores([], [], scope_size=0, scope_length=0) == []
