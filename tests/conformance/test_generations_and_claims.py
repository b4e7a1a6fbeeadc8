"""Deletion generations (deletion wins across processes) and summary-job claims, on every
backend; the two-store tests open two stores ("replicas") on one database."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from synopsis.errors import InvalidInput, InvalidNamespace, StoreError
from synopsis.memory import UserDeleted
from synopsis.memory._types import SessionSummary
from synopsis.testing import FakeClock

from .conftest import PERSISTENT, Store

T, U, S = "tenant-a", "u1", "s1"
NS = ("user", U, "session", S)
CLAIM = {"covers_to": 20, "lease_seconds": 30}


def summary(version: int = 1, *, user: str = U, text: str = "coffee notes") -> SessionSummary:
    return SessionSummary(
        tenant=T, user_id=user, session_id=S, version=version, text=text,
        covers_from=0, covers_to=20 * version, model="fake", content_hash=f"h:{text}",
    )  # fmt: skip


# --- generations -----------------------------------------------------------------------------


async def test_every_deletion_moves_the_users_generation_only(store: Store) -> None:
    """0 for a new user; delete_user and delete_user_summaries each add one, per user."""
    assert await store.deletion_generation(T, U) == 0
    await store.delete_user(T, U)
    await store.delete_user_summaries(T, U)
    assert await store.deletion_generation(T, U) == 2
    assert await store.deletion_generation(T, "u2") == 0
    assert await store.deletion_generation("tenant-b", U) == 0


async def test_writes_with_the_current_generation_go_through(store: Store) -> None:
    """A save and a put made with the generation read just before are stored."""
    await store.delete_user(T, U)
    generation = await store.deletion_generation(T, U)
    saved = await store.save_summary(summary(), generation=generation)
    await store.put(T, NS, "summary-v1", "coffee notes", kind="summary", generation=generation)
    assert await store.latest_summary(T, U, S) == saved
    assert (await store.get(T, NS, "summary-v1")).text == "coffee notes"


async def test_a_stale_save_is_refused_and_writes_nothing(store: Store) -> None:
    """After a deletion a save with the old generation raises UserDeleted: no row, no entry."""
    generation = await store.deletion_generation(T, U)
    await store.delete_user(T, U)
    with pytest.raises(UserDeleted) as refused:
        await store.save_summary(summary(), generation=generation)
    assert isinstance(refused.value, StoreError)
    error = refused.value
    assert (error.tenant, error.user_id, error.expected, error.current) == (T, U, 0, 1)
    assert await store.summary_history(T, U, S) == []
    assert await store.pending_outbox() == []


async def test_a_stale_put_is_refused_and_changes_nothing(store: Store) -> None:
    """A put with the old generation neither creates nor replaces an item."""
    generation = await store.deletion_generation(T, U)
    await store.delete_user(T, U)
    await store.put(T, NS, "kept", "written after the deletion")
    for key in ("new", "kept"):
        with pytest.raises(UserDeleted):
            await store.put(T, NS, key, "stale text", generation=generation)
    assert await store.get(T, NS, "new") is None
    assert (await store.get(T, NS, "kept")).text == "written after the deletion"


async def test_another_users_deletion_does_not_refuse_a_write(store: Store) -> None:
    """Generations are per (tenant, user)."""
    generation = await store.deletion_generation(T, U)
    await store.delete_user(T, "u2")
    await store.delete_user("tenant-b", U)
    await store.save_summary(summary(), generation=generation)
    await store.put(T, NS, "k", "x", generation=generation)


@pytest.mark.parametrize(
    ("namespace", "generation"),
    [(("notes",), 0), (("user",), 0), (NS, -1), (NS, True), (NS, 1.0), (NS, "0"), (NS, 2**63)],
)
async def test_a_guarded_put_needs_a_user_namespace_and_a_whole_generation(
    store: Store, namespace: tuple[str, ...], generation: Any
) -> None:
    """Only a ("user", id, ...) item can be written under a generation, a count from 0."""
    with pytest.raises(InvalidInput):
        await store.put(T, namespace, "k", "x", generation=generation)
    assert await store.search(T) == []


@pytest.mark.parametrize("generation", [-1, True, 1.5, "0"])
async def test_a_guarded_save_needs_a_whole_generation(store: Store, generation: Any) -> None:
    """A bad generation is InvalidInput and saves nothing."""
    with pytest.raises(InvalidInput):
        await store.save_summary(summary(), generation=generation)
    assert await store.pending_outbox() == []


async def test_outbox_entries_carry_their_users_generation(store: Store) -> None:
    """An entry read after the user's deletions names the generation to replay it with."""
    await store.delete_user(T, U)
    await store.save_summary(summary())
    await store.save_summary(summary(user="u2"))
    entries = {e.summary.user_id: e.generation for e in await store.pending_outbox()}
    assert entries == {U: 1, "u2": 0}


# --- claims ----------------------------------------------------------------------------------


