"""One ranking for every store and the session history: terms, BM25, RRF (memory.ranking)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synopsis._scripts import CJK_PUNCT, HAN_CHAR, is_cjk
from synopsis.memory.inmemory import InMemoryStore
from synopsis.memory.ranking import (
    bm25_scores,
    document_terms,
    fused_order,
    indexed_terms,
    neighbour_contexts,
    query_terms,
    reciprocal_rank_fusion,
)
from synopsis.session.context import Recalled, fuse_ranked, rank_history

CORPUS = [
    "We planned a trip to Kyoto and booked the hotel near the station",
    "The hotel in Kyoto has a small garden",
    "用户喜欢喝咖啡，不喜欢茶",
    "咖啡馆在车站旁边，用户每天早上都去",
    "Painting the fence took all weekend",
    "She paints landscapes of Kyoto temples",
    "PostgreSQL 数据库的备份每天运行一次",
    "",
]
QUERIES = ["Kyoto hotel", "咖啡", "painting Kyoto", "数据库 PostgreSQL backup", "nothing matches"]


def corpus_scores(query: str, texts: list[str]) -> list[float]:
    counts = [Counter(indexed_terms(text)) for text in texts]
    return bm25_scores(query_terms(query), counts, [c.total() for c in counts])


# --- BM25 ------------------------------------------------------------------------------------

terms = st.text(alphabet="abcdefgh", min_size=1, max_size=3)


@given(
    query=st.lists(terms, min_size=2, max_size=6, unique=True),
    shared=st.integers(min_value=0, max_value=5),
    length=st.integers(min_value=6, max_value=20),
    others=st.lists(st.lists(terms, min_size=1, max_size=12), max_size=6),
)
def test_more_query_terms_rank_higher_at_equal_length(
    query: list[str], shared: int, length: int, others: list[list[str]]
) -> None:
    """Of two documents of equal length, the one with more query terms scores higher."""
    fewer_terms = query[: min(shared, len(query) - 1)]
    more_terms = query[: len(fewer_terms) + 1]
    filler = ["zz"] * length

    def doc(words: list[str]) -> Counter[str]:
        return Counter(words + filler[: length - len(words)])

    docs = [doc(fewer_terms), doc(more_terms), *(Counter(words) for words in others)]
    lengths = [length, length, *(len(words) for words in others)]
    fewer, more, *_ = bm25_scores(query, docs, lengths)
    assert more > fewer >= 0.0


def test_a_repeated_query_term_counts_once() -> None:
    """Saying a word twice in a query does not weigh it twice."""
    docs = [{"a": 1, "b": 1}, {"b": 2}, {"c": 1}]
    assert bm25_scores(["a", "a", "b"], docs, [2, 2, 1]) == bm25_scores(["a", "b"], docs, [2, 2, 1])


def test_a_term_in_most_documents_still_counts() -> None:
    """Lucene's IDF: sharing only a very common term scores above zero, less than a rare one."""
    scores = corpus_scores("the", ["the cat", "the dog", "the end", "a fox"])
    rare = corpus_scores("cat", ["the cat", "the dog", "the end", "a fox"])
    assert all(0.1 < score < rare[0] for score in scores[:3])
    assert scores[3] == 0.0


@pytest.mark.parametrize("query", QUERIES)
def test_store_scores_are_the_ranking_scores(query: str) -> None:
    """The in-memory store returns exactly bm25_scores over its documents, bit for bit."""
    store = InMemoryStore()
    for index, text in enumerate(CORPUS):
        store.put("t", ("docs",), f"k{index}", text)
    hits = store.search("t", ("docs",), query=query, limit=100)
    expected = corpus_scores(query, CORPUS)
    assert {hit.item.key: hit.score for hit in hits} == {
        f"k{i}": score for i, score in enumerate(expected) if score > 0
    }


@pytest.mark.parametrize("query", QUERIES)
def test_history_recall_scores_like_the_store(query: str) -> None:
    """Older messages rank as store items put with their neighbours as context: same scores."""
    texts = [text for text in CORPUS if text]
    older: list[dict[str, Any]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text}
        for i, text in enumerate(texts)
    ]
    ranked = rank_history(older, query, limit=100)
    store = InMemoryStore()
    for index, (text, context) in enumerate(zip(texts, neighbour_contexts(texts), strict=True)):
        store.put("t", ("docs",), f"k{index}", text, context=context)
    hits = store.search("t", ("docs",), query=query, limit=100)
    assert sorted(note.score for note in ranked) == sorted(hit.score or 0.0 for hit in hits)


def test_history_recall_finds_an_answer_by_its_question() -> None:
    """An answer that shares no word with the query is found through the question before it."""
    older = [
        {"role": "user", "content": "What should I read about Kyoto temples?"},
        {"role": "assistant", "content": "Start with the Kinkaku-ji guide."},
        {"role": "user", "content": "Thanks, and a recipe for ramen?"},
        {"role": "assistant", "content": "Tonkotsu takes a day; shoyu is quicker."},
        {"role": "user", "content": "What about pasta?"},
        {"role": "assistant", "content": "Carbonara: eggs, cheese, guanciale."},
    ]
    labels = [note.label for note in rank_history(older, "kyoto temples", limit=6)]
    assert any("message 1," in label for label in labels)


