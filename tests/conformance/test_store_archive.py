"""The archive over a memory store, on every backend, sync (StoreArchive) and async
(AsyncStoreArchive): written and searched in one tenant and session, ranked by the store,
erased with the user, never recalled as a memory."""

from __future__ import annotations

from typing import Any

import pytest

from synopsis.compaction.store_archive import AsyncStoreArchive, StoreArchive
from synopsis.errors import InvalidInput
from synopsis.memory import ARCHIVED_MESSAGE_KIND, TRANSCRIPT_KINDS
from synopsis.testing import BigramEmbedder

from .conftest import Store

TRIP = [
    {"role": "user", "content": "Let's plan the trip to Portugal."},
    {"role": "assistant", "content": "I booked flight TP1234 to Lisbon, leaving May 3."},
    {"role": "user", "content": "Great. Which hotel did you pick?"},
    {"role": "assistant", "content": "Hotel Avenida, room 512, breakfast included."},
    {"role": "tool", "tool_call_id": "call-7", "content": "门票已经订好了：断桥和灵隐寺"},
]


class Archive:
    """One awaitable face over StoreArchive / AsyncStoreArchive, as ``Store`` is for stores."""

    def __init__(self, store: Store, tenant: str, **options: Any) -> None:
        kind = AsyncStoreArchive if store.flavor == "async" else StoreArchive
        self.raw = kind(store.raw, tenant, **options)
        self.flavor = store.flavor

    async def write(self, messages: Any, *, session_id: str | None) -> str:
        result = self.raw.write(messages, session_id=session_id)
        return str(await result if self.flavor == "async" else result)

    async def search(
        self, query: Any, *, session_id: str | None, limit: Any = 10, neighbours: int = 0
    ) -> list[Any]:
        result = self.raw.search(query, session_id=session_id, limit=limit, neighbours=neighbours)
        return list(await result if self.flavor == "async" else result)


async def test_archived_messages_are_found_in_their_session(store: Store) -> None:
    archive = Archive(store, "tenant-a")
    where = await archive.write(TRIP[:3], session_id="s1")
    await archive.write(TRIP[3:], session_id="s1")
    await archive.write([{"role": "user", "content": "flight to Paris"}], session_id="s2")
    assert "tenant-a" in where
    hits = await archive.search("flight Lisbon", session_id="s1")
    assert hits[0].message == {"role": "assistant", "content": TRIP[1]["content"]}
    assert hits[0].score > 0
    assert all("Paris" not in h.message["content"] for h in hits)
    tool = (await archive.search("断桥", session_id="s1"))[0].message
    assert tool == {"role": "tool", "tool_call_id": "call-7", "content": TRIP[4]["content"]}
    assert [h.message["content"] for h in await archive.search("Paris", session_id="s2")] == [
        "flight to Paris"
    ]


async def test_a_hit_carries_its_dated_heading_and_neighbours_within_its_batch(
    store: Store,
) -> None:
    archive = Archive(store, "tenant-a")
    await archive.write(
        [{"role": "user", "content": "Session 3 took place on 25 May, 2023."}], session_id="s1"
    )
    await archive.write(TRIP[:3], session_id="s1")
    (hit,) = await archive.search("flight Lisbon", session_id="s1", limit=1, neighbours=1)
    assert hit.message["content"] == TRIP[1]["content"]
    assert [m["content"] for m in hit.before] == [TRIP[0]["content"]]
    assert [m["content"] for m in hit.after] == [TRIP[2]["content"]]
    assert hit.dated is None  # the heading was in another batch: only a batch's own is kept
    (first,) = await archive.search("trip Portugal", session_id="s1", limit=1, neighbours=2)
    assert first.before == ()  # the first of its batch
    dated = Archive(store, "tenant-d")
    await dated.write(
        [{"role": "user", "content": "[1:56 pm on 8 May, 2023] Off to Lisbon."}, TRIP[1]],
        session_id="s1",
    )
    hits = await dated.search("TP1234", session_id="s1", limit=1)
    assert hits[0].dated == "1:56 pm on 8 May, 2023"


async def test_a_tenant_never_finds_another_tenants_archive(store: Store) -> None:
    await Archive(store, "tenant-a").write(TRIP, session_id="s1")
    other = Archive(store, "tenant-b")
    assert await other.search("flight Lisbon", session_id="s1") == []
    await other.write([{"role": "user", "content": "flight to Oslo"}], session_id="s1")
    found = [h.message["content"] for h in await other.search("flight", session_id="s1")]
    assert found == ["flight to Oslo"]


async def test_a_users_archive_goes_with_the_user(store: Store) -> None:
    archive = Archive(store, "tenant-a", user_id="u1")
    await archive.write(TRIP, session_id="s1")
    assert await archive.search("Avenida", session_id="s1")
    assert await store.delete_user("tenant-a", "u1") >= len(TRIP)
    assert await archive.search("Avenida", session_id="s1") == []


async def test_archived_messages_are_not_memories(store: Store) -> None:
    """Their kind is a transcript kind: searches that leave transcripts out never see them."""
    assert ARCHIVED_MESSAGE_KIND in TRANSCRIPT_KINDS
    await Archive(store, "tenant-a", user_id="u1").write(TRIP, session_id="s1")
    hits = await store.search(
        "tenant-a", ("user", "u1"), query="Avenida", exclude_kinds=TRANSCRIPT_KINDS
    )
    assert hits == []


async def test_keys_keep_the_order_of_archiving(store: Store) -> None:
    ticks = iter(range(1, 100))
    archive = Archive(store, "tenant-a", clock=lambda: next(ticks))
    await archive.write(TRIP[:2], session_id="s1")
    await archive.write(TRIP[2:], session_id="s1")
    items = await store.search("tenant-a", ("archive", "s1"), limit=10)
    keys = sorted(hit.item.key for hit in items)
    texts = {hit.item.key: hit.item.text for hit in items}
    assert [texts[key] for key in keys] == [m["content"] for m in TRIP]


async def test_hybrid_with_the_stores_embedder(make_store: Any) -> None:
    store = make_store(embedder=BigramEmbedder(), embedder_id="bigram-64")
    archive = Archive(store, "tenant-a")
    await archive.write(
        [
            {"role": "user", "content": "kubernetes cluster upgraded"},
            *[{"role": "user", "content": f"note {i}: lunch at noon"} for i in range(5)],
        ],
        session_id="s1",
    )
    hits = await archive.search("kubernetis", session_id="s1")
    assert hits[0].message["content"] == "kubernetes cluster upgraded"


@pytest.mark.parametrize(("query", "limit"), [("", 10), (None, 10), ("x", 0), ("x", 1000)])
async def test_bad_searches_are_refused(store: Store, query: Any, limit: Any) -> None:
    with pytest.raises(InvalidInput):
        await Archive(store, "tenant-a").search(query, session_id="s1", limit=limit)


async def test_a_message_without_a_role_is_refused_and_nothing_written(store: Store) -> None:
    archive = Archive(store, "tenant-a")
    with pytest.raises(InvalidInput, match="role"):
        await archive.write([TRIP[0], {"content": "no role"}], session_id="s1")
    assert await archive.search("Portugal", session_id="s1") == []
