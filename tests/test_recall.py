"""Pure memory helpers: argument checks, ordering, BM25, cosine, fusion, SQLite SQL builders."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synopsis.errors import ConfigError, InvalidInput, InvalidNamespace, StoreError
from synopsis.memory._checks import (
    check_embeddings,
    hit_order,
    page_namespaces,
    prepare_put,
    prepare_put_many,
    prepare_search,
    summary_save_action,
)
from synopsis.memory._types import NewMemory, SessionSummary
from synopsis.memory.ranking import (
    bm25_scores,
    cosine,
    pack_vector,
    rank_by_vector,
    reciprocal_rank_fusion,
    unpack_vector,
)
from synopsis.memory.sqlite.sql import decode_path, encode_path, fts_query, prefix_range

labels = st.text(alphabet=st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=6)
namespaces = st.lists(labels, min_size=1, max_size=4).map(tuple)


def summary(version: int = 1, digest: str = "h", user: str = "u1") -> SessionSummary:
    return SessionSummary(
        tenant="t", user_id=user, session_id="s", version=version, text="x",
        covers_from=0, covers_to=1, model="m", content_hash=digest,
    )  # fmt: skip


# --- BM25 ----------------------------------------------------------------------------------


def test_bm25_scores_zero_for_documents_without_the_terms() -> None:
    """A document sharing no term scores exactly 0.0."""
    assert bm25_scores(["tea"], [{"coffee": 1}, {"tea": 1}], [1, 1])[0] == 0.0


def test_bm25_prefers_frequency_and_short_documents() -> None:
    """More occurrences win at equal length; shorter wins at equal frequency."""
    docs = [{"a": 2, "x": 1}, {"a": 1, "x": 2}, {"a": 1, "x": 9}, {"z": 1}]
    twice, once_short, once_long, _ = bm25_scores(["a"], docs, [3, 3, 10, 1])
    assert twice > once_short > once_long > 0


def test_bm25_idf_is_floored_for_very_common_terms() -> None:
    """A term found in every document still adds a tiny positive weight, as in FTS5."""
    scores = bm25_scores(["a"], [{"a": 1}, {"a": 1}], [1, 1])
    assert all(0 < s < 1e-5 for s in scores)


def test_bm25_of_no_documents_is_empty() -> None:
    """Scoring nothing returns nothing."""
    assert bm25_scores(["a"], [], []) == []


# --- cosine, vectors, fusion ------------------------------------------------------------


def test_cosine_basics() -> None:
    """Parallel is 1, orthogonal 0, opposite -1; zero or mismatched vectors give 0."""
    assert cosine([1, 2], [2, 4]) == pytest.approx(1.0)
    assert cosine([1, 0], [0, 3]) == 0.0
    assert cosine([1, 1], [-1, -1]) == pytest.approx(-1.0)
    assert cosine([0, 0], [1, 1]) == 0.0
    assert cosine([1, 2, 3], [1, 2]) == 0.0


@given(st.lists(st.floats(-1e6, 1e6, width=32), max_size=32))
def test_float32_vectors_round_trip(vector: list[float]) -> None:
    """pack/unpack is exact for float32 values."""
    assert unpack_vector(pack_vector(vector)) == tuple(vector)


vectors32 = st.lists(st.floats(-1e3, 1e3, width=32), min_size=3, max_size=3)


@given(vectors32, st.lists(vectors32, max_size=8), st.booleans())
def test_rank_by_vector_agrees_with_plain_cosine(
    query: list[float], vectors: list[list[float]], packed: bool
) -> None:
    """The matrix path (numpy) and the plain path give the same scores, packed or not."""
    candidates = [(i, pack_vector(v) if packed else v) for i, v in enumerate(vectors)]
    ranked = rank_by_vector(query, candidates)
    expected = {i: cosine(query, unpack_vector(pack_vector(v))) for i, v in enumerate(vectors)}
    assert sorted(i for i, _ in ranked) == list(range(len(vectors)))
    for ident, score in ranked:
        assert score == pytest.approx(expected[ident], abs=1e-6)
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)


def test_rank_by_vector_scores_other_dimensions_zero() -> None:
    """A stored vector of another dimension (a changed embedder) scores 0, never fails."""
    ranked = rank_by_vector([1.0, 0.0], [("old", [1.0, 0.0, 0.0]), ("new", pack_vector([2, 0]))])
    assert ranked == [("new", pytest.approx(1.0)), ("old", 0.0)]


def test_rrf_sums_reciprocal_ranks() -> None:
    """An id in both rankings scores the sum of 1/(60+rank) over them."""
    fused = reciprocal_rank_fusion([["a", "b"], ["b", "c"]])
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["a"] == pytest.approx(1 / 61)
    assert max(fused, key=fused.__getitem__) == "b"


def test_embedder_must_return_one_vector_per_text() -> None:
    """A wrong number of vectors is a configuration error."""
    with pytest.raises(ConfigError):
        check_embeddings([[1.0]], 2)


# --- argument checks ----------------------------------------------------------------------


def test_prepare_search_computes_terms_and_defaults() -> None:
    """A search request carries the query's terms and the normalized prefix."""
    request = prepare_search(
        "t", "user/u1", query="Painting 咖啡", kind=None, tags=None,
        limit=10, offset=0, mode="keyword", embedder=None,
    )  # fmt: skip
    assert request.prefix == ("user", "u1")
    assert request.terms == ("paint", "咖啡")


