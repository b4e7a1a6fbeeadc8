"""The FastAPI app: :func:`create_app` builds it from :class:`ServerOptions`.

Start-up opens the store (the library's memories and summaries) and the server's own tables
(API keys, session histories, the job queue) on the same database, then starts the summary
workers. Shutdown stops taking jobs, waits up to ``drain_seconds`` for running ones, and
closes everything. Every route except the probes and ``/metrics`` needs
``Authorization: Bearer <key>``; the key alone decides the tenant.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import Response

from synopsis import (
    AsyncCompactor,
    AsyncSessionMemory,
    AsyncSummarizer,
    Redactor,
    SessionOptions,
    __version__,
)
from synopsis._flow import offloading
from synopsis.errors import MigrationError
from synopsis.memory import AsyncSessionStore, AsyncSQLiteStore
from synopsis.memory.open import parse_db, require_postgres_extra
from synopsis.server import errors
from synopsis.server._sql import MIGRATIONS
from synopsis.server.db import AsyncDatabase
from synopsis.server.deps import Services, services
from synopsis.server.jobs import JobQueue, SummaryWorkers
from synopsis.server.keys import AsyncKeyRing
from synopsis.server.limits import RequestLimits, quiet_access_log, worker_pool
from synopsis.server.metrics import CONTENT_TYPE, Metrics, MetricsMiddleware
from synopsis.server.options import ServerOptions
from synopsis.server.schemas import ErrorBody, Health, Readiness
from synopsis.server.sessions import AsyncSessionHistories
from synopsis.server.summary_cache import SummaryCache
from synopsis.server.upstreams import TenantSlots, Upstreams
from synopsis.tokens import TokenCounter, default_estimate

__all__ = ["create_app"]

_log = logging.getLogger("synopsis.server")
#: Idle upstream connections are dropped after 4 s: servers commonly close them at 5 s
#: (uvicorn's default), and reusing one at that moment fails the request.
_UPSTREAM_LIMITS = httpx.Limits(
    max_connections=256, max_keepalive_connections=256, keepalive_expiry=4.0
)


def upstream_transport() -> httpx.AsyncBaseTransport:
    """How the proxy reaches the upstream: aiohttp under httpx when ``httpx-aiohttp`` is
    installed (the ``server`` extra has it), otherwise httpx's own pool.

    Measured (``bench/bench_server.py``): httpcore's pool looks at every idle connection on
    each request, which costs the proxy more CPU per request than aiohttp's connector; the
    httpx API, its errors and timeouts stay the same either way.
    """
    try:
        from synopsis.server.upstream_aiohttp import cookieless_transport
    except ImportError:  # pragma: no cover - the server extra installs httpx-aiohttp
        return httpx.AsyncHTTPTransport(limits=_UPSTREAM_LIMITS)
    return cookieless_transport(_UPSTREAM_LIMITS)


def _remembered_estimate(entries: int = 8192, longest: int = 8192) -> Callable[[str], int]:
    """The default token estimate, remembered for texts up to ``longest`` characters.

    An agent resends its whole history on every call, so the proxy's trigger check counts the
    same texts again and again (the counter's own cache goes by object identity, and each
    request brings new objects). At most ``entries * longest`` characters are kept.
    """
    remembered = functools.lru_cache(maxsize=entries)(default_estimate)

    @functools.wraps(default_estimate)  # the same function: its bounds hold (text_bound)
    def estimate(text: str) -> int:
        return remembered(text) if len(text) <= longest else default_estimate(text)

    return estimate


async def _open_store(options: ServerOptions) -> AsyncSessionStore:
    kind, target = parse_db(options.db)
    if kind == "sqlite":
        return await asyncio.to_thread(AsyncSQLiteStore, target)
    from synopsis.memory.postgres import AsyncPostgresStore  # the postgres extra, checked

    return await AsyncPostgresStore.connect(target, schema=options.schema)


async def _start(app: FastAPI, options: ServerOptions, build: _Builders) -> Services:
    store = await _open_store(options)  # first: on PostgreSQL it creates the schema
    try:
        db = await AsyncDatabase.open(options.db, schema=options.schema, clock=build.clock)
    except BaseException:
        await store.aclose()
        raise
    metrics: Metrics = app.state.metrics
    summarizer = AsyncSummarizer(model=build.model or options.model, on_event=[metrics.observe])
    histories = AsyncSessionHistories(db)
    queue = JobQueue(db)
    redactor = options.new_redactor()
    transport = build.transport or upstream_transport()
    redact = redactor if options.redact else None
    workers = SummaryWorkers(
        queue=queue,
        histories=histories,
        store=store,
        summarizer=summarizer,
        options=options,
        on_event=metrics.observe,
        redact=redact,
    )
    memory = SessionOptions(
        window_messages=options.window_messages,
        hybrid=options.hybrid,
        recall_limit=options.recall_limit,
        on_event=[metrics.observe],
        redact=redact,
    )
    return Services(
        options=options,
        metrics=metrics,
        db=db,
        store=store,
        keys=AsyncKeyRing(db),
        histories=histories,
        queue=queue,
        workers=workers,
        redactor=redactor,
        redact=redact,
        memory=AsyncSessionMemory(store=store, summarizer=None, options=memory),
        # The proxy always recalls: a named session gets its memories injected.
        proxy_memory=AsyncSessionMemory(
            store=store, summarizer=None, options=dataclasses.replace(memory, hybrid=True)
        ),
        compactor=_compactor(options, summarizer, metrics, redact),
        summary_cache=SummaryCache(options.summary_cache),
        summarizer=summarizer,
        http=httpx.AsyncClient(
            transport=transport, timeout=httpx.Timeout(options.upstream_timeout, connect=10.0)
        ),
        transport=transport,
        upstreams=Upstreams(options.upstreams, options.upstream_url, options.upstream_api_key),
        slots=TenantSlots(options.upstream_concurrency),
    )


def _compactor(
    options: ServerOptions, summarizer: AsyncSummarizer, metrics: Metrics, redact: Redactor | None
) -> AsyncCompactor:
    """The proxy's compactor: the server's trigger and tail, a remembering token estimate."""
    return AsyncCompactor(
        summarizer=summarizer,
        trigger=options.trigger,
        keep_tail=options.keep_tail,
        counter=TokenCounter(estimator=_remembered_estimate()),
        on_event=[metrics.observe],
        redact=redact,
    )


async def _stop(found: Services) -> None:
    try:
        await found.workers.stop(found.options.drain_seconds)
    finally:
        await found.http.aclose()
        await found.db.aclose()
        await found.store.aclose()


@dataclass(frozen=True, slots=True)
class _Builders:
    """What tests may swap: the summarizer model, the upstream transport, the clock."""

    model: Any
    transport: httpx.AsyncBaseTransport | None
    clock: Callable[[], float]


def create_app(
    options: ServerOptions | None = None,
    *,
    model: Any = None,
    upstream_transport: httpx.AsyncBaseTransport | None = None,
    clock: Callable[[], float] = time.time,
) -> FastAPI:
    """The synopsis service for ``options`` (defaults: SQLite ``./synopsis.db``, no upstream).

    ``model`` overrides ``options.model`` with a model object (tests); ``upstream_transport``
    replaces the network under the proxy's HTTP client.
    """
    options = options or ServerOptions()
    if parse_db(options.db)[0] == "postgres":
        require_postgres_extra()  # before start-up: the server extra alone serves SQLite
    build = _Builders(model=model, transport=upstream_transport, clock=clock)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        found = await _start(app, options, build)
        _log.info("synopsis service starting: %s", options.describe())
        app.state.services = found
        with offloading(app.state.offload):  # the summary workers' tasks inherit the pool
            found.workers.start()
        try:
            yield
        finally:
            app.state.services = None
            await _stop(found)

    app = FastAPI(
        title="synopsis",
        version=__version__,
        summary="Compaction, session memory and an OpenAI-compatible compacting proxy.",
        lifespan=lifespan,
    )
    app.state.metrics = Metrics()
    errors.install(app)
    _add_probes(app)
    from synopsis.server import admin, api, native, proxy

    app.include_router(api.router)
    app.include_router(admin.router)
    app.include_router(proxy.router)
    app.include_router(native.router)
    from synopsis.server.lean import PATH, LeanChat

    chat = next(r for r in proxy.router.routes if getattr(r, "path", None) == PATH)
    app.add_middleware(LeanChat, route=chat)  # inside the metrics and the request limits
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    app.state.offload = worker_pool(options.cpu_threads)
    quiet_access_log()
    app.add_middleware(
        RequestLimits, max_body_bytes=options.max_body_bytes, offload=app.state.offload
    )
    _mount_mcp(app)
    return app


def _mount_mcp(app: FastAPI) -> None:
    """The MCP tools at ``/mcp`` (streamable HTTP), when the ``mcp`` extra is installed."""
    try:
        from synopsis.server.mcp import mount
    except ImportError:  # no mcp extra: the service runs without the MCP endpoint
        return
    mount(app)


def _add_probes(app: FastAPI) -> None:
    @app.get("/healthz", tags=["operations"], response_model=Health)
    async def healthz() -> Health:
        """The process is alive."""
        return Health(status="ok")

    @app.get(
        "/readyz",
        tags=["operations"],
        response_model=Readiness,
        responses={503: {"model": ErrorBody, "description": "Not ready."}},
    )
    async def readyz(request: Request) -> Readiness:
        """The database answers and the server's tables are at the version this code needs."""
        found = services(request)
        version = await found.db.version()
        await found.store.latest_summary("readyz", "readyz", "readyz")
        if version != len(MIGRATIONS):
            raise MigrationError(f"the server's tables are at version {version}")
        return Readiness(status="ready", database=found.db.dialect.name, schema_version=version)

    @app.get(
        "/metrics",
        tags=["operations"],
        response_class=Response,
        responses={200: {"content": {CONTENT_TYPE: {"schema": {"type": "string"}}}}},
    )
    async def metrics(request: Request) -> Response:
        """Prometheus metrics (text format)."""
        found = services(request)
        try:
            found.metrics.queue_depth.set(await found.queue.depth())
        except Exception:  # the probe must not fail because the database is down
            found.metrics.queue_depth.set(float("nan"))
        found.metrics.jobs_running.set(found.workers.running)
        return Response(found.metrics.render(), media_type=CONTENT_TYPE)
