"""The admin API: create, list and revoke tenant keys over HTTP.

Off unless the server has an admin key (``SYNOPSIS_ADMIN_KEY``, from the environment only: a
secret never goes on a command line); then every route here needs
``Authorization: Bearer <admin key>``, compared in constant time. Tenant keys never reach
these routes. The operations are :class:`~synopsis.server.keys.AsyncKeyRing`'s, the same plans
and checks the ``synopsis keys`` commands run.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from synopsis.errors import NotFound, Unauthorized
from synopsis.server.deps import Svc, services
from synopsis.server.errors import ERRORS
from synopsis.server.schemas import IssuedKeyOut, KeyIn, KeyList, KeyOut

__all__ = ["router"]

_bearer = HTTPBearer(auto_error=False, description="The server's admin key.")


async def _admin(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    expected = services(request).options.admin_key
    if expected is None:
        raise NotFound("the admin API is off: start the server with SYNOPSIS_ADMIN_KEY set")
    given = credentials.credentials if credentials is not None else ""
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise Unauthorized("missing or wrong admin key")


router = APIRouter(
    prefix="/v1/admin", tags=["admin"], responses=ERRORS, dependencies=[Depends(_admin)]
)
KeyId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[0-9a-f]+$")]


@router.post("/keys", status_code=201, response_model=IssuedKeyOut)
async def create_key(body: KeyIn, s: Svc) -> IssuedKeyOut:
    """Create a tenant key; the answer holds the key itself, once (only its hash is kept)."""
    expires_at = None
    if body.expires_in is not None:
        expires_at = s.db.clock() + body.expires_in
    issued = await s.keys.create(
        body.tenant, label=body.label, expires_at=expires_at, rate_per_minute=body.rate_per_minute
    )
    return IssuedKeyOut(key=issued.secret, **KeyOut.model_validate(issued.key).model_dump())


@router.get("/keys", response_model=KeyList)
async def list_keys(
    s: Svc, tenant: Annotated[str | None, Query(min_length=1, max_length=128)] = None
) -> KeyList:
    """Every key (or one tenant's): ids, tenants, labels, limits; never the keys themselves."""
    return KeyList(keys=[KeyOut.model_validate(k) for k in await s.keys.list(tenant)])


@router.delete("/keys/{key_id}", response_model=KeyOut)
async def revoke_key(key_id: KeyId, s: Svc) -> KeyOut:
    """Revoke a key: the next request with it, on any replica, gets 401."""
    revoked = await s.keys.revoke(key_id)
    if revoked is None:
        raise NotFound(f"no key with id {key_id!r}")
    return KeyOut.model_validate(revoked)
