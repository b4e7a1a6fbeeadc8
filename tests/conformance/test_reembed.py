"""``reembed``: memories written without an embedder get vectors later, batch by batch."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext

import pytest

from synopsis.errors import ConfigError, InvalidInput
from synopsis.memory._types import Embedder, NewMemory
from synopsis.memory.inmemory import InMemoryStore
from synopsis.testing import BigramEmbedder, FakeClock

from .conftest import PERSISTENT, Store

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
                rewrite = holder[0].raw.put(T, ("user", "u1"), "k1", "a brand new text")
                if holder[0].flavor == "async":  # the embedder runs on a worker thread
                    asyncio.run_coroutine_threadsafe(rewrite, loop).result()
        return BigramEmbedder()(texts)

    loop = asyncio.get_running_loop()
    store = make_store(embedder=embedder)
    await put_plain(store)
    holder.append(store)
    assert await store.reembed(T, batch=100) == 4
    assert await store.count_unembedded(T) == 1
    assert await store.reembed(T, batch=100) == 1
    hits = await store.search(T, query="a brand new text", mode="vector", limit=1)
    assert hits[0].item.key == "k1"
    assert hits[0].score == pytest.approx(1.0)


# --- which model made a vector ---------------------------------------------------------------

QUERY = "espresso in the morning"


@contextmanager
def searching_with(store: Store, embedder: Embedder, embedder_id: str) -> Iterator[None]:
    """Inside the block the store embeds with ``embedder`` named ``embedder_id``, as a store
    opened again with another model would (the in-memory stores cannot be opened again)."""
    saved = store.raw._embedder, store.raw._embedder_id
    store.raw._embedder, store.raw._embedder_id = embedder, embedder_id
    try:
        yield
    finally:
        store.raw._embedder, store.raw._embedder_id = saved


async def same_ranking(store: Store, reference: InMemoryStore, mode: str) -> None:
    got = await store.search(T, query=QUERY, mode=mode, limit=50)
    want = reference.search(T, query=QUERY, mode=mode, limit=50)
    assert [h.item.key for h in got] == [h.item.key for h in want]
    assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-6)


async def test_vectors_of_another_model_count_as_missing_until_reembedded(
    make_store: Callable[..., Store], clock: FakeClock
) -> None:
    """Same vectors, other identity: not searched, counted as unembedded, then converted."""
    store = make_store(embedder=BigramEmbedder(), embedder_id="bigram@1")
    await store.put_many(T, [NewMemory(("user", "u1"), k, t) for k, t in TEXTS.items()])
    assert store.raw.embedder_id == "bigram@1"
    assert await store.count_unembedded(T) == 0
    assert await store.search(T, query=QUERY, mode="vector")
    with searching_with(store, BigramEmbedder(), "bigram@2"):
        assert await store.count_unembedded(T) == 5
        assert await store.search(T, query=QUERY, mode="vector") == []
        keyword_only = InMemoryStore(clock=clock, embedder=BigramEmbedder())
        keyword_only.put_many(T, [NewMemory(("user", "u1"), k, t) for k, t in TEXTS.items()])
        keyword_only.forget_vectors(T)
        await same_ranking(store, keyword_only, "hybrid")
        assert [await store.reembed(T, batch=3) for _ in range(3)] == [3, 2, 0]
        assert await store.count_unembedded(T) == 0
        assert await store.search(T, query=QUERY, mode="vector")
    assert await store.count_unembedded(T) == 5  # now the first model's vectors are gone
    assert await store.search(T, query=QUERY, mode="vector") == []


async def test_every_backend_ranks_only_the_vectors_of_its_own_model(
    make_store: Callable[..., Store], clock: FakeClock
) -> None:
    """A store holding vectors of two models ranks as one holding only its model's vectors."""
    mine, other = BigramEmbedder(), BigramEmbedder(dims=16)
    store = make_store(embedder=mine, embedder_id="mine")
    # The reference holds vectors only for the items ``mine`` embedded.
    reference = InMemoryStore(clock=clock, embedder=mine, embedder_id="mine")
    for number, (key, text) in enumerate(TEXTS.items()):
        by_other = number % 2 == 1
        with searching_with(store, other, "other") if by_other else nullcontext():
            await store.put(T, ("user", "u1"), key, text)
        with written_without_embedder(Store(reference, "sync")) if by_other else nullcontext():
            reference.put(T, ("user", "u1"), key, text)
    assert await store.count_unembedded(T) == reference.count_unembedded(T) == 2
    for mode in ("vector", "hybrid"):
        await same_ranking(store, reference, mode)


async def test_forget_vectors_then_reembed_gives_every_item_a_new_vector(
    make_store: Callable[..., Store],
) -> None:
    """What ``reembed --all`` does: every vector of the tenant (only it) goes, then returns."""
    embedder = BigramEmbedder()
    store = make_store(embedder=embedder)
    for tenant in (T, "tenant-b"):
        await store.put_many(tenant, [NewMemory(("user", "u1"), k, t) for k, t in TEXTS.items()])
    with written_without_embedder(store):
        await store.put(T, ("user", "u1"), "plain", "no vector here")
    assert await store.count_unembedded(T) == 1
    assert await store.forget_vectors(T) == 5
    assert await store.count_unembedded(T) == 6
    assert await store.count_unembedded("tenant-b") == 0
    assert await store.search(T, query=QUERY, mode="vector") == []
    embedder.calls = 0
    assert [await store.reembed(T, batch=4) for _ in range(3)] == [4, 2, 0]
    assert embedder.calls == 2
    assert (await store.search(T, query=QUERY, mode="vector"))[0].item.key in {"k1", "k5"}
    assert await store.forget_vectors(T) == 6
    assert await store.forget_vectors(T) == 0


@pytest.mark.backends(*PERSISTENT)
async def test_a_store_opened_with_another_model_searches_none_of_the_old_vectors(
    make_store: Callable[..., Store],
) -> None:
    """Opened again with a model of another identity, the data holds no vector for it."""
    first = make_store(embedder=BigramEmbedder())
    await first.put_many(T, [NewMemory(("user", "u1"), k, t) for k, t in TEXTS.items()])
    again = make_store(embedder=BigramEmbedder(), embedder_id="bigram-retrained")
    assert await again.count_unembedded(T) == 5
    assert await again.search(T, query=QUERY, mode="vector") == []
    assert await again.reembed(T) == 5
    assert await first.count_unembedded(T) == 5
    plain = make_store()
    assert await plain.count_unembedded(T) == 0  # no embedder: any vector is a vector


async def test_an_embedder_id_needs_an_embedder_and_printable_text(
    make_store: Callable[..., Store],
) -> None:
    with pytest.raises(ConfigError, match="embedder"):
        make_store(embedder_id="orphan")
    for bad in ("", "  ", "a\nb", "x" * 201):
        with pytest.raises(ConfigError, match="embedder_id"):
            make_store(embedder=BigramEmbedder(), embedder_id=bad)


async def test_adopting_changes_no_vector_of_a_known_model(
    make_store: Callable[..., Store],
) -> None:
    """Only vectors stored before models were recorded can be adopted (see the migrations)."""
    store = make_store(embedder=BigramEmbedder(), embedder_id="one")
    await store.put_many(T, [NewMemory(("user", "u1"), k, t) for k, t in TEXTS.items()])
    with searching_with(store, BigramEmbedder(), "two"):
        assert await store.adopt_vectors(T) == 0
        assert await store.count_unembedded(T) == 5
    with pytest.raises(ConfigError, match="embedder"):
        await make_store().adopt_vectors(T)