def test_neighbour_contexts_are_the_texts_around_each_one() -> None:
    """Each text gets up to ``window`` texts before and after it, itself left out."""
    texts = ["a", "b", "c", "d"]
    assert neighbour_contexts(texts) == ["b\nc", "a\nc\nd", "a\nb\nd", "b\nc"]
    assert neighbour_contexts(texts, window=1) == ["b", "a\nc", "b\nd", "c"]
    assert neighbour_contexts(texts, window=0) == ["", "", "", ""]
    assert neighbour_contexts([]) == []
    with pytest.raises(ValueError, match="window"):
        neighbour_contexts(texts, window=-1)


def test_history_recall_prefers_the_newer_message_on_a_tie() -> None:
    """Two equally relevant older messages: the newer one comes first."""
    older = [
        {"role": "user", "content": "kyoto trip"},
        {"role": "assistant", "content": "kyoto trip"},
        {"role": "user", "content": "something else entirely"},
    ]
    ranked = rank_history(older, "kyoto", limit=5)
    assert ["message 1," in ranked[0].label, "message 0," in ranked[1].label] == [True, True]


# --- fusion ----------------------------------------------------------------------------------


def test_rrf_ties_keep_first_appearance() -> None:
    """Ids with equal fused scores keep the order in which they first appeared."""
    assert fused_order([["a", "b"], ["b", "a"]]) == ["a", "b"]
    assert fused_order([["x"], ["y"], ["z"]]) == ["x", "y", "z"]
    fused = reciprocal_rank_fusion([["a", "b"], ["b", "a"]])
    assert fused["a"] == fused["b"] == 1 / 61 + 1 / 62


@given(st.lists(st.lists(st.sampled_from("abcdef"), unique=True, max_size=6), max_size=4))
def test_fused_order_is_best_first_over_every_id(rankings: list[list[str]]) -> None:
    """Every id appears once, by descending fused score."""
    fused = reciprocal_rank_fusion(rankings)
    order = fused_order(rankings)
    assert sorted(order) == sorted({ident for ranking in rankings for ident in ranking})
    assert [fused[i] for i in order] == sorted(fused.values(), reverse=True)


def test_session_fusion_lets_the_earlier_list_win_ties() -> None:
    """fuse_ranked interleaves rank by rank, the earlier list first; equal notes stay apart."""
    same = Recalled(text="same", source="memory", label="m", score=1.0)
    memories = [same, Recalled(text="m2", source="memory", label="m", score=1.0)]
    history = [same, Recalled(text="h2", source="history", label="h", score=1.0)]
    fused = fuse_ranked(memories, history, limit=10)
    assert [note.text for note in fused] == ["same", "same", "m2", "h2"]
    assert fuse_ranked(memories, history, limit=1) == [same]
    assert fuse_ranked(memories, limit=0) == []


# --- CJK terms -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("咖啡", ["咖", "啡", "咖啡"]),  # Chinese
        ("ひらがな", ["ひ", "ら", "が", "な", "ひら", "らが", "がな"]),  # Japanese kana
        ("한국", ["한", "국", "한국"]),  # Korean Hangul
        ("漢字カナ", ["漢", "字", "カ", "ナ", "漢字", "字カ", "カナ"]),  # one mixed run
    ],
)
def test_cjk_runs_index_characters_and_pairs(text: str, expected: list[str]) -> None:
    """Every CJK script is split into single characters and overlapping pairs."""
    assert document_terms(text) == expected


def test_cjk_punctuation_separates_runs_and_is_no_term() -> None:
    """Full-width punctuation (、。，！) ends a run and never becomes a term."""
    assert document_terms("咖啡，茶。") == ["咖", "啡", "咖啡", "茶"]
    assert query_terms("、。「」，！") == []


def test_script_ranges_agree_with_the_terms() -> None:
    """is_cjk, HAN_CHAR and CJK_PUNCT are the ranges the terms and the estimator use."""
    assert all(is_cjk(char) for char in "咖ひカ한豈")
    assert not any(is_cjk(char) for char in "a1é、，")
    assert HAN_CHAR.match("咖") and not HAN_CHAR.match("カ")
    assert re.fullmatch(f"[{CJK_PUNCT}]+", "、。「」，！ＡＢ")


def test_chinese_query_finds_the_sentence_on_the_store() -> None:
    """A two-character query inside a long Chinese sentence finds it."""
    store = InMemoryStore()
    store.put("t", ("u",), "k", "用户说他每天早上都喜欢喝一杯咖啡")
    store.put("t", ("u",), "other", "今天天气很好")
    assert [hit.item.key for hit in store.search("t", ("u",), query="咖啡")] == ["k"]
