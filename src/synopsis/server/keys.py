"""API keys: one tenant per key, stored hashed, shown once.

A key reads ``syn_<key id>_<secret>``: the key id (12 hex digits) names it in ``keys list``
and ``keys revoke`` and may be logged; the secret is 32 random bytes (``secrets``), URL-safe
base64. The database keeps only SHA-256 of the whole key.

Why a fast hash and no per-key salt: salts and slow hashes (bcrypt, argon2) protect guessable
*passwords* against offline guessing. A 256-bit random secret cannot be guessed, whatever the
hash speed, and every hash is already unique because every key is; so SHA-256 loses nothing
and lets each request be authenticated by one indexed lookup of the digest, in microseconds
(the proxy's overhead budget is a few milliseconds). This is what GitHub and Stripe tokens do.

The plans here are pure (see :mod:`synopsis.server._sql`); :class:`KeyRing` and
:class:`AsyncKeyRing` run them.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from synopsis.errors import InvalidInput
from synopsis.server._sql import Dialect, Plan, Statement
from synopsis.server.db import AsyncDatabase, Database

__all__ = [
    "ApiKey",
    "AsyncKeyRing",
    "IssuedKey",
    "KeyRing",
    "digest_of",
    "new_key",
]

_PREFIX = "syn_"
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

    @property
    def active(self) -> bool:
        return self.revoked_at is None


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


def _check_label(label: str) -> str:
    if len(label) > _MAX_LABEL or any(ord(c) < 32 for c in label):
        raise InvalidInput(f"label must be at most {_MAX_LABEL} printable characters")
    return label


def _when(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _api_key(row: tuple[object, ...]) -> ApiKey:
    key_id, tenant, label, created, revoked = row
    created_at = _when(float(created))  # type: ignore[arg-type]
    assert created_at is not None
    return ApiKey(
        key_id=str(key_id),
        tenant=str(tenant),
        label=str(label),
        created_at=created_at,
        revoked_at=_when(None if revoked is None else float(revoked)),  # type: ignore[arg-type]
    )


_COLUMNS = "key_id, tenant, label, created_at, revoked_at"


# --- plans (pure) ----------------------------------------------------------------------------


def create_plan(
    d: Dialect, tenant: str, label: str, now: float, issued: tuple[str, str]
) -> Plan[IssuedKey]:
    """Store ``issued`` (a :func:`new_key` pair) for ``tenant``."""
    key_id, full_key = issued
    yield Statement(
        f"INSERT INTO {d.table('keys')} (key_id, tenant, digest, label, created_at)"
        " VALUES (:key_id, :tenant, :digest, :label, :now)",
        {
            "key_id": key_id,
            "tenant": tenant,
            "digest": digest_of(full_key),
            "label": label,
            "now": now,
        },
    )
    api_key = ApiKey(key_id=key_id, tenant=tenant, label=label, created_at=_when(now))  # type: ignore[arg-type]
    return IssuedKey(key=api_key, secret=full_key)


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


class KeyRing:
    """Create, list and revoke keys (the ``synopsis keys`` commands)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def create(self, tenant: str, *, label: str = "") -> IssuedKey:
        tenant, label = _check_tenant(tenant), _check_label(label)
        plan = create_plan(self._db.dialect, tenant, label, self._db.clock(), new_key())
        return self._db.run(plan)

    def list(self, tenant: str | None = None) -> list[ApiKey]:
        return self._db.run(list_plan(self._db.dialect, tenant), write=False)

    def revoke(self, key_id: str) -> ApiKey | None:
        return self._db.run(revoke_plan(self._db.dialect, key_id, self._db.clock()))

    def authenticate(self, key: str) -> ApiKey | None:
        """The active key ``key`` is, or None (unknown, malformed or revoked)."""
        if not _looks_like_key(key):
            return None
        found = self._db.run(find_plan(self._db.dialect, key), write=False)
        return found if found is not None and found.active else None


class AsyncKeyRing:
    """The async twin of :class:`KeyRing` (the app authenticates every request with it)."""

    def __init__(self, db: AsyncDatabase) -> None:
        self._db = db

    async def create(self, tenant: str, *, label: str = "") -> IssuedKey:
        tenant, label = _check_tenant(tenant), _check_label(label)
        plan = create_plan(self._db.dialect, tenant, label, self._db.clock(), new_key())
        return await self._db.run(plan)

    async def list(self, tenant: str | None = None) -> list[ApiKey]:
        return await self._db.run(list_plan(self._db.dialect, tenant), write=False)

    async def revoke(self, key_id: str) -> ApiKey | None:
        return await self._db.run(revoke_plan(self._db.dialect, key_id, self._db.clock()))

    async def authenticate(self, key: str) -> ApiKey | None:
        """The active key ``key`` is, or None (unknown, malformed or revoked)."""
        if not _looks_like_key(key):
            return None
        found = await self._db.run(find_plan(self._db.dialect, key), write=False, lookup=True)
        return found if found is not None and found.active else None