def test_prepare_search_needs_an_embedder_for_vectors() -> None:
    """vector/hybrid modes without an embedder raise ConfigError."""
    with pytest.raises(ConfigError):
        prepare_search(
            "t", (), query="x", kind=None, tags=None,
            limit=10, offset=0, mode="hybrid", embedder=None,
        )  # fmt: skip


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), float("nan"), True, "5"])
def test_prepare_put_rejects_bad_ttls(ttl: object) -> None:
    """ttl must be a positive finite number of seconds."""
    with pytest.raises(InvalidInput):
        prepare_put("t", ("a",), "k", "x", kind="note", tags=None, ttl=ttl)


storable = st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"))


@given(st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from("xyz"), storable)))
def test_prepare_put_many_keeps_first_position_and_last_value(
    batch: list[tuple[str, str, str]],
) -> None:
    """One request per address, ordered by first occurrence, holding the last occurrence."""
    requests = prepare_put_many("t", [NewMemory((ns,), key, text) for ns, key, text in batch])
    expected: dict[tuple[str, str], str] = {}
    for ns, key, text in batch:
        expected[(ns, key)] = text
    assert [(r.namespace[0], r.key, r.text) for r in requests] == [
        (ns, key, text) for (ns, key), text in expected.items()
    ]


def test_prepare_put_many_locates_errors_by_index() -> None:
    """A bad item raises its type, with the index in the message and the bare reason as cause."""
    good = NewMemory(("a",), "k", "x")
    with pytest.raises(InvalidNamespace, match=r"^item 1: namespace") as caught:
        prepare_put_many("t", [good, NewMemory((), "k", "x")])
    assert caught.value.index == 1
    assert isinstance(caught.value.__cause__, InvalidNamespace)
    assert str(caught.value.__cause__).startswith("namespace")

    with pytest.raises(InvalidInput, match=r"^item 0: text must not contain NUL"):
        prepare_put_many("t", [NewMemory(("a",), "k", "x\x00")])
    for not_a_batch in ("abc", {"a": good}, 5, None):
        with pytest.raises(InvalidInput, match="iterable of NewMemory"):
            prepare_put_many("t", not_a_batch)  # type: ignore[arg-type]


def test_page_namespaces_cuts_dedupes_sorts_and_pages() -> None:
    """max_depth truncation merges duplicates before paging."""
    found = [("b", "x", "y"), ("a", "z"), ("b", "x", "w")]
    assert page_namespaces(found, max_depth=2, limit=10, offset=0) == [("a", "z"), ("b", "x")]
    assert page_namespaces(found, max_depth=None, limit=1, offset=1) == [("b", "x", "w")]


def test_hit_order_is_score_then_newest_then_key() -> None:
    """Sorting by hit_order puts the best score first, then newer, then smaller keys."""
    rows = [(1.0, 5.0, "b"), (2.0, 1.0, "z"), (1.0, 5.0, "a"), (1.0, 9.0, "c")]
    ordered = sorted(rows, key=lambda r: hit_order(r[0], r[1], r[2], ("n",)))
    assert [r[2] for r in ordered] == ["z", "c", "a", "b"]


# --- summaries --------------------------------------------------------------------------


def test_summary_save_action_rules() -> None:
    """Same hash is a no-op; other hash, older version or other user is a conflict."""
    stored = summary(2, "h")
    assert summary_save_action(summary(1), existing=None, latest=None) == "insert"
    assert summary_save_action(summary(2, "h"), existing=stored, latest=stored) == "noop"
    assert summary_save_action(summary(3, "k"), existing=None, latest=stored) == "insert"
    for new, existing in [(summary(2, "k"), stored), (summary(1, "k"), None)]:
        with pytest.raises(StoreError):
            summary_save_action(new, existing=existing, latest=stored)
    with pytest.raises(StoreError):
        summary_save_action(summary(3, "k", user="u2"), existing=None, latest=stored)


# --- SQLite builders --------------------------------------------------------------------


@given(namespaces)
def test_paths_round_trip(namespace: tuple[str, ...]) -> None:
    """decode_path inverts encode_path for any printable labels."""
    assert decode_path(encode_path(namespace)) == namespace


@given(namespaces, namespaces)
def test_prefix_range_matches_whole_label_prefixes(
    prefix: tuple[str, ...], namespace: tuple[str, ...]
) -> None:
    """The path range selects exactly the namespaces that start with the prefix's labels."""
    bounds = prefix_range(prefix)
    assert bounds is not None
    low, high = bounds
    path = encode_path(namespace)
    in_range = low.encode() <= path.encode() < high.encode()  # SQLite compares UTF-8 bytes
    assert in_range == (namespace[: len(prefix)] == prefix)


@given(namespaces, namespaces)
def test_path_order_is_tuple_order(a: tuple[str, ...], b: tuple[str, ...]) -> None:
    """Byte order of encoded paths equals tuple order, so SQL and Python sort alike."""
    assert (encode_path(a).encode() < encode_path(b).encode()) == (a < b)


def test_empty_prefix_has_no_range() -> None:
    """An empty prefix means the whole tenant."""
    assert prefix_range(()) is None


@given(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=5))
def test_fts_query_makes_any_term_a_literal(terms: list[str]) -> None:
    """Every term, whatever it contains, parses as a quoted FTS5 string (no syntax errors)."""
    terms = [t.replace("\x00", "") or "x" for t in terms]
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.execute("CREATE VIRTUAL TABLE f USING fts5(t)")
        conn.execute("INSERT INTO f (t) VALUES ('some text')")
        conn.execute("SELECT count(*) FROM f WHERE f MATCH ?", (fts_query(terms),)).fetchall()


def test_fts_query_quotes_and_joins_with_or() -> None:
    """Terms are double-quoted (inner quotes doubled) and joined by OR."""
    assert fts_query(["near(", 'a"b', "or"]) == '"near(" OR "a""b" OR "or"'
