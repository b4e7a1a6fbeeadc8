"""``reembed``: memories written without an embedder get vectors later, batch by batch."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import pytest

from synopsis.errors import ConfigError, InvalidInput
from synopsis.memory._types import NewMemory
from synopsis.memory.inmemory import InMemoryStore
from synopsis.testing import BigramEmbedder, FakeClock

from .conftest import Store

T = "tenant-a"
TEXTS = {
    "k1": "the user drinks espresso every morning",
    "k2": "quarterly revenue report for the board",
    "k3": "she rides her bicycle to the office",
    "k4": "green tea in the afternoon",
    "k5": "the espresso machine needs descaling",
}


@contextmanager
def written_without_embedder(store: Store) -> Iterator[None]:
    """Writes inside the block store no vectors, as from a store opened without an embedder.

    (Every backend keeps its embedder in ``_embedder``; persistent ones could use a second
    store, the in-memory ones cannot, so all use this.)
    """
    saved, store.raw._embedder = store.raw._embedder, None
    try:
        yield
    finally:
        store.raw._embedder = saved


async def put_plain(store: Store, tenant: str = T, **extra: object) -> None:
    with written_without_embedder(store):
        await store.put_many(
            tenant, [NewMemory(("user", "u1"), k, text, **extra) for k, text in TEXTS.items()]
        )


async def test_reembed_embeds_in_batches_until_none_is_left(
    make_store: Callable[..., Store],
) -> None:
    """Each call embeds one batch, oldest first; a later call resumes; 0 means done."""
    embedder = BigramEmbedder()
    store = make_store(embedder=embedder)
    await put_plain(store)
    assert await store.count_unembedded(T) == 5
    assert await store.search(T, query="espresso", mode="vector") == []
    embedder.calls = 0
    assert [await store.reembed(T, batch=2) for _ in range(4)] == [2, 2, 1, 0]
    assert await store.count_unembedded(T) == 0
    assert embedder.calls == 3  # one embedding call per non-empty batch


async def test_reembedded_items_rank_as_if_written_with_the_embedder(
    make_store: Callable[..., Store], clock: FakeClock
) -> None:
    store = make_store(embedder=BigramEmbedder())
    reference = InMemoryStore(clock=clock, embedder=BigramEmbedder())
    await put_plain(store)
    reference.put_many(T, [NewMemory(("user", "u1"), k, text) for k, text in TEXTS.items()])
    while await store.reembed(T, batch=3):
        pass
    for mode in ("vector", "hybrid"):
        got = await store.search(T, query="espresso in the morning", mode=mode)
        want = reference.search(T, query="espresso in the morning", mode=mode)
        assert [h.item.key for h in got] == [h.item.key for h in want]
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-6)


async def test_reembed_touches_only_the_tenants_live_items_without_vectors(
    make_store: Callable[..., Store], clock: FakeClock
) -> None:
    store = make_store(embedder=BigramEmbedder())
    await put_plain(store)
    await put_plain(store, tenant="tenant-b")
    await store.put(T, ("user", "u1"), "embedded", "written with the embedder")
    with written_without_embedder(store):
        await store.put(T, ("user", "u1"), "brief", "expires soon", ttl=5)
    clock.advance(10)
    assert await store.count_unembedded(T) == 5
    assert await store.reembed(T, batch=100) == 5
    assert await store.count_unembedded(T) == 0
    assert await store.count_unembedded("tenant-b") == 5


async def test_reembed_needs_an_embedder_and_a_valid_batch(
    make_store: Callable[..., Store],
) -> None:
    plain = make_store()
    await plain.put(T, ("user", "u1"), "k", "text")
    with pytest.raises(ConfigError, match="embedder"):
        await plain.reembed(T)
    store = make_store(embedder=BigramEmbedder())
    for batch in (0, -1, 10_001):
        with pytest.raises(InvalidInput):
            await store.reembed(T, batch=batch)
    with pytest.raises(InvalidInput):
        await store.count_unembedded("")


async def test_an_item_rewritten_while_it_was_embedded_keeps_its_new_text_unembedded(
    make_store: Callable[..., Store],
) -> None:
    """The vector of the old text is not stored on the new text; the next batch embeds it."""
    rewritten = threading.Event()
    holder: list[Store] = []

    def embedder(texts: Sequence[str]) -> list[list[float]]:
        if not rewritten.is_set() and holder:
            rewritten.set()
            with written_without_embedder(holder[0]):
                holder[0].raw.put(T, ("user", "u1"), "k1", "a brand new text")
        return BigramEmbedder()(texts)

    store = make_store(embedder=embedder)
    if store.flavor == "async":
        pytest.skip("the rewrite is made from inside the embedder, which needs a sync store")
    await put_plain(store)
    holder.append(store)
    assert await store.reembed(T, batch=100) == 4
    assert await store.count_unembedded(T) == 1
    assert await store.reembed(T, batch=100) == 1
    hits = await store.search(T, query="a brand new text", mode="vector", limit=1)
    assert hits[0].item.key == "k1"
    assert hits[0].score == pytest.approx(1.0)
