"""Deletion generations and summary-job claims: the checked conditions of guarded writes.

A :class:`Guard` is a write's condition (the user still has the deletion generation the
write was admitted with); a :class:`Claim` is a checked ``claim_summary_job`` call. Pure;
every backend shares them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from synopsis.errors import InvalidInput, UserDeleted
from synopsis.memory._checks import MAX_INT, PutRequest, check_owner, check_session

__all__ = ["Claim", "Guard", "check_claim", "check_generation", "guard_put"]


@dataclass(frozen=True, slots=True)
class Guard:
    """A write's condition: user ``user_id`` of ``tenant`` still has deletion ``generation``."""

    tenant: str
    user_id: str
    generation: int

    def refused(self, current: int) -> UserDeleted | None:
        """The error of a write made when the generation is ``current``; None if it may go."""
        if current == self.generation:
            return None
        return UserDeleted(self.tenant, self.user_id, expected=self.generation, current=current)


def _count(value: object, name: str) -> int:
    """``value`` if it is a plain int from 0 to MAX_INT, else InvalidInput naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT:
        raise InvalidInput(f"{name} must be an integer from 0 to 2**63 - 1")
    return value


def check_generation(generation: object) -> int:
    """A deletion generation: an integer from 0."""
    return _count(generation, "generation")


def guard_put(request: PutRequest, generation: object) -> Guard:
    """The guard of a ``put`` with ``generation``: its namespace must be a user's."""
    if len(request.namespace) < 2 or request.namespace[0] != "user":
        raise InvalidInput('a put with a generation needs a ("user", user_id, ...) namespace')
    return Guard(request.tenant, request.namespace[1], check_generation(generation))


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """A checked ``claim_summary_job`` call."""

    tenant: str
    user_id: str
    session_id: str
    covers_to: int
    owner: str
    lease_seconds: float


def check_claim(
    tenant: object,
    user_id: object,
    session_id: object,
    *,
    covers_to: object,
    owner: object,
    lease_seconds: object,
) -> Claim:
    """Check a claim: a session, ``covers_to`` >= 0, an owner name and a positive lease."""
    if (
        isinstance(lease_seconds, bool)
        or not isinstance(lease_seconds, int | float)
        or not math.isfinite(lease_seconds)
        or lease_seconds <= 0
    ):
        raise InvalidInput("lease_seconds must be a positive number of seconds")
    tenant, user, session = check_session(tenant, user_id, session_id)
    return Claim(
        tenant=tenant,
        user_id=user,
        session_id=session,
        covers_to=_count(covers_to, "covers_to"),
        owner=check_owner(owner),
        lease_seconds=float(lease_seconds),
    )
