"""The SummaryStore contract (versions, idempotency, outbox), on every backend."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from synopsis.errors import InvalidInput, InvalidNamespace, StoreError
from synopsis.memory._types import SessionSummary
from synopsis.testing import FakeClock

from .conftest import PERSISTENT, Store

T = "tenant-a"


def summary(
    version: int = 1,
    *,
    session: str = "s1",
    user: str = "u1",
    tenant: str = T,
    text: str | None = None,
) -> SessionSummary:
    body = text if text is not None else f"summary v{version} of {session}"
    return SessionSummary(
        tenant=tenant,
        user_id=user,
        session_id=session,
        version=version,
        text=body,
        covers_from=0,
        covers_to=20 * version,
        model="fake:model",
        content_hash=f"hash:{body}",
    )


def pending_keys(entries: list) -> list[tuple[str, str, int]]:  # type: ignore[type-arg]
    return [(e.summary.tenant, e.summary.session_id, e.summary.version) for e in entries]


async def test_save_then_read_latest_and_history(store: Store, clock: FakeClock) -> None:
    """Saved versions come back: latest is the newest, history is ascending."""
    first = await store.save_summary(summary(1))
    clock.advance(5)
    second = await store.save_summary(summary(2))
    assert first.created_at == datetime.fromtimestamp(clock.now - 5, tz=UTC)
    assert second == replace(summary(2), created_at=datetime.fromtimestamp(clock.now, tz=UTC))
    assert await store.latest_summary(T, "u1", "s1") == second
    assert await store.summary_history(T, "u1", "s1") == [first, second]


async def test_missing_session_reads_as_empty(store: Store) -> None:
    """An unknown session has no latest summary and an empty history."""
    assert await store.latest_summary(T, "u1", "nope") is None
    assert await store.summary_history(T, "u1", "nope") == []


async def test_given_created_at_is_kept(store: Store) -> None:
    """A summary that already carries created_at keeps it."""
    when = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    saved = await store.save_summary(replace(summary(1), created_at=when))
    assert saved.created_at == when
    assert (await store.latest_summary(T, "u1", "s1")).created_at == when


async def test_same_version_same_hash_is_a_no_op(store: Store, clock: FakeClock) -> None:
    """Saving the same version and hash again returns the stored row and enqueues nothing."""
    stored = await store.save_summary(summary(1))
    clock.advance(60)
    again = await store.save_summary(summary(1))
    assert again == stored
    assert await store.summary_history(T, "u1", "s1") == [stored]
    assert len(await store.pending_outbox()) == 1


async def test_same_version_other_hash_conflicts(store: Store) -> None:
    """A different content hash for an existing version raises StoreError and changes nothing."""
    stored = await store.save_summary(summary(1))
    with pytest.raises(StoreError):
        await store.save_summary(summary(1, text="something else"))
    assert await store.summary_history(T, "u1", "s1") == [stored]


async def test_versions_must_go_up(store: Store) -> None:
    """A version not above the newest raises StoreError; gaps are allowed."""
    await store.save_summary(summary(3))
    with pytest.raises(StoreError):
        await store.save_summary(summary(2))
    saved = await store.save_summary(summary(7))
    assert (await store.latest_summary(T, "u1", "s1")) == saved
    assert [s.version for s in await store.summary_history(T, "u1", "s1")] == [3, 7]


async def test_one_session_id_of_two_users_is_two_sessions(store: Store) -> None:
    """Two users of one tenant who both say "s1" keep separate versions, each from 1."""
    alice = await store.save_summary(summary(1, user="alice", text="my bank PIN is 4321"))
    bob = await store.save_summary(summary(1, user="bob", text="bob's notes"))
    bob2 = await store.save_summary(summary(2, user="bob", text="more of bob"))
    assert await store.latest_summary(T, "alice", "s1") == alice
    assert await store.latest_summary(T, "bob", "s1") == bob2
    assert await store.summary_history(T, "bob", "s1") == [bob, bob2]
    assert await store.latest_summary(T, "carol", "s1") is None


async def test_sessions_are_scoped_by_tenant(store: Store) -> None:
    """The same session id under two tenants are two independent sessions."""
    a = await store.save_summary(summary(1, tenant="ta"))
    b = await store.save_summary(summary(5, tenant="tb", text="other"))
    assert await store.latest_summary("ta", "u1", "s1") == a
    assert await store.latest_summary("tb", "u1", "s1") == b
    assert await store.summary_history("tc", "u1", "s1") == []


@pytest.mark.parametrize(
    "bad",
    [
        summary(0),
        replace(summary(1), tenant=""),
        replace(summary(1), user_id=""),
        replace(summary(1), session_id=""),
        replace(summary(1), content_hash=""),
        replace(summary(1), covers_from=5, covers_to=2),
        replace(summary(1), covers_from=-1),
        replace(summary(1), version=2**64),
        replace(summary(1), text="\ud800"),
        replace(summary(1), text="a\x00b"),
        replace(summary(1), model="m\x00"),
    ],
)
async def test_malformed_summaries_are_rejected(store: Store, bad: SessionSummary) -> None:
    """A summary with a bad field raises InvalidInput and stores nothing."""
    with pytest.raises(InvalidInput):
        await store.save_summary(bad)
    assert await store.pending_outbox() == []


async def test_save_enqueues_an_outbox_entry(store: Store) -> None:
    """Every new version gets one pending outbox entry carrying the stored summary."""
    stored = await store.save_summary(summary(1))
    [entry] = await store.pending_outbox()
    assert entry.summary == stored
    assert entry.attempts == 0


async def test_outbox_is_oldest_first_filtered_and_limited(store: Store, clock: FakeClock) -> None:
    """pending_outbox lists by enqueue time, optionally for one tenant, at most limit."""
    await store.save_summary(summary(1, session="b", tenant="ta"))
    clock.advance(1)
    await store.save_summary(summary(1, session="a", tenant="tb"))
    clock.advance(1)
    await store.save_summary(summary(2, session="b", tenant="ta"))
    assert pending_keys(await store.pending_outbox()) == [
        ("ta", "b", 1),
        ("tb", "a", 1),
        ("ta", "b", 2),
    ]
    assert pending_keys(await store.pending_outbox("ta")) == [("ta", "b", 1), ("ta", "b", 2)]
    assert pending_keys(await store.pending_outbox(limit=1)) == [("ta", "b", 1)]
    assert await store.pending_outbox("nobody") == []


async def test_complete_outbox_is_idempotent(store: Store) -> None:
    """Completing removes an entry from pending; repeating it, or a missing one, is harmless."""
    await store.save_summary(summary(1))
    await store.save_summary(summary(2))
    await store.complete_outbox(T, "u1", "s1", 1)
    await store.complete_outbox(T, "u1", "s1", 1)
    await store.complete_outbox(T, "u1", "missing", 9)
    await store.complete_outbox("other-tenant", "u1", "s1", 2)
    assert pending_keys(await store.pending_outbox()) == [(T, "s1", 2)]
    assert len(await store.summary_history(T, "u1", "s1")) == 2


async def test_fail_outbox_counts_each_failure(store: Store) -> None:
    """Each fail_outbox adds one attempt, returns the new count and shows in pending_outbox."""
    await store.save_summary(summary(1))
    assert await store.fail_outbox(T, "u1", "s1", 1) == 1
    assert await store.fail_outbox(T, "u1", "s1", 1) == 2
    assert await store.fail_outbox(T, "u1", "s1", 1) == 3
    [entry] = await store.pending_outbox()
    assert entry.attempts == 3
    assert [e.attempts for e in await store.pending_outbox(T)] == [3]


async def test_fail_outbox_without_a_pending_entry_returns_zero(store: Store) -> None:
    """A missing entry, a missing version or a completed entry counts nothing and returns 0."""
    await store.save_summary(summary(1))
    assert await store.fail_outbox(T, "u1", "missing", 1) == 0
    assert await store.fail_outbox(T, "u1", "s1", 2) == 0
    await store.complete_outbox(T, "u1", "s1", 1)
    assert await store.fail_outbox(T, "u1", "s1", 1) == 0
    assert await store.pending_outbox() == []


async def test_failed_entries_queue_behind_fresh_ones(store: Store, clock: FakeClock) -> None:
    """pending_outbox orders by attempts, then age: a failing entry never starves newer ones."""
    for session in ("a", "b", "c"):
        await store.save_summary(summary(1, session=session))
        clock.advance(1)
    await store.fail_outbox(T, "u1", "a", 1)
    assert pending_keys(await store.pending_outbox()) == [(T, "b", 1), (T, "c", 1), (T, "a", 1)]
    await store.fail_outbox(T, "u1", "b", 1)
    await store.fail_outbox(T, "u1", "b", 1)
    entries = await store.pending_outbox()
    assert pending_keys(entries) == [(T, "c", 1), (T, "a", 1), (T, "b", 1)]
    assert [e.attempts for e in entries] == [0, 1, 2]
    assert pending_keys(await store.pending_outbox(limit=1)) == [(T, "c", 1)]
    await store.fail_outbox(T, "u1", "c", 1)
    # Equal attempts fall back to the oldest first.
    assert pending_keys(await store.pending_outbox(T, limit=2)) == [(T, "a", 1), (T, "c", 1)]


async def test_fail_outbox_is_scoped_by_tenant(store: Store) -> None:
    """Failing another tenant's (tenant, session, version) changes nothing and returns 0."""
    await store.save_summary(summary(1, tenant="ta"))
    await store.save_summary(summary(1, tenant="tb", text="other"))
    assert await store.fail_outbox("tc", "u1", "s1", 1) == 0
    assert await store.fail_outbox("tb", "u1", "s1", 1) == 1
    assert [e.attempts for e in await store.pending_outbox("ta")] == [0]
    assert [e.attempts for e in await store.pending_outbox("tb")] == [1]


