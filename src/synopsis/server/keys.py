"""API keys: one tenant per key, stored hashed, shown once.

A key reads ``syn_<key id>_<secret>``: the key id (12 hex digits) names it in ``keys list``
and ``keys revoke`` and may be logged; the secret is 32 random bytes (``secrets``), URL-safe
base64. The database keeps only SHA-256 of the whole key.

Why a fast hash and no per-key salt: salts and slow hashes (bcrypt, argon2) protect guessable
*passwords* against offline guessing. A 256-bit random secret cannot be guessed, whatever the
hash speed, and every hash is already unique because every key is; so SHA-256 loses nothing
and lets each request be authenticated by one indexed lookup of the digest, in microseconds
(the proxy's overhead budget is a few milliseconds). This is what GitHub and Stripe tokens do.

A key may expire (``expires_at``: refused from then on) and carry a request-rate limit
(``rate_per_minute``: a token bucket per key in each replica; a request over it gets 429 with
``Retry-After``). Keys are looked up on every request, so a revocation holds from the next
request on, on every replica; the one exception is the proxy's hot path
(:meth:`AsyncKeyRing.authenticate_cached`), which remembers a key it found for at most
:data:`KEY_CACHE_SECONDS`, so a revocation made elsewhere holds there within that second
(one made through this process's ring holds at once).

The plans here are pure (see :mod:`synopsis.server._sql`); :class:`KeyRing` (the ``synopsis
keys`` commands) and :class:`AsyncKeyRing` (the app and its admin API) run the same plans and
checks: there is one implementation of each operation.
"""

from __future__ import annotations

import hashlib
import math
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypedDict, Unpack

from synopsis.errors import InvalidInput, RateLimited
from synopsis.server._sql import Dialect, Plan, Statement
from synopsis.server.db import AsyncDatabase, Database

__all__ = [
    "KEY_CACHE_SECONDS",
    "ApiKey",
    "AsyncKeyRing",
    "IssuedKey",
    "KeyOptions",
    "KeyRing",
    "KeySpec",
    "digest_of",
    "new_key",
]

_PREFIX = "syn_"
#: How long the proxy's hot path trusts a key it looked up (a revocation holds within it).
KEY_CACHE_SECONDS = 1.0
#: At most this many keys are remembered (the memory is dropped whole when it is full).
_KEY_CACHE_SIZE = 4096
_ID_HEX = 12
_MAX_LABEL = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey:
    """What the database knows of a key (never the key itself)."""

    key_id: str
    tenant: str
    label: str
    created_at: datetime
    revoked_at: datetime | None = None
    expires_at: datetime | None = None
    #: Requests per minute this key may make on one replica (None: no limit).
    rate_per_minute: int | None = None

    @property
    def active(self) -> bool:
        """Not revoked (an expired key is active but refused: see :meth:`usable`)."""
        return self.revoked_at is None

    def usable(self, now: float) -> bool:
        """Not revoked and not expired at ``now`` (seconds since the epoch)."""
        return self.active and (self.expires_at is None or self.expires_at.timestamp() > now)


@dataclass(frozen=True, slots=True, kw_only=True)
class IssuedKey:
    """A freshly created key: ``secret`` is shown once and stored nowhere."""

    key: ApiKey
    secret: str


