"""Search terms for CJK and English keyword recall (synopsis.memory.ranking)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from synopsis.memory.ranking import (
    MAX_QUERY_TERMS,
    TEXT_WEIGHT,
    document_terms,
    indexed_terms,
    query_terms,
)


def test_cjk_runs_become_characters_and_pairs() -> None:
    """A Chinese run is indexed as its single characters and overlapping pairs."""
    assert document_terms("喝咖啡") == ["喝", "咖", "啡", "喝咖", "咖啡"]


def test_query_uses_pairs_or_the_single_character() -> None:
    """Multi-character query runs use pairs; a one-character run is kept as it is."""
    assert query_terms("咖啡") == ["咖啡"]
    assert query_terms("喝咖啡") == ["喝咖", "咖啡"]
    assert query_terms("茶") == ["茶"]


def test_every_query_term_of_a_substring_is_indexed() -> None:
    """A CJK query taken from inside a sentence shares all its terms with the sentence."""
    sentence = "用户说他每天早上都喜欢喝一杯咖啡"
    indexed = set(document_terms(sentence))
    for start in range(len(sentence)):
        for end in range(start + 1, len(sentence) + 1):
            assert set(query_terms(sentence[start:end])) <= indexed


def test_english_is_case_folded_and_stemmed() -> None:
    """English words are lower-cased and Snowball-stemmed; possessives drop their 's."""
    assert document_terms("Painting PAINTS painted") == ["paint", "paint", "paint"]
    assert query_terms("user's databases") == ["user", "databas"]


def test_mixed_text_keeps_both_scripts() -> None:
    """Mixed Chinese/English text yields English stems and CJK characters and pairs."""
    assert query_terms("PostgreSQL 数据库") == ["postgresql", "数据", "据库"]


def test_nfkc_normalizes_full_width_forms() -> None:
    """Full-width letters and digits become their ASCII forms."""
    assert query_terms("ＰｏｓｔｇｒｅＳＱＬ １６") == ["postgresql", "16"]


def test_punctuation_and_fts_syntax_yield_no_terms() -> None:
    """Quotes, operators and punctuation are not terms."""
    assert query_terms('"*^-:()…，。！') == []
    assert query_terms("") == []


def test_document_terms_keep_repeats() -> None:
    """Term frequency survives: a repeated word appears twice."""
    assert document_terms("tea tea") == ["tea", "tea"]


def test_japanese_and_korean_are_cjk() -> None:
    """Kana and Hangul runs are split like Chinese."""
    assert query_terms("ひらがな") == ["ひら", "らが", "がな"]
    assert query_terms("한국어") == ["한국", "국어"]


def test_query_terms_are_capped() -> None:
    """A megabyte-long query yields at most MAX_QUERY_TERMS distinct terms."""
    text = " ".join(f"word{i}" for i in range(100_000))
    assert len(query_terms(text)) == MAX_QUERY_TERMS


def test_overlong_words_are_dropped() -> None:
    """A word longer than the term limit is not a term."""
    assert query_terms("a" * 65) == []
    assert query_terms("a" * 64) == ["a" * 64]


@given(st.text(max_size=200))
def test_query_terms_are_distinct_and_non_empty(text: str) -> None:
    """Query terms never repeat and are never empty."""
    terms = query_terms(text)
    assert len(terms) == len(set(terms))
    assert all(terms)


@given(st.text(max_size=200))
def test_terms_hold_no_whitespace_or_quotes(text: str) -> None:
    """Terms can be space-joined into an index column and double-quoted in a query safely."""
    for term in document_terms(text) + query_terms(text):
        assert not any(c.isspace() or c == '"' for c in term)


def test_stop_words_leave_a_query_that_has_other_terms() -> None:
    """Function words ("what", "did", "the") are not looked up beside content words."""
    assert query_terms("What did Caroline research?") == ["carolin", "research"]
    assert query_terms("What's the plan for the weekend") == ["plan", "weekend"]


def test_the_stop_words_can_be_chosen() -> None:
    """Another list (or none) replaces the English one."""
    assert query_terms("What did Caroline research?", stop_words=()) == [
        "what",
        "did",
        "carolin",
        "research",
    ]
    assert query_terms("le chat et la souris", stop_words={"le", "et", "la"}) == ["chat", "souri"]


def test_a_query_of_only_stop_words_keeps_them() -> None:
    """A query with nothing but stop words still finds what it says."""
    assert query_terms("What is it?") == ["what", "is", "it"]


def test_stop_words_do_not_touch_cjk_or_documents() -> None:
    """Only English query words are dropped; documents index every word."""
    assert query_terms("the 咖啡") == ["咖啡"]
    assert document_terms("what the cat did") == ["what", "the", "cat", "did"]


def test_stop_words_do_not_count_against_the_term_cap() -> None:
    """A long query keeps MAX_QUERY_TERMS content terms, however many stop words come first."""
    text = "the " * 100 + " ".join(f"word{i}" for i in range(100))
    assert query_terms(text) == [f"word{i}" for i in range(MAX_QUERY_TERMS)]


def test_indexed_terms_weigh_the_text_above_its_context() -> None:
    """The text's terms count TEXT_WEIGHT times, the context's once."""
    terms = indexed_terms("tea time", "the cup of tea")
    assert terms.count("tea") == TEXT_WEIGHT + 1
    assert terms.count("cup") == 1
    assert indexed_terms("tea") == ["tea"] * TEXT_WEIGHT
