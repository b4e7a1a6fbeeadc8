"""Tenant isolation under hostile input, on every backend.

Two tenants hold look-alike data. Attack strings go into every field; a call either returns
clean results or raises one of our errors, never reaches the other tenant, and loses nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synopsis.errors import SynopsisError

from .conftest import Store

A, B = "tenant-a", "tenant-b"

ATTACKS = [
    "%",
    "_",
    "%_%",
    "'",
    '"',
    "\\",
    "\\%",
    "' OR 1=1 --",
    "' OR '1'='1",
    '"); DROP TABLE memories; --',
    "'; DROP TABLE summaries; --",
    "*",
    "coffee*",
    "NEAR(coffee tea)",
    "coffee OR tea",
    "coffee AND NOT tea",
    "-coffee",
    "^coffee",
    "text:coffee",
    '"coffee',
    "coffee\"'",
    "{terms}: coffee",
    "a:b:c",
    "咖啡' OR 1=1 --",
    "\x1f",
    "\x00",
    "\u2028",
    "..",
    "/",
    "user",
    "",
]


async def seed(store: Store) -> None:
    """Give both tenants the same shape of data; tenant B's texts say "secret"."""
    for tenant, word in ((A, "public"), (B, "secret")):
        await store.put(tenant, ("user", "u1"), "k", f"coffee tea {word} 咖啡", tags={"t": word})
        await store.put(tenant, ("user", "u1", "session", "s1"), "%", f"{word} % _ ' \"")
        await store.put(tenant, ("user", "%"), "_", f"{word} wildcard")


async def snapshot(store: Store, tenant: str) -> list[tuple[Any, ...]]:
    hits = await store.search(tenant, limit=1000)
    return sorted((h.item.namespace, h.item.key, h.item.text) for h in hits)


async def attempt(call: Any) -> Any:
    """Run one call; our errors are fine, anything else fails the test."""
    try:
        return await call
    except SynopsisError:
        return None


def assert_clean(result: Any) -> None:
    """A result may only ever hold tenant A's data."""
    items = result if isinstance(result, list) else [result]
    for entry in items:
        item = getattr(entry, "item", entry)
        if hasattr(item, "tenant"):
            assert item.tenant == A
            assert "secret" not in item.text


@pytest.mark.parametrize("attack", ATTACKS)
async def test_attack_strings_never_cross_tenants(store: Store, attack: str) -> None:
    """Hostile namespace labels, keys, tags and queries only ever reach tenant A's data."""
    await seed(store)
    before_b = await snapshot(store, B)
    calls = [
        store.search(A, query=attack, limit=1000),
        store.search(A, (attack,), query="secret"),
        store.search(A, ("user", attack), limit=1000),
        store.search(A, query="secret " + attack),
        store.search(A, tags={"t": attack}),
        store.search(A, tags={attack: "secret"}),
        store.search(A, kind=attack),
        store.get(A, ("user", attack), attack),
        store.get(A, ("user", "u1"), attack),
        store.list_namespaces(A, prefix=("user", attack)),
        store.put(A, ("user", attack), attack, attack, kind=attack, tags={attack: attack}),
        store.put(A, ("user", "x"), "k-" + attack, "coffee " + attack),
        store.search(A, ("user", attack), query=attack),
        store.delete(A, ("user", attack), attack),
        store.delete_user(A, attack),
        store.latest_summary(A, "u1", attack),
        store.latest_summary(A, attack, "s1"),
        store.summary_history(A, "u1", attack),
        store.summary_history(A, attack, "s1"),
        store.complete_outbox(A, "u1", attack, 1),
        store.complete_outbox(A, attack, "s1", 1),
        store.fail_outbox(A, "u1", attack, 1),
        store.fail_outbox(A, attack, "s1", 1),
        store.pending_outbox(attack),
        store.deletion_generation(A, attack),
        store.claim_summary_job(A, attack, attack, covers_to=1, owner=attack, lease_seconds=9),
        store.release_summary_job(A, attack, attack, owner=attack),
    ]
    for call in calls:
        assert_clean(await attempt(call))
    assert await store.search(A, query="secret") == []
    assert await store.get(A, ("user", "u1"), "k") is not None
    assert await snapshot(store, B) == before_b


@pytest.mark.parametrize("tenant", ATTACKS)
async def test_attack_tenant_ids_are_scoped_or_rejected(store: Store, tenant: str) -> None:
    """An odd tenant id is either refused or is its own, empty tenant."""
    await seed(store)
    before = {A: await snapshot(store, A), B: await snapshot(store, B)}
    for call in (
        store.search(tenant, query="coffee secret public"),
        store.search(tenant),
        store.list_namespaces(tenant),
        store.get(tenant, ("user", "u1"), "k"),
        store.delete_user(tenant, "u1"),
        store.pending_outbox(tenant),
        store.fail_outbox(tenant, "u1", "s1", 1),
        store.latest_summary(tenant, "u1", "s1"),
        store.release_summary_job(tenant, "u1", "s1", owner="x"),
    ):
        result = await attempt(call)
        assert result in (None, [], 0, False)
    assert {A: await snapshot(store, A), B: await snapshot(store, B)} == before


