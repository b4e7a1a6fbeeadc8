"""Backends under test, and fixtures that hand each test a store of every backend and flavor.

To add a backend, add one entry to ``BACKENDS``: a name and a :class:`Backend` whose two
factories build the sync and the async store from a :class:`StoreContext` (use
``ctx.request.getfixturevalue(...)`` for fixtures such as ``postgres_url``, and
``ctx.request.addfinalizer`` for clean-up). Every conformance test then runs on it, once
through the sync store and once through the async twin.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from synopsis.memory._types import Embedder
from synopsis.memory.inmemory import AsyncInMemoryStore, InMemoryStore
from synopsis.memory.sqlite import AsyncSQLiteStore, SQLiteStore
from synopsis.testing import FakeClock


@dataclass(frozen=True, slots=True)
class StoreContext:
    """Everything a factory may need; stores opened on one context share their data."""

    request: pytest.FixtureRequest
    tmp_path: Path
    clock: FakeClock
    embedder: Embedder | None
    embedder_id: str | None = None


@dataclass(frozen=True, slots=True)
class Backend:
    sync: Callable[[StoreContext], Any]
    async_: Callable[[StoreContext], Any]
    #: A second store opened on the same context sees the first one's data.
    persistent: bool = False
    marks: tuple[pytest.MarkDecorator, ...] = ()


def db_path(tmp_path: Path) -> Path:
    """Where the sqlite-file backend keeps its database."""
    return tmp_path / "synopsis.sqlite3"


def _db(ctx: StoreContext) -> Path:
    return db_path(ctx.tmp_path)


def _pg(ctx: StoreContext) -> dict[str, Any]:
    """URL and schema of this test's PostgreSQL stores: a fresh schema, dropped afterwards."""
    url = ctx.request.getfixturevalue("postgres_url")
    marker = ctx.tmp_path / "postgres-schema"
    if not marker.exists():
        import uuid

        import psycopg
        from psycopg import sql

        marker.write_text(f"conformance_{uuid.uuid4().hex}")

        def drop() -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                name = sql.Identifier(marker.read_text())
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(name))

        ctx.request.addfinalizer(drop)
    return {"url": url, "schema": marker.read_text(), **_options(ctx)}


def _options(ctx: StoreContext) -> dict[str, Any]:
    """The store options every backend takes: clock, embedder and its identity."""
    return {"clock": ctx.clock, "embedder": ctx.embedder, "embedder_id": ctx.embedder_id}


def _pg_sync(ctx: StoreContext) -> Any:
    from synopsis.memory.postgres import PostgresStore

    return PostgresStore(**_pg(ctx))


def _pg_async(ctx: StoreContext) -> Any:
    from synopsis.memory.postgres import AsyncPostgresStore

    return AsyncPostgresStore(**_pg(ctx))


BACKENDS: dict[str, Backend] = {
    "memory": Backend(
        sync=lambda ctx: InMemoryStore(**_options(ctx)),
        async_=lambda ctx: AsyncInMemoryStore(**_options(ctx)),
    ),
    "sqlite-memory": Backend(
        sync=lambda ctx: SQLiteStore(":memory:", **_options(ctx)),
        async_=lambda ctx: AsyncSQLiteStore(":memory:", **_options(ctx)),
    ),
    "sqlite-file": Backend(
        sync=lambda ctx: SQLiteStore(_db(ctx), **_options(ctx)),
        async_=lambda ctx: AsyncSQLiteStore(_db(ctx), **_options(ctx)),
        persistent=True,
    ),
    "postgres": Backend(
        sync=_pg_sync, async_=_pg_async, persistent=True, marks=(pytest.mark.postgres,)
    ),
}


#: Backends whose data outlives the store object (for ``@pytest.mark.backends(*PERSISTENT)``).
PERSISTENT = tuple(name for name, backend in BACKENDS.items() if backend.persistent)
SQLITE = tuple(name for name in BACKENDS if name.startswith("sqlite"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop the backend combinations a test says it does not apply to.

    ``@pytest.mark.backends("sqlite-file", ...)`` names the backends a test is for; the other
    combinations do not exist, so they are deselected instead of generated and skipped.
    """
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker("backends")
        params = getattr(getattr(item, "callspec", None), "params", {})
        if marker is not None and params.get("backend") not in marker.args:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


class Store:
    """One awaitable face over a sync or async store, so each test body serves both.

    With a sync store every method is called directly (inside a coroutine); with an async
    store it is awaited. ``raw`` is the store itself.
    """

    def __init__(self, raw: Any, flavor: str) -> None:
        self.raw = raw
        self.flavor = flavor

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.raw, name)
        if self.flavor == "async":
            return method  # type: ignore[no-any-return]

        async def call(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return call

    async def aclose(self) -> None:
        if self.flavor == "async":
            await self.raw.aclose()
        else:
            self.raw.close()


@pytest.fixture(params=[pytest.param(name, marks=b.marks) for name, b in BACKENDS.items()])
def backend(request: pytest.FixtureRequest) -> str:
    """The name of the backend under test."""
    return str(request.param)


@pytest.fixture(params=["sync", "async"])
def flavor(request: pytest.FixtureRequest) -> str:
    """Whether the test goes through the sync store or its async twin."""
    return str(request.param)


@pytest.fixture
def clock() -> FakeClock:
    """The clock every store of the test reads."""
    return FakeClock()


@pytest.fixture
async def make_store(
    request: pytest.FixtureRequest, backend: str, flavor: str, tmp_path: Path, clock: FakeClock
) -> AsyncIterator[Callable[..., Store]]:
    """Open a store of the backend and flavor under test (closed after the test)."""
    spec = BACKENDS[backend]
    opened: list[Store] = []

    def make(*, embedder: Embedder | None = None, embedder_id: str | None = None) -> Store:
        ctx = StoreContext(
            request=request, tmp_path=tmp_path, clock=clock, embedder=embedder,
            embedder_id=embedder_id,
        )  # fmt: skip
        factory = spec.sync if flavor == "sync" else spec.async_
        store = Store(factory(ctx), flavor)
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.aclose()


@pytest.fixture
async def store(make_store: Callable[..., Store]) -> Store:
    """A fresh store of the backend and flavor under test."""
    return make_store()


@pytest.fixture
def sync_store(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[Any]:
    """A sync store of the backend under test (for property tests, which cannot be async)."""
    ctx = StoreContext(request=request, tmp_path=tmp_path, clock=FakeClock(), embedder=None)
    raw = BACKENDS[backend].sync(ctx)
    yield raw
    raw.close()
