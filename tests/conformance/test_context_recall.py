"""An item's ``context`` and the weighted keyword ranking, on every backend, sync and async."""

from __future__ import annotations

import pytest

from synopsis.errors import InvalidInput
from synopsis.memory._types import NewMemory
from synopsis.memory.inmemory import InMemoryStore

from .conftest import Store

T = "tenant-a"
NS = ("user", "u1", "session", "s1")

#: A small chat: each turn is stored with the turns around it as its context.
TURNS = [
    "Caroline: I spent the whole week researching something important.",
    "Melanie: Oh? What were you researching?",
    "Caroline: Adoption agencies! I want to give a kid a loving home.",
    "Melanie: That is wonderful. Did you find a good one?",
    "Caroline: A few, the one in Kyoto looks great.",
    "Melanie: I painted a sunrise over the lake last weekend.",
    "Caroline: Painting is such a good outlet. What colours did you use?",
    "Melanie: Mostly orange, and a little purple for the clouds.",
]


def chat_items() -> list[NewMemory]:
    """Every turn, with the two turns before and after it as its context."""
    items = []
    for index, text in enumerate(TURNS):
        around = TURNS[max(0, index - 2) : index] + TURNS[index + 1 : index + 3]
        items.append(NewMemory(NS, f"t{index}", text, kind="turn", context="\n".join(around)))
    return items


async def test_context_is_stored_and_read_back(store: Store) -> None:
    """put and put_many keep the context on the item; it defaults to empty."""
    put = await store.put(T, NS, "a", "the text", context="the words around it")
    assert put.context == "the words around it"
    assert (await store.get(T, NS, "a")).context == "the words around it"
    await store.put_many(T, [NewMemory(NS, "b", "text", context="ctx"), NewMemory(NS, "c", "x")])
    assert (await store.get(T, NS, "b")).context == "ctx"
    assert (await store.get(T, NS, "c")).context == ""
    [hit] = await store.search(T, query="around")
    assert hit.item.context == "the words around it"


async def test_a_replace_replaces_the_context(store: Store) -> None:
    """A put without context clears the old one; the old context no longer finds the item."""
    await store.put(T, NS, "a", "tea", context="kyoto")
    await store.put(T, NS, "a", "tea")
    assert (await store.get(T, NS, "a")).context == ""
    assert await store.search(T, query="kyoto") == []


async def test_a_turn_is_found_by_the_words_of_its_neighbours(store: Store) -> None:
    """The answer turn ("Adoption agencies!") is found by the question's word "research"."""
    await store.put_many(T, chat_items())
    hits = await store.search(T, NS, query="What did Caroline research?", kind="turn", limit=3)
    assert "t2" in [hit.item.key for hit in hits]


async def test_the_text_weighs_more_than_the_context(store: Store) -> None:
    """Of two items alike but for where the word is, the one whose text holds it ranks first."""
    await store.put(T, NS, "in-context", "a quiet evening", context="kyoto trip")
    await store.put(T, NS, "in-text", "a kyoto trip", context="quiet evening")
    await store.put(T, NS, "other", "nothing related", context="at all here")
    assert [hit.item.key for hit in await store.search(T, query="kyoto")] == [
        "in-text",
        "in-context",
    ]


async def test_every_backend_ranks_as_the_in_memory_store(store: Store) -> None:
    """Same items and queries: the same keys in the same order as the in-memory reference."""
    reference = InMemoryStore()
    reference.put_many(T, chat_items())
    await store.put_many(T, chat_items())
    for query in ("What did Caroline research?", "painting sunrise", "Kyoto", "what is it"):
        want = [(h.item.key, h.score) for h in reference.search(T, query=query, limit=20)]
        got = [(h.item.key, h.score) for h in await store.search(T, query=query, limit=20)]
        assert [key for key, _ in got] == [key for key, _ in want], query
        assert [score for _, score in got] == pytest.approx([score for _, score in want])


@pytest.mark.parametrize("context", [None, 3, b"bytes", "nul\x00"])
async def test_a_bad_context_is_refused(store: Store, context: object) -> None:
    """A context that is not storable text raises InvalidInput naming it; nothing is written."""
    with pytest.raises(InvalidInput, match="context"):
        await store.put(T, NS, "k", "text", context=context)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="context"):
        await store.put_many(T, [NewMemory(NS, "k", "text", context=context)])  # type: ignore[arg-type]
    assert await store.search(T) == []