async def test_a_claimed_session_is_refused_to_other_owners(store: Store) -> None:
    """The first owner gets the claim (and may renew it); a second owner does not."""
    assert await store.claim_summary_job(T, U, S, owner="r1", **CLAIM) is True
    assert await store.claim_summary_job(T, U, S, owner="r2", **CLAIM) is False
    assert await store.claim_summary_job(T, U, S, owner="r1", **CLAIM) is True
    assert await store.claim_summary_job(T, U, "s2", owner="r2", **CLAIM) is True


async def test_a_released_claim_can_be_taken(store: Store) -> None:
    """Only the owner releases its claim; then another owner may claim."""
    await store.claim_summary_job(T, U, S, owner="r1", **CLAIM)
    assert await store.release_summary_job(T, U, S, owner="r2") is False
    assert await store.claim_summary_job(T, U, S, owner="r2", **CLAIM) is False
    assert await store.release_summary_job(T, U, S, owner="r1") is True
    assert await store.release_summary_job(T, U, S, owner="r1") is False
    assert await store.claim_summary_job(T, U, S, owner="r2", **CLAIM) is True


async def test_an_expired_claim_is_taken_over(store: Store, clock: FakeClock) -> None:
    """A lease that ran out (its owner died) is no obstacle; a renewal restarts it."""
    await store.claim_summary_job(T, U, S, owner="r1", **CLAIM)
    clock.advance(29)
    assert await store.claim_summary_job(T, U, S, owner="r2", **CLAIM) is False
    clock.advance(1)
    assert await store.claim_summary_job(T, U, S, owner="r2", **CLAIM) is True
    assert await store.release_summary_job(T, U, S, owner="r1") is False
    clock.advance(29)
    assert await store.claim_summary_job(T, U, S, owner="r2", **CLAIM) is True
    clock.advance(29)
    assert await store.claim_summary_job(T, U, S, owner="r1", **CLAIM) is False


async def test_deleting_the_user_drops_the_claims(store: Store) -> None:
    """No claim of a deleted user survives (a claim names its user)."""
    await store.claim_summary_job(T, U, S, owner="r1", **CLAIM)
    await store.delete_user(T, U)
    assert await store.claim_summary_job(T, U, S, owner="r2", **CLAIM) is True
    await store.delete_user_summaries(T, U)
    assert await store.claim_summary_job(T, U, S, owner="r3", **CLAIM) is True


@pytest.mark.parametrize(
    "changes",
    [
        {"owner": ""},
        {"owner": None},
        {"owner": "r\x00"},
        {"covers_to": -1},
        {"covers_to": 1.5},
        {"covers_to": True},
        {"lease_seconds": 0},
        {"lease_seconds": -5},
        {"lease_seconds": float("inf")},
        {"lease_seconds": float("nan")},
        {"lease_seconds": "30"},
        {"session_id": ""},
        {"user_id": ""},
        {"tenant": ""},
    ],
)
async def test_bad_claims_are_refused(store: Store, changes: dict[str, Any]) -> None:
    """A bad claim argument is InvalidInput and claims nothing."""
    arguments = {"tenant": T, "user_id": U, "session_id": S, "owner": "r1", **CLAIM, **changes}
    with pytest.raises((InvalidInput, InvalidNamespace)):
        await store.claim_summary_job(**arguments)
    assert await store.claim_summary_job(T, U, S, owner="r2", **CLAIM) is True


# --- two replicas on one database ------------------------------------------------------------


@pytest.mark.backends(*PERSISTENT)
async def test_a_deletion_by_another_store_refuses_the_stale_writes(
    backend: str, make_store: Callable[..., Store]
) -> None:
    """Replica 1 read the generation; replica 2 deletes the user; replica 1 writes nothing."""
    first, second = make_store(), make_store()
    generation = await first.deletion_generation(T, U)
    await first.save_summary(summary(1), generation=generation)
    assert await second.delete_user(T, U) == 1
    with pytest.raises(UserDeleted):
        await first.save_summary(summary(2), generation=generation)
    with pytest.raises(UserDeleted):
        await first.put(T, NS, "summary-v2", "coffee notes", generation=generation)
    for store in (first, second):
        assert await store.latest_summary(T, U, S) is None
        assert await store.search(T) == []
        assert await store.deletion_generation(T, U) == 1


@pytest.mark.backends(*PERSISTENT)
async def test_a_claim_is_seen_by_another_store(
    backend: str, make_store: Callable[..., Store]
) -> None:
    """One replica's claim refuses the other's until it is released."""
    first, second = make_store(), make_store()
    assert await first.claim_summary_job(T, U, S, owner="r1", **CLAIM)
    assert not await second.claim_summary_job(T, U, S, owner="r2", **CLAIM)
    assert await first.release_summary_job(T, U, S, owner="r1")
    assert await second.claim_summary_job(T, U, S, owner="r2", **CLAIM)