async def test_completing_after_failures_removes_the_entry(store: Store) -> None:
    """An entry that failed before can still be completed; it then leaves the outbox."""
    await store.save_summary(summary(1))
    await store.save_summary(summary(2))
    await store.fail_outbox(T, "u1", "s1", 1)
    await store.fail_outbox(T, "u1", "s1", 1)
    await store.complete_outbox(T, "u1", "s1", 1)
    assert pending_keys(await store.pending_outbox()) == [(T, "s1", 2)]


@pytest.mark.parametrize(
    ("tenant", "user", "session", "version"),
    [
        ("", "u1", "s1", 1),
        (T, "", "s1", 1),
        (T, None, "s1", 1),
        (T, "u\x00", "s1", 1),
        (T, "u1", "", 1),
        (T, "u1", "s1", 0),
        (T, "u1", "s1", -1),
        (T, "u1", "s1", True),
        (T, "u1", "s1", "1"),
        (T, "u1", "s1", 1.0),
        (T, "u1", "s1", 2**63),
        (None, "u1", "s1", 1),
        (T, "u1", None, 1),
    ],
)
async def test_fail_outbox_rejects_bad_arguments(
    store: Store, tenant: object, user: object, session: object, version: object
) -> None:
    """A bad tenant, user, session or version is refused and counts nothing.

    (A user id is a namespace label: one with control characters is an InvalidNamespace.)
    """
    await store.save_summary(summary(1))
    with pytest.raises((InvalidInput, InvalidNamespace)):
        await store.fail_outbox(tenant, user, session, version)
    assert [e.attempts for e in await store.pending_outbox()] == [0]


