"""Fixtures of the service tests: a fake OpenAI-compatible upstream and live servers.

Servers run for real (uvicorn on a free port, in a thread), so every test talks HTTP exactly
as a client would; the upstream is :class:`synopsis.server.testing.FakeUpstream`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from synopsis.server import ServerOptions, create_app
from synopsis.server.db import Database
from synopsis.server.keys import KeyRing
from synopsis.server.testing import FakeUpstream, running


@dataclass
class Upstream:
    fake: FakeUpstream
    url: str  # the base URL an OpenAI client would use: ".../v1"


@dataclass
class Live:
    """A running server: its URL and options, and a way to mint keys for it."""

    url: str
    options: ServerOptions

    def key(self, tenant: str) -> str:
        with Database(self.options.db, schema=self.options.schema) as db:
            return KeyRing(db).create(tenant).secret

    def revoke(self, key: str) -> None:
        key_id = key.split("_")[1]
        with Database(self.options.db, schema=self.options.schema) as db:
            assert KeyRing(db).revoke(key_id) is not None

    def client(self, key: str | None = None, **headers: str) -> httpx.Client:
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0)


def wait_for(check: Callable[[], Any], *, timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy (a deadline, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    fake = FakeUpstream()
    with running(fake.app) as url:
        yield Upstream(fake=fake, url=f"{url}/v1")


StartServer = Callable[..., AbstractContextManager[Live]]


@pytest.fixture
def start_server(tmp_path: Path, upstream: Upstream) -> StartServer:
    """``with start_server(**options) as live:`` -- SQLite in tmp_path unless ``db`` is given."""

    @contextmanager
    def start(*, model: Any = None, **fields: Any) -> Iterator[Live]:
        fields.setdefault("db", str(tmp_path / "synopsis.db"))
        fields.setdefault("upstream", upstream.url)
        fields.setdefault("poll_seconds", 0.05)
        options = ServerOptions(**fields)
        with running(create_app(options, model=model), lifespan="on") as url:
            yield Live(url=url, options=options)

    return start


@pytest.fixture
def live(start_server: StartServer) -> Iterator[Live]:
    """A server on SQLite that summarizes every 4 messages, with the fake upstream."""
    with start_server(summarize_every=4) as server:
        yield server


@pytest.fixture
def pg_schema(postgres_url: str) -> Iterator[str]:
    """A fresh PostgreSQL schema name, dropped afterwards."""
    import psycopg
    from psycopg import sql

    schema = f"srv_{uuid.uuid4().hex[:10]}"
    yield schema
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def postgres_options(options: ServerOptions, url: str, schema: str) -> ServerOptions:
    return replace(options, db=url, schema=schema)