def new_key() -> tuple[str, str]:
    """A fresh ``(key_id, full key)``."""
    key_id = secrets.token_hex(_ID_HEX // 2)
    return key_id, f"{_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"


def digest_of(key: str) -> str:
    """What is stored of a key: SHA-256 of its UTF-8 text, hex."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _check_tenant(tenant: str) -> str:
    if not isinstance(tenant, str) or not tenant.strip() or len(tenant) > 128:
        raise InvalidInput("tenant must be a non-empty string of at most 128 characters")
    if any(ord(c) < 32 for c in tenant):
        raise InvalidInput("tenant must not contain control characters")
    return tenant


#: The largest rate a key may be given (requests per minute).
MAX_RATE = 1_000_000


def _check_limits(expires_at: float | None, rate: int | None, now: float) -> None:
    if expires_at is not None and (not math.isfinite(expires_at) or expires_at <= now):
        raise InvalidInput("expires_at must be a time in the future")
    if rate is not None and (isinstance(rate, bool) or not 1 <= rate <= MAX_RATE):
        raise InvalidInput(f"rate_per_minute must be a whole number in 1..{MAX_RATE}")


def _check_label(label: str) -> str:
    if len(label) > _MAX_LABEL or any(ord(c) < 32 for c in label):
        raise InvalidInput(f"label must be at most {_MAX_LABEL} printable characters")
    return label


def _when(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _api_key(row: tuple[object, ...]) -> ApiKey:
    key_id, tenant, label, created, revoked, expires, rate = row
    created_at = _when(float(created))  # type: ignore[arg-type]
    assert created_at is not None
    return ApiKey(
        key_id=str(key_id),
        tenant=str(tenant),
        label=str(label),
        created_at=created_at,
        revoked_at=_when(None if revoked is None else float(revoked)),  # type: ignore[arg-type]
        expires_at=_when(None if expires is None else float(expires)),  # type: ignore[arg-type]
        rate_per_minute=None if rate is None else int(rate),  # type: ignore[call-overload]
    )


_COLUMNS = "key_id, tenant, label, created_at, revoked_at, expires_at, rate_per_minute"


# --- plans (pure) ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class KeySpec:
    """What a new key is: its tenant, label, expiry (seconds since the epoch) and rate."""

    tenant: str
    label: str = ""
    expires_at: float | None = None
    rate_per_minute: int | None = None

    def checked(self, now: float) -> KeySpec:
        """The spec, or InvalidInput naming the field that cannot be."""
        _check_limits(self.expires_at, self.rate_per_minute, now)
        return KeySpec(
            tenant=_check_tenant(self.tenant),
            label=_check_label(self.label),
            expires_at=self.expires_at,
            rate_per_minute=self.rate_per_minute,
        )


class KeyOptions(TypedDict, total=False):
    """What a caller of ``create`` may say of a new key (the fields of :class:`KeySpec`)."""

    label: str
    expires_at: float | None
    rate_per_minute: int | None


def _issue(db: Database | AsyncDatabase, spec: KeySpec) -> Plan[IssuedKey]:
    """The plan that stores a new key for ``spec``, checked against the database's clock."""
    now = db.clock()
    return create_plan(db.dialect, spec.checked(now), now, new_key())


def create_plan(d: Dialect, spec: KeySpec, now: float, issued: tuple[str, str]) -> Plan[IssuedKey]:
    """Store ``issued`` (a :func:`new_key` pair) as ``spec`` says."""
    key_id, full_key = issued
    rows = yield Statement(
        f"INSERT INTO {d.table('keys')} (key_id, tenant, digest, label, created_at, expires_at,"
        " rate_per_minute) VALUES (:key_id, :tenant, :digest, :label, :now, :expires, :rate)"
        f" RETURNING {_COLUMNS}",
        {
            "key_id": key_id,
            "tenant": spec.tenant,
            "digest": digest_of(full_key),
            "label": spec.label,
            "now": now,
            "expires": spec.expires_at,
            "rate": spec.rate_per_minute,
        },
    )
    return IssuedKey(key=_api_key(rows[0]), secret=full_key)


def find_plan(d: Dialect, key: str) -> Plan[ApiKey | None]:
    rows = yield Statement(
        f"SELECT {_COLUMNS} FROM {d.table('keys')} WHERE digest = :digest",
        {"digest": digest_of(key)},
    )
    return _api_key(rows[0]) if rows else None


def list_plan(d: Dialect, tenant: str | None) -> Plan[list[ApiKey]]:
    where, params = ("", {}) if tenant is None else (" WHERE tenant = :tenant", {"tenant": tenant})
    rows = yield Statement(
        f"SELECT {_COLUMNS} FROM {d.table('keys')}{where} ORDER BY created_at, key_id", params
    )
    return [_api_key(row) for row in rows]


def revoke_plan(d: Dialect, key_id: str, now: float) -> Plan[ApiKey | None]:
    """Revoke a key (a second revoke keeps the first time); None if there is no such key."""
    rows = yield Statement(
        f"UPDATE {d.table('keys')} SET revoked_at = coalesce(revoked_at, :now)"
        f" WHERE key_id = :key_id RETURNING {_COLUMNS}",
        {"key_id": key_id, "now": now},
    )
    return _api_key(rows[0]) if rows else None


def _looks_like_key(key: str) -> bool:
    return key.startswith(_PREFIX) and 20 < len(key) < 200


# --- drivers ---------------------------------------------------------------------------------


class _Buckets:
    """A token bucket per rate-limited key, in this process: ``rate_per_minute`` requests a
    minute, in bursts of up to that many."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._state: dict[str, tuple[float, float]] = {}  # key id -> (tokens, when)

    def admit(self, key: ApiKey) -> None:
        rate = key.rate_per_minute
        if rate is None:
            return
        now = self._clock()
        with self._lock:
            tokens, when = self._state.get(key.key_id, (float(rate), now))
            tokens = min(float(rate), tokens + (now - when) * rate / 60.0)
            if tokens < 1.0:
                self._state[key.key_id] = (tokens, now)
                wait = (1.0 - tokens) * 60.0 / rate
                raise RateLimited(
                    f"key {key.key_id} is limited to {rate} requests a minute", retry_after=wait
                )
            self._state[key.key_id] = (tokens - 1.0, now)


class KeyRing:
    """Create, list and revoke keys (the ``synopsis keys`` commands)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def create(self, tenant: str, **options: Unpack[KeyOptions]) -> IssuedKey:
        """Issue a key for ``tenant`` (``options``: its label, expiry and rate)."""
        return self._db.run(_issue(self._db, KeySpec(tenant=tenant, **options)))

    def list(self, tenant: str | None = None) -> list[ApiKey]:
        return self._db.run(list_plan(self._db.dialect, tenant), write=False)

    def revoke(self, key_id: str) -> ApiKey | None:
        return self._db.run(revoke_plan(self._db.dialect, key_id, self._db.clock()))

    def authenticate(self, key: str) -> ApiKey | None:
        """The active key ``key`` is, or None (unknown, malformed or revoked)."""
        if not _looks_like_key(key):
            return None
        found = self._db.run(find_plan(self._db.dialect, key), write=False)
        return found if found is not None and found.usable(self._db.clock()) else None


class AsyncKeyRing:
    """The async twin of :class:`KeyRing` (the app authenticates every request with it)."""

    def __init__(self, db: AsyncDatabase, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._db = db
        self._clock = clock
        self._buckets = _Buckets(clock)
        #: digest -> (key, when it was read): the hot path's memory (see authenticate_cached).
        self._known: dict[str, tuple[ApiKey, float]] = {}

    async def create(self, tenant: str, **options: Unpack[KeyOptions]) -> IssuedKey:
        """Issue a key for ``tenant`` (``options``: its label, expiry and rate)."""
        return await self._db.run(_issue(self._db, KeySpec(tenant=tenant, **options)))

    async def list(self, tenant: str | None = None) -> list[ApiKey]:
        return await self._db.run(list_plan(self._db.dialect, tenant), write=False)

    async def revoke(self, key_id: str) -> ApiKey | None:
        self._known.clear()  # revoked through this ring: refused at once, cache or not
        return await self._db.run(revoke_plan(self._db.dialect, key_id, self._db.clock()))

    async def authenticate(self, key: str) -> ApiKey | None:
        """The active key ``key`` is, or None (unknown, malformed or revoked)."""
        if not _looks_like_key(key):
            return None
        found = await self._db.run(find_plan(self._db.dialect, key), write=False, lookup=True)
        return found if found is not None and found.usable(self._db.clock()) else None

    async def authenticate_cached(self, key: str) -> ApiKey | None:
        """:meth:`authenticate`, trusting a key found less than :data:`KEY_CACHE_SECONDS` ago
        (by the ring's clock): a key revoked elsewhere is refused within that second; expiry
        is checked on every call. Unknown keys are never remembered (each is looked up)."""
        if not _looks_like_key(key):
            return None
        digest = digest_of(key)
        now = self._clock()
        known = self._known.get(digest)
        if known is not None and now - known[1] < KEY_CACHE_SECONDS:
            found: ApiKey | None = known[0]
        else:
            plan = find_plan(self._db.dialect, key)
            found = await self._db.run(plan, write=False, lookup=True)
            if found is None:
                self._known.pop(digest, None)
            else:
                if len(self._known) >= _KEY_CACHE_SIZE:
                    self._known.clear()
                self._known[digest] = (found, now)
        return found if found is not None and found.usable(self._db.clock()) else None

    def admit(self, key: ApiKey) -> None:
        """Count a request of ``key``; RateLimited (429) when it is over its rate."""
        self._buckets.admit(key)
