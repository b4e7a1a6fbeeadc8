"""``bulk_load`` stores what ``put_many`` stores, on every backend, sync and async.

Each test writes the same items into two tenants of one store, one by ``put_many`` (row by
row statistics) and one by ``bulk_load`` (statistics rebuilt once), and compares what the
tenants hold and how they rank: the tenant-wide statistics after a bulk load must be exactly
those of the row-by-row writes, so every score is equal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import pytest

from synopsis.errors import InvalidInput, InvalidNamespace, StoreError
from synopsis.memory._types import NewMemory
from synopsis.testing import BigramEmbedder, FakeClock

from .conftest import Store
from .test_memory_store import _break_inserts_of_key_boom

ROWS, BULK = "tenant-rows", "tenant-bulk"
WORDS = ("parser", "coffee", "tea", "green", "espresso", "report", "board", "morning", "index")
QUERIES = ["parser", "coffee tea", "green", "咖啡", "espresso morning report", "board 解析"]


def items(count: int, start: int = 0, *, prefix: str = "k") -> list[NewMemory]:
    """``count`` items over a few users and kinds, every fifth one Chinese, some with a ttl."""
    made = []
    for i in range(start, start + count):
        words = " ".join(WORDS[(i * j) % len(WORDS)] for j in range(1, 2 + i % 7))
        text = f"用户喜欢喝咖啡 {i}" if i % 5 == 0 else f"{words} note {i}"
        made.append(
            NewMemory(
                ("user", f"u{i % 4}", "notes"),
                f"{prefix}{i}",
                text,
                kind=("fact", "note", "turn")[i % 3],
                ttl=30 if i % 11 == 0 else None,
                context="board 解析器" if i % 6 == 0 else "",
            )
        )
    return made


async def ranking(store: Store, tenant: str, prefix: Sequence[str] = ()) -> list[object]:
    """Every query's hits, as ``(namespace, key, score)``, for the tenant (under ``prefix``)."""
    found: list[object] = []
    for query in QUERIES:
        hits = await store.search(tenant, tuple(prefix), query=query, limit=100)
        found.append([(h.item.namespace, h.item.key, h.score) for h in hits])
    return found


async def same_state(store: Store) -> None:
    """Both tenants hold the same items and rank every query with the same scores."""
    for prefix in ((), ("user",), ("user", "u1")):
        assert await ranking(store, BULK, prefix) == await ranking(store, ROWS, prefix)
    rows = await store.search(ROWS, limit=500)
    bulk = await store.search(BULK, limit=500)
    assert [replace(h.item, tenant=BULK) for h in rows] == [h.item for h in bulk]


async def test_bulk_load_ranks_exactly_as_put_many(store: Store, clock: FakeClock) -> None:
    """A load into an empty store, then a smaller one that replaces and adds, then row-by-row
    writes after it: after each step the bulk tenant ranks with put_many's scores."""
    first = items(120)
    assert await store.bulk_load(BULK, first) == 120
    await store.put_many(ROWS, first)
    await same_state(store)
    clock.advance(40)  # the items with a ttl expired: replacing one restarts its created_at
    second = [*items(30, 100), replace(first[3], text="green tea, replaced")]
    assert await store.bulk_load(BULK, second) == 31
    await store.put_many(ROWS, second)
    await same_state(store)
    for tenant in (ROWS, BULK):  # the per-row triggers are back: puts and deletes count
        await store.put(tenant, ("user", "u1", "notes"), "late", "parser coffee late")
        await store.delete(tenant, ("user", "u2", "notes"), "k2")
    await same_state(store)


async def test_bulk_load_returns_distinct_addresses_and_takes_any_iterable(store: Store) -> None:
    """The count is of distinct addresses (the last item of one wins); a generator works;
    an empty load writes nothing and returns 0 (the tenant is still checked)."""
    batch = (NewMemory(("user", "u1"), f"k{i % 3}", f"coffee {i}") for i in range(5))
    assert await store.bulk_load(BULK, batch) == 3
    assert (await store.get(BULK, ("user", "u1"), "k0")).text == "coffee 3"  # type: ignore[union-attr]
    assert await store.bulk_load(BULK, []) == 0
    with pytest.raises(InvalidInput):
        await store.bulk_load("", [])


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (NewMemory((), "k", "x"), InvalidNamespace),
        (NewMemory(("user", "u1"), "", "x"), InvalidInput),
        (NewMemory(("user", "u1"), "k", "x", ttl=0), InvalidInput),
    ],
)
async def test_bulk_load_bad_item_names_its_index_and_loses_nothing(
    store: Store, bad: NewMemory, error: type[Exception]
) -> None:
    """A bad item raises put_many's error naming its index; nothing stored before is lost."""
    before = await store.put(BULK, ("user", "u1"), "a", "old coffee")
    with pytest.raises(error, match=r"^item 2: "):
        await store.bulk_load(BULK, [*items(2), bad])
    assert await store.get(BULK, ("user", "u1"), "a") == before
    assert [h.item.key for h in await store.search(BULK, query="coffee")] == ["a"]


@pytest.mark.backends("sqlite-file", "postgres")
async def test_bulk_load_is_one_transaction(
    make_store: Callable[..., Store], request: pytest.FixtureRequest
) -> None:
    """When the database refuses one row, nothing of the load is written or counted, and
    the store goes on writing and ranking as before (its triggers and index are intact)."""
    store = make_store()
    await store.put_many(ROWS, items(20))
    await store.bulk_load(BULK, items(20))
    backend, tmp_path = request.getfixturevalue("backend"), request.getfixturevalue("tmp_path")
    _break_inserts_of_key_boom(backend, tmp_path, request)
    with pytest.raises(StoreError):
        await store.bulk_load(BULK, [*items(50, 20), NewMemory(("user", "u1"), "boom", "x")])
    await same_state(store)
    late = NewMemory(("user", "u1", "notes"), "late", "parser late")
    await store.bulk_load(BULK, [late])
    await store.put_many(ROWS, [late])
    await same_state(store)


async def test_bulk_load_embeds_and_stores_vectors(make_store: Callable[..., Store]) -> None:
    """With an embedder the load is embedded in one call and found by vector search; a load
    over items that had vectors replaces them."""
    embedder = BigramEmbedder()
    store = make_store(embedder=embedder)
    near = NewMemory(("user", "u1"), "near", "the user drinks espresso every morning")
    far = NewMemory(("user", "u1"), "far", "quarterly revenue report for the board")
    await store.bulk_load(BULK, [near, far])
    assert embedder.calls == 1
    hits = await store.search(BULK, query="user drinks espresso", mode="vector")
    assert [h.item.key for h in hits] == ["near", "far"]
    await store.bulk_load(BULK, [replace(far, text="the user drinks espresso every morning!")])
    hits = await store.search(BULK, query="user drinks espresso every morning", mode="vector")
    assert hits[0].score == pytest.approx(hits[1].score, abs=0.05)
    assert await store.count_unembedded(BULK) == 0
