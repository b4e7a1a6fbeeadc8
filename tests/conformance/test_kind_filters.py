"""Kind filters on every backend, sync and async: ``kind`` (one kind or several) and
``exclude_kinds``, in every search mode, with BM25 statistics of the filtered scope."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from synopsis.errors import InvalidInput
from synopsis.memory import TRANSCRIPT_KINDS, NewMemory
from synopsis.testing import BigramEmbedder

from .conftest import Store

T = "tenant-a"
USER = ("user", "u1")
AGENTS = ("user", "u1", "agents", "chat-1", "generation-0")


async def _fill(store: Store) -> None:
    """A user's facts and notes, and an agents session transcript in their namespace."""
    await store.put_many(
        T,
        [
            NewMemory(USER, "f1", "likes green tea in the morning", kind="fact"),
            NewMemory(USER, "f2", "allergic to peanuts", kind="fact"),
            NewMemory(USER, "n1", "tea with the team on friday", kind="note"),
            NewMemory(("user", "u1", "agents", "chat-1"), "head", '{"generation": 0}',
                      kind="agents_session"),
            NewMemory(AGENTS, "000000000000", '{"role": "user", "content": "green tea?"}',
                      kind="agents_item"),
            NewMemory(AGENTS, "000000000001", '{"role": "assistant", "content": "tea, yes"}',
                      kind="agents_item"),
        ],
    )  # fmt: skip


async def _keys(store: Store, **options: Any) -> list[str]:
    return sorted(hit.item.key for hit in await store.search(T, USER, limit=100, **options))


async def test_kind_takes_one_kind_or_several(store: Store) -> None:
    """``kind`` keeps items of that kind, or of any of several; ``kind="x"`` works as before."""
    await _fill(store)
    assert await _keys(store, kind="fact") == ["f1", "f2"]
    assert await _keys(store, kind=["fact", "note"]) == ["f1", "f2", "n1"]
    assert await _keys(store, kind=("note", "note")) == ["n1"]
    assert await _keys(store, kind=("fact", "agents_item"), query="tea") == [
        "000000000000", "000000000001", "f1",
    ]  # fmt: skip


async def test_exclude_kinds_leaves_transcripts_out_with_and_without_a_query(store: Store) -> None:
    """Excluded kinds never come back: newest-first listings and keyword searches alike."""
    await _fill(store)
    assert len(await _keys(store)) == 6
    assert await _keys(store, exclude_kinds=TRANSCRIPT_KINDS) == ["f1", "f2", "n1"]
    assert await _keys(store, exclude_kinds=TRANSCRIPT_KINDS, query="green tea") == ["f1", "n1"]
    assert await _keys(store, exclude_kinds="agents_item", kind=None) == ["f1", "f2", "head", "n1"]


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
async def test_exclude_kinds_applies_to_vector_and_hybrid_search(
    make_store: Callable[..., Store], mode: str
) -> None:
    """Vector and hybrid search see only the filtered scope too."""
    store = make_store(embedder=BigramEmbedder())
    await _fill(store)
    found = await _keys(store, query="green tea", mode=mode, exclude_kinds=TRANSCRIPT_KINDS)
    assert found
    assert set(found) <= {"f1", "f2", "n1"}
    assert await _keys(store, query="green tea", mode=mode, kind="agents_item") == [
        "000000000000", "000000000001",
    ]  # fmt: skip


async def test_an_excluded_kind_stays_excluded_when_kind_names_it(store: Store) -> None:
    """Keep ``kind`` minus ``exclude_kinds``: the exclusion wins."""
    await _fill(store)
    assert await _keys(store, kind=("fact", "note"), exclude_kinds="note") == ["f1", "f2"]
    assert await _keys(store, kind="note", exclude_kinds=["note"], query="tea") == []


async def test_bm25_statistics_describe_the_filtered_scope(store: Store) -> None:
    """Leaving kinds out scores exactly as keeping the other kinds (N, n and the mean length
    count only what the filter lets through), and differently from no filter at all."""
    await _fill(store)

    async def scored(**options: Any) -> list[tuple[str, float | None]]:
        hits = await store.search(T, USER, query="green tea", limit=100, **options)
        return [(hit.item.key, hit.score) for hit in hits]

    excluded = await scored(exclude_kinds=TRANSCRIPT_KINDS)
    assert excluded == await scored(kind=("fact", "note"))
    unfiltered = dict(await scored())
    assert any(unfiltered[key] != score for key, score in excluded)
    # The same holds for the whole tenant (no prefix), where no filter reads tenant totals.
    whole = await store.search(T, query="tea", exclude_kinds=TRANSCRIPT_KINDS, limit=100)
    kept = await store.search(T, query="tea", kind=("fact", "note"), limit=100)
    assert [(h.item.key, h.score) for h in whole] == [(h.item.key, h.score) for h in kept]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kind": 3}, "kind must be a kind"),
        ({"kind": b"fact"}, "kind must be a kind"),
        ({"kind": {"fact": 1}}, "kind must be a kind"),
        ({"kind": ()}, "at least one kind"),
        ({"kind": ""}, "kind must be a non-empty string"),
        ({"kind": ["fact", 2]}, r"kind\[1\] must be a non-empty string"),
        ({"kind": "fa\nct"}, "control characters"),
        ({"exclude_kinds": 3}, "exclude_kinds must be a kind"),
        ({"exclude_kinds": ["ok", ""]}, r"exclude_kinds\[1\] must be a non-empty string"),
        ({"exclude_kinds": ["a\tb"]}, "control characters"),
        ({"exclude_kinds": "\ud800"}, "lone surrogates"),
        ({"exclude_kinds": [f"k{i}" for i in range(65)]}, "at most 64 kinds"),
        ({"kind": [f"k{i}" for i in range(65)]}, "at most 64 kinds"),
    ],
)
async def test_bad_kind_filters_are_refused_naming_the_problem(
    store: Store, options: dict[str, Any], message: str
) -> None:
    """Wrong types, empty or unprintable kinds and too many kinds raise InvalidInput."""
    with pytest.raises(InvalidInput, match=message):
        await store.search(T, query="tea", **options)


async def test_a_string_is_one_kind_and_empty_filters_leave_nothing_out(store: Store) -> None:
    """``exclude_kinds="note"`` is the kind "note" (never its letters); None and () exclude
    nothing; 64 kinds are allowed."""
    await store.put(T, USER, "a", "tea", kind="n")
    await store.put(T, USER, "b", "tea", kind="note")
    assert await _keys(store, exclude_kinds="note") == ["a"]
    assert await _keys(store, exclude_kinds=None) == ["a", "b"]
    assert await _keys(store, exclude_kinds=[], query="tea") == ["a", "b"]
    assert await _keys(store, kind=["n", *(f"k{i}" for i in range(63))]) == ["a"]


async def test_kinds_are_printable_on_put_too(store: Store) -> None:
    """A kind no filter could name is refused when stored, too."""
    with pytest.raises(InvalidInput, match="control characters"):
        await store.put(T, USER, "k", "text", kind="fact\n")
    assert await store.search(T) == []