async def test_the_same_key_in_two_tenants_is_two_items(store: Store) -> None:
    """Writing, reading and deleting in one tenant leaves the other's twin untouched."""
    await seed(store)
    await store.put(A, ("user", "u1"), "k", "overwritten")
    assert (await store.get(B, ("user", "u1"), "k")).text.startswith("coffee tea secret")
    assert await store.delete(A, ("user", "u1"), "k") is True
    assert await store.get(B, ("user", "u1"), "k") is not None
    assert await store.delete_user(A, "u1") == 1
    assert len(await snapshot(store, B)) == 3


@pytest.mark.parametrize("size", [0, 1, 1_000_000])
async def test_huge_and_empty_queries_are_harmless(store: Store, size: int) -> None:
    """An empty or 1 MB query returns clean results (or our error), never B's data."""
    await seed(store)
    query = ("secret coffee 咖啡 " * (size // 20 + 1))[:size]
    assert_clean(await attempt(store.search(A, query=query, limit=1000)))
    assert len(await snapshot(store, B)) == 3


async def test_huge_text_round_trips(store: Store) -> None:
    """A 1 MB text with quotes and FTS syntax is stored and found by its words."""
    text = ('" NEAR( * OR - ^ : ' * 50_000) + " needle"
    await store.put(A, ("user", "u1"), "big", text)
    assert (await store.get(A, ("user", "u1"), "big")).text == text
    assert [h.item.key for h in await store.search(A, query="needle")] == ["big"]
    assert await store.search(B, query="needle") == []


def _summary(tenant: str, user: str, text: str) -> Any:
    from synopsis.memory._types import SessionSummary

    return SessionSummary(
        tenant=tenant, user_id=user, session_id="s1", version=1, text=text,
        covers_from=0, covers_to=3, model="m", content_hash=f"h-{text}",
    )  # fmt: skip


async def test_summaries_do_not_cross_tenants(store: Store) -> None:
    """A session id shared by two tenants never leaks summaries or outbox entries."""
    for tenant in (A, B):
        await store.save_summary(_summary(tenant, "u1", f"{tenant} text"))
    assert (await store.latest_summary(A, "u1", "s1")).text == f"{A} text"
    assert [e.summary.tenant for e in await store.pending_outbox(A)] == [A]
    assert await store.fail_outbox(A, "u1", "s1", 1) == 1
    assert [e.attempts for e in await store.pending_outbox(B)] == [0]
    await store.complete_outbox(A, "u1", "s1", 1)
    assert [e.summary.tenant for e in await store.pending_outbox()] == [B]
    assert await store.delete_user(A, "u1") == 1
    assert (await store.latest_summary(B, "u1", "s1")).text == f"{B} text"
    assert await store.deletion_generation(A, "u1") == 1
    assert await store.deletion_generation(B, "u1") == 0


async def test_summaries_do_not_cross_users(store: Store) -> None:
    """Two users of one tenant, one session id: summaries, outbox, claims and deletion stay
    with their user (alice's PIN never reaches bob)."""
    await store.save_summary(_summary(A, "alice", "my bank PIN is 4321"))
    await store.save_summary(_summary(A, "bob", "bob likes tea"))
    assert (await store.latest_summary(A, "bob", "s1")).text == "bob likes tea"
    assert [s.text for s in await store.summary_history(A, "bob", "s1")] == ["bob likes tea"]
    assert await store.fail_outbox(A, "bob", "s1", 1) == 1
    await store.complete_outbox(A, "bob", "s1", 1)
    [pending] = await store.pending_outbox(A)
    assert (pending.summary.user_id, pending.attempts) == ("alice", 0)
    claim = {"covers_to": 3, "lease_seconds": 60}
    assert await store.claim_summary_job(A, "alice", "s1", owner="r1", **claim)
    assert await store.claim_summary_job(A, "bob", "s1", owner="r2", **claim)
    assert not await store.release_summary_job(A, "bob", "s1", owner="r1")
    assert await store.delete_user(A, "alice") == 1
    assert await store.latest_summary(A, "alice", "s1") is None
    assert (await store.latest_summary(A, "bob", "s1")).text == "bob likes tea"
    assert await store.claim_summary_job(A, "alice", "s1", owner="r3", **claim)
    assert not await store.claim_summary_job(A, "bob", "s1", owner="r3", **claim)
    assert await store.deletion_generation(A, "bob") == 0


labels = st.text(alphabet=st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=12)
queries = st.text(max_size=40) | st.sampled_from(ATTACKS)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    namespace=st.lists(labels, min_size=1, max_size=4).map(tuple),
    key=labels,
    query=queries,
    data=st.data(),
)
def test_random_input_never_crosses_tenants(
    sync_store: Any,
    namespace: tuple[str, ...],
    key: str,
    query: str,
    data: st.DataObject,
) -> None:
    """Random labels, keys and queries written to B are never seen through A."""
    # No backend stores NUL (tested elsewhere); the query itself keeps it.
    text = f"{query} {key} {' '.join(namespace)} secret".replace("\x00", " ")
    sync_store.put(B, namespace, key, text)
    sync_store.put(A, ("user", "u1"), "mine", "public words")
    prefix = namespace[: data.draw(st.integers(0, len(namespace)))]
    for hits in (
        sync_store.search(A, prefix, query=query, limit=1000),
        sync_store.search(A, prefix, limit=1000),
        sync_store.search(A, query=key, limit=1000),
    ):
        assert all(h.item.tenant == A and "secret" not in h.item.text for h in hits)
    assert all(ns == ("user", "u1") for ns in sync_store.list_namespaces(A, prefix=prefix))
    assert sync_store.get(A, namespace, key) is None
    assert sync_store.get(B, namespace, key) is not None
