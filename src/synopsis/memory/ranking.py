"""Keyword and vector ranking: the one home of search terms, BM25, cosine and RRF.

Every memory backend and the session context's history recall rank with these functions, so a
query finds the same things, in the same order, wherever it runs. Pure functions; no I/O.

**Terms** work for Chinese, Japanese, Korean and English alike. A plain tokenizer keeps a run
of Chinese characters as one token ("用户喜欢喝咖啡"), so a query for "咖啡" finds nothing. We
index, and query with, the same terms on every backend:

* text is NFKC-normalized and case-folded;
* a run of CJK characters becomes its single characters plus its overlapping character pairs
  (用户喜欢 -> 用 户 喜 欢 用户 户喜 喜欢), so one- and two-character queries match inside
  long sentences;
* other words are split on non-word characters and stemmed with the Snowball English stemmer
  ("painting" and "paints" both give "paint").

A query uses the pairs of its CJK runs (the single character only when a run is one character
long), which keeps multi-character queries precise. Query terms are distinct: a word said
twice in a query counts once. English function words (:data:`STOP_WORDS`: "what", "did",
"the", ...) are left out of a query that has other terms: "What did Caroline research?" looks
for ``caroline`` and ``research``, not for every turn that asks "what". A query made only of
such words keeps them. Documents index every word, so no stored item changes.

**Context.** An item may carry a ``context`` besides its text: words that help find it but
are not what it says (the turns around a chat turn, a title, a date). It is indexed with the
text at half the weight: :func:`indexed_terms` counts each term of the text twice
(:data:`TEXT_WEIGHT`) and each term of the context once, and BM25 takes term frequencies and
lengths from these weighted terms. A turn such as "Yes, the adoption agencies!" is then found
by "What did Caroline research?" when the turn before it asked Caroline about her research.
:func:`neighbour_contexts` gives each message of a conversation the ``CONTEXT_WINDOW``
messages before and after it as its context; the session history recall ranks older
messages that way, and a store user can put chat turns with it.

**BM25** is Okapi BM25 with ``k1 = 1.2``, ``b = 0.75`` and one IDF formula, Lucene's::

    idf(term) = log(1 + (N - n + 0.5) / (n + 0.5))

with ``N`` documents in scope, ``n`` of them containing the term. ``N``, ``n`` and the mean
length always describe the searched scope (tenant, prefix, kind, tags, live items only): the
in-memory backend scores with :func:`bm25_scope_scores` here, SQLite and PostgreSQL in SQL
with the same arithmetic in the same order, so all three backends score alike, bit for bit.
The IDF is positive for every term (a document scores above zero exactly when it shares a
query term) and falls smoothly as a term gets commoner: a user with two memories that both say
咖啡 gets both back with real scores, ranked by frequency and length, where the classic
``log((N - n + 0.5) / (n + 0.5))`` is zero or negative for a term in half the documents or
more (SQLite FTS5's ``bm25()`` floors it at 1e-6, which leaves the order to rounding). The
session context's history recall uses it too: one formula means a note ranks the same whether
it was recalled from the store or from the history.

**Vectors** are compared by cosine similarity; stored vectors are little-endian float32
(:func:`pack_vector`); with numpy installed (the ``embeddings`` extra) a ranking is one matrix
product.

**Hybrid search** gives each memory one score from its keyword (BM25) and vector (cosine)
scores, the same on every backend (:func:`convex_fusion`). Each ranking's scores are first
standardized over its own candidates (z-scores: minus their mean, divided by their population
standard deviation), then mixed with a fixed weight::

    score = (1 - w) * keyword_z + w * vector_z        w = HYBRID_VECTOR_WEIGHT = 0.6

A memory missing from one ranking (no query term in it, or stored without a vector) gets that
ranking's lowest z-score: it is no better there than the worst candidate that was found. Why
scores rather than ranks: on LoCoMo (``bench/bench_locomo.py``) plain reciprocal rank fusion
with equal weights left hybrid *below* keyword search alone whenever the vector ranking was
the weaker one, because it throws away how far apart the scores are. Why z-scores at 0.6:
with keyword search indexing each turn's neighbours as context, they measured best of RRF
(weighted or not), min-max at 0.3..0.7 and z-scores at 0.4..0.8, chosen on three of the six
conversations and best on the other three too (see ``docs/benchmarks.md``).

**Reciprocal rank fusion** merges best-first rankings that have no comparable scores (the
session context's recalled memories with its recalled history): each id scores
``sum(1 / (60 + rank))``.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections.abc import Collection, Hashable, Iterator, Mapping, Sequence
from functools import lru_cache
from struct import pack, unpack
from typing import Any, Final, TypeVar

import snowballstemmer

from synopsis._scripts import CJK, is_cjk

__all__ = [
    "BM25_B",
    "BM25_K1",
    "CONTEXT_WINDOW",
    "HYBRID_VECTOR_WEIGHT",
    "MAX_QUERY_TERMS",
    "MAX_TERM_CHARS",
    "RRF_K",
    "STOP_WORDS",
    "TEXT_WEIGHT",
    "bm25_scope_scores",
    "bm25_scores",
    "convex_fusion",
    "cosine",
    "document_terms",
    "fused_order",
    "indexed_terms",
    "min_max",
    "neighbour_contexts",
    "pack_vector",
    "query_terms",
    "rank_by_vector",
    "reciprocal_rank_fusion",
    "unpack_vector",
    "z_scores",
]

BM25_K1: Final = 1.2
BM25_B: Final = 0.75
RRF_K: Final = 60
#: The vector side's share of a hybrid score (the keyword side gets the rest).
HYBRID_VECTOR_WEIGHT: Final = 0.6
#: A longer word (a hash, a base64 blob) is not indexed.
MAX_TERM_CHARS: Final = 64
#: A query keeps at most this many distinct terms.
MAX_QUERY_TERMS: Final = 64
#: Each term of an item's text counts this many times, each term of its context once.
TEXT_WEIGHT: Final = 2
#: How many messages before and after a message :func:`neighbour_contexts` gives it.
CONTEXT_WINDOW: Final = 2
#: English function words left out of a query that has other terms (see the module docstring).
STOP_WORDS: Final = frozenset(
    """
    a an and are as at be been but by did do does for from had has have he her his how i
    if in into is it its me my of on or our she so than that the their them then there
    they this to was we were what when where which who whom why will with would you your
    """.split()  # noqa: SIM905 - a word list reads better as text
)
K = TypeVar("K", bound=Hashable)


# --- terms -----------------------------------------------------------------------------------

_TOKEN: Final = re.compile(rf"[{CJK}]+|[^\W{CJK}_]+(?:['’][^\W{CJK}_]+)*")
#: ``_TOKEN`` on lower-cased ASCII text, where a word character is a letter or a digit.
_ASCII_TOKEN: Final = re.compile("[a-z0-9]+(?:'[a-z0-9]+)*")
#: One Snowball stemmer per thread: a stemmer keeps the word it works on in itself, so two
#: threads sharing one garble each other's words (or raise IndexError).
_stemmers = threading.local()


def _stemmer() -> Any:
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        stemmer = _stemmers.english = snowballstemmer.stemmer("english")
    return stemmer


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    word = word.replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    word = word.replace("'", "")
    if not word.isascii() or len(word) <= 2:
        return word
    return str(_stemmer().stemWord(word))


@lru_cache(maxsize=65536)
def _word_term(word: str) -> str:
    """The term indexed for a (case-folded, non-CJK) word; "" when none is (too long, empty)."""
    stem = _stem(word)
    return stem if len(stem) <= MAX_TERM_CHARS else ""


def _is_stop(word: str, stop_words: Collection[str]) -> bool:
    """``word`` (case-folded) is one of ``stop_words``, possibly with a possessive ("what's")."""
    word = word.replace("’", "'")
    return word.removesuffix("'s") in stop_words


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def _pairs(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


#: Below the first CJK letter: a token starting below it is a word, not a CJK run.
_FIRST_CJK: Final = "\u3040"


def document_terms(text: str) -> list[str]:
    """The terms to index for ``text`` (with repeats, so term frequency is kept).

    The hot path of every write: ASCII text (no CJK possible, already NFKC) skips the
    normalization and the CJK test, and each word's term is looked up in a cache.
    """
    if text.isascii():
        return [term for term in map(_word_term, _ASCII_TOKEN.findall(text.lower())) if term]
    terms: list[str] = []
    for token in _tokens(text):
        if token >= _FIRST_CJK and is_cjk(token):
            terms.extend(token)
            terms.extend(_pairs(token))
        else:
            term = _word_term(token)
            if term:
                terms.append(term)
    return terms


def indexed_terms(text: str, context: str = "") -> list[str]:
    """The terms an item is indexed by: its text's terms ``TEXT_WEIGHT`` times, then its context's.

    Every backend stores exactly these (BM25 counts their frequencies and their number).
    """
    return document_terms(text) * TEXT_WEIGHT + document_terms(context)


def neighbour_contexts(texts: Sequence[str], *, window: int = CONTEXT_WINDOW) -> list[str]:
    """The context of each text of a conversation: the ``window`` texts before and after it.

    Joined by newlines, in conversation order, the text itself left out. On LoCoMo this lifts
    keyword turn recall@5 the most of the ideas measured (see ``docs/benchmarks.md``).
    """
    if window < 0:
        raise ValueError("window must be >= 0")
    return [
        "\n".join([*texts[max(0, i - window) : i], *texts[i + 1 : i + 1 + window]])
        for i in range(len(texts))
    ]


def query_terms(query: str, *, stop_words: Collection[str] = STOP_WORDS) -> list[str]:
    """The distinct terms to look up for ``query``, in order of first appearance.

    ``stop_words`` (case-folded words; the stores use :data:`STOP_WORDS`) are left out unless
    the query has nothing else. At most ``MAX_QUERY_TERMS`` terms are kept, so a
    megabyte-long query costs no more than a long sentence.
    """
    content: dict[str, None] = {}
    stop: dict[str, None] = {}
    for term, is_stop in _query_candidates(query, stop_words):
        chosen = stop if is_stop else content
        if len(chosen) < MAX_QUERY_TERMS:
            chosen.setdefault(term, None)
        if len(content) >= MAX_QUERY_TERMS:
            break
    return list(content or stop)


def _query_candidates(query: str, stop_words: Collection[str]) -> Iterator[tuple[str, bool]]:
    """Each term of ``query`` (repeats included) and whether it is a stop word."""
    for token in _tokens(query):
        if is_cjk(token):
            for term in [token] if len(token) == 1 else _pairs(token):
                yield term, False
        else:
            stem = _stem(token)
            if stem and len(stem) <= MAX_TERM_CHARS:
                yield stem, _is_stop(token, stop_words)


# --- BM25 ------------------------------------------------------------------------------------


def bm25_scores(
    terms: Sequence[str],
    documents: Sequence[Mapping[str, int]],
    lengths: Sequence[int],
    *,
    k1: float = BM25_K1,
    b: float = BM25_B,
) -> list[float]:
    """Okapi BM25 of each document (term counts + length) for ``terms``; 0.0 = no term shared.

    IDF is ``log(1 + (N - n + 0.5) / (n + 0.5))`` (see the module docstring). A
    repeated term counts once. The arithmetic is :func:`bm25_scope_scores`'s.
    """
    distinct = list(dict.fromkeys(terms))
    counts = [[doc.get(term, 0) for term in distinct] for doc in documents]
    return bm25_scope_scores(
        counts, lengths, scope_size=len(documents), scope_length=sum(lengths), k1=k1, b=b
    )


def bm25_scope_scores(
    counts: Sequence[Sequence[int]],
    lengths: Sequence[int],
    *,
    scope_size: int,
    scope_length: int,
    k1: float = BM25_K1,
    b: float = BM25_B,
) -> list[float]:
    """BM25 of candidate documents given the statistics of the whole searched scope.

    ``counts[i][j]`` is the frequency of the ``j``-th distinct query term in candidate ``i``;
    the candidates must include every document of the scope that holds a query term (the
    others score 0.0 and may be left out), so each term's document frequency ``n`` is counted
    among them. ``scope_size`` (N) and ``scope_length`` (sum of the lengths) describe every
    document in scope. Scores are summed in query-term order. The SQLite and PostgreSQL
    backends repeat this arithmetic, in this order, in SQL: change all three or none.
    """
    if scope_size == 0:
        return []
    average = (scope_length / scope_size) or 1.0
    width = len(counts[0]) if counts else 0
    idf = []
    for position in range(width):
        hits = sum(1 for doc in counts if doc[position])
        idf.append(math.log(1 + (scope_size - hits + 0.5) / (hits + 0.5)))
    scores = []
    for doc, length in zip(counts, lengths, strict=True):
        norm = k1 * (1 - b + b * length / average)
        score = 0.0
        for weight, tf in zip(idf, doc, strict=True):
            if tf:
                score += weight * tf * (k1 + 1) / (tf + norm)
        scores.append(score)
    return scores


# --- vectors ---------------------------------------------------------------------------------


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0.0 for a zero vector or vectors of different dimensions."""
    if len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def pack_vector(vector: Sequence[float]) -> bytes:
    """A vector as little-endian float32 bytes (how every backend keeps it)."""
    return pack(f"<{len(vector)}f", *vector)