async def test_completed_entry_stays_completed_after_a_repeated_save(store: Store) -> None:
    """An idempotent re-save does not resurrect a completed outbox entry."""
    await store.save_summary(summary(1))
    await store.complete_outbox(T, "u1", "s1", 1)
    await store.save_summary(summary(1))
    assert await store.pending_outbox() == []


async def test_delete_user_summaries_removes_summaries_and_outbox(store: Store) -> None:
    """delete_user_summaries removes the user's versions and their outbox entries only."""
    await store.save_summary(summary(1, session="s1", user="u1"))
    await store.save_summary(summary(2, session="s1", user="u1"))
    await store.save_summary(summary(1, session="s2", user="u1"))
    await store.save_summary(summary(1, session="s3", user="u2"))
    await store.save_summary(summary(1, session="s1", user="u1", tenant="tb"))
    assert await store.delete_user_summaries(T, "u1") == 3
    assert await store.latest_summary(T, "u1", "s1") is None
    # Same enqueue time: ties are ordered by tenant, session, version.
    assert pending_keys(await store.pending_outbox()) == [("tb", "s1", 1), (T, "s3", 1)]
    assert await store.delete_user_summaries(T, "u1") == 0


async def test_delete_user_covers_memories_summaries_and_outbox(store: Store) -> None:
    """delete_user removes a user's memories, summaries and outbox entries, and counts them."""
    await store.put(T, ("user", "u1", "session", "s1"), "m1", "x", kind="summary")
    await store.put(T, ("user", "u1"), "m2", "x")
    await store.put(T, ("user", "u2"), "m3", "x")
    await store.save_summary(summary(1, user="u1"))
    await store.save_summary(summary(1, session="s9", user="u2"))
    assert await store.delete_user(T, "u1") == 3
    assert await store.latest_summary(T, "u1", "s1") is None
    assert pending_keys(await store.pending_outbox()) == [(T, "s9", 1)]
    assert [h.item.key for h in await store.search(T)] == ["m3"]


@pytest.mark.backends(*PERSISTENT)
async def test_summaries_and_outbox_survive_reopening(
    backend: str, make_store: Callable[..., Store]
) -> None:
    """A persistent store keeps summaries and pending outbox entries across reopen."""
    first = make_store()
    stored = await first.save_summary(summary(1))
    await first.aclose()
    again = make_store()
    assert await again.latest_summary(T, "u1", "s1") == stored
    assert pending_keys(await again.pending_outbox()) == [(T, "s1", 1)]


@pytest.mark.backends(*PERSISTENT)
async def test_outbox_attempts_survive_reopening(
    backend: str, make_store: Callable[..., Store]
) -> None:
    """A persistent store keeps each entry's failure count across reopen."""
    first = make_store()
    await first.save_summary(summary(1))
    assert await first.fail_outbox(T, "u1", "s1", 1) == 1
    await first.aclose()
    again = make_store()
    assert [e.attempts for e in await again.pending_outbox()] == [1]
    assert await again.fail_outbox(T, "u1", "s1", 1) == 2
