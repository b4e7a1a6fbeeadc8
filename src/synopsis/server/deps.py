"""What every route depends on: the :class:`Services` built at start-up and the tenant of the
request's API key, as FastAPI dependencies (:data:`Svc`, :data:`Tenant`).

Kept apart from :mod:`.app` (which builds the services) and the routers (:mod:`.api`,
:mod:`.proxy`, which use them), so neither side imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import httpx
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from synopsis.compaction.compactor import AsyncCompactor
from synopsis.errors import StoreError, Unauthorized
from synopsis.memory import AsyncSessionStore
from synopsis.redact import Redactor
from synopsis.server.db import AsyncDatabase
from synopsis.server.jobs import JobQueue, SummaryWorkers
from synopsis.server.keys import AsyncKeyRing
from synopsis.server.metrics import Metrics
from synopsis.server.options import ServerOptions
from synopsis.server.sessions import AsyncSessionHistories
from synopsis.server.summary_cache import SummaryCache
from synopsis.server.upstreams import TenantSlots, Upstreams
from synopsis.session.memory import AsyncSessionMemory
from synopsis.summarizer import AsyncSummarizer

__all__ = ["Services", "Svc", "Tenant", "current_services", "services", "tenant_of"]


@dataclass(slots=True, kw_only=True)
class Services:
    """What the routes use; built at start-up, closed at shutdown."""

    options: ServerOptions
    metrics: Metrics
    db: AsyncDatabase
    store: AsyncSessionStore
    keys: AsyncKeyRing
    histories: AsyncSessionHistories
    queue: JobQueue
    workers: SummaryWorkers
    #: Context building, recall and deletion (``hybrid`` as configured).
    memory: AsyncSessionMemory
    #: The proxy's: always recalls (summary and memories are injected for a named session).
    proxy_memory: AsyncSessionMemory
    compactor: AsyncCompactor
    #: The proxy's summaries of stateless histories, for reuse by the same conversation.
    summary_cache: SummaryCache
    summarizer: AsyncSummarizer
    http: httpx.AsyncClient
    #: ``http``'s transport: the proxy sends its upstream calls through it directly.
    transport: httpx.AsyncBaseTransport
    #: The proxy's upstreams by model, and the per-tenant bound on calls in flight.
    upstreams: Upstreams
    slots: TenantSlots
    #: This process's redactor (one hash key for every request), for ``/v1/compact``'s
    #: per-request ``redact`` too.
    redactor: Redactor
    #: The server-wide policy: ``redactor`` when ``options.redact`` is on, else None.
    redact: Redactor | None


def services(request: Request) -> Services:
    found: Services | None = getattr(request.app.state, "services", None)
    if found is None:  # only between start and a failed start-up
        raise StoreError("the server is not started")
    return found


async def current_services(request: Request) -> Services:
    """:func:`services` as a route dependency (async: FastAPI runs a sync one in a thread)."""
    return services(request)


_bearer = HTTPBearer(auto_error=False, description="An API key from `synopsis keys create`.")


async def tenant_of(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The tenant of the request's API key; 401 without a valid, unrevoked key."""
    if credentials is None:
        raise Unauthorized("missing API key: send Authorization: Bearer <key>")
    keys = services(request).keys
    key = await keys.authenticate(credentials.credentials)
    if key is None:
        raise Unauthorized("invalid, expired or revoked API key")
    keys.admit(key)  # RateLimited (429) over the key's rate
    return key.tenant


#: The authenticated tenant, as a route parameter.
Tenant = Annotated[str, Depends(tenant_of)]


#: The running services, as a route parameter.
Svc = Annotated[Services, Depends(current_services)]