def unpack_vector(blob: bytes) -> tuple[float, ...]:
    """The inverse of :func:`pack_vector`."""
    return tuple(unpack(f"<{len(blob) // 4}f", blob))


def rank_by_vector(
    query: Sequence[float], candidates: Sequence[tuple[K, Sequence[float] | bytes]]
) -> list[tuple[K, float]]:
    """Candidates by cosine similarity to ``query``, best first (stable for ties).

    A vector may be given packed (:func:`pack_vector`). With numpy installed (the
    ``embeddings`` extra) the scores are one matrix product; otherwise plain Python.
    """
    vectors = [vector for _, vector in candidates]
    scores = _numpy_cosines(query, vectors)
    if scores is None:
        scores = [cosine(query, _floats(vector)) for vector in vectors]
    scored = [(ident, score) for (ident, _), score in zip(candidates, scores, strict=True)]
    return sorted(scored, key=lambda pair: -pair[1])


def _floats(vector: Sequence[float] | bytes) -> Sequence[float]:
    return unpack_vector(vector) if isinstance(vector, bytes) else vector


def _numpy_cosines(
    query: Sequence[float], vectors: Sequence[Sequence[float] | bytes]
) -> list[float] | None:
    """Cosines as one matrix product, or None without numpy or when dimensions differ."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with the embeddings extra
        return None
    dims = len(query)
    if not vectors or any(_dims(vector) != dims for vector in vectors):
        return None
    if all(isinstance(vector, bytes) for vector in vectors):
        packed = b"".join(vector for vector in vectors if isinstance(vector, bytes))
        matrix = np.frombuffer(packed, dtype="<f4").reshape(len(vectors), dims).astype(np.float64)
    else:
        matrix = np.array([_floats(vector) for vector in vectors], dtype=np.float64)
    target = np.asarray(query, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(target)
    dots = matrix @ target
    cosines = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
    return [float(x) for x in cosines]


def _dims(vector: Sequence[float] | bytes) -> int:
    return len(vector) // 4 if isinstance(vector, bytes) else len(vector)


# --- fusion ----------------------------------------------------------------------------------


def reciprocal_rank_fusion(rankings: Sequence[Sequence[K]], *, k: int = RRF_K) -> dict[K, float]:
    """Fuse best-first rankings: each id scores the sum of ``1 / (k + rank)`` (rank from 1).

    The dict lists ids in order of first appearance (the first ranking's, then new ids of the
    next one, ...).
    """
    fused: dict[K, float] = {}
    for ranking in rankings:
        for rank, ident in enumerate(ranking, start=1):
            fused[ident] = fused.get(ident, 0.0) + 1.0 / (k + rank)
    return fused


def fused_order(rankings: Sequence[Sequence[K]], *, k: int = RRF_K) -> list[K]:
    """The ids of :func:`reciprocal_rank_fusion`, best first; ties keep first appearance.

    So of two ids tied at the same rank of two rankings, the earlier ranking's comes first.
    """
    fused = reciprocal_rank_fusion(rankings, k=k)
    return sorted(fused, key=lambda ident: -fused[ident])


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
