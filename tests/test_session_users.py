"""Two users of one tenant who both call their session "main" never see each other's summary.

Issue #13, item 2: summaries were keyed by (tenant, session id), so alice's "my bank PIN is
4321" was injected into bob's context by ``build_context("t1", "bob", "main", ...)``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from synopsis.memory.inmemory import AsyncInMemoryStore, InMemoryStore
from synopsis.memory.sqlite import AsyncSQLiteStore, SQLiteStore
from synopsis.session.memory import AsyncSessionMemory, SessionMemory
from synopsis.summarizer import SummaryResult

T, SESSION = "t1", "main"
PIN = "my bank PIN is 4321"


def history(user_text: str, count: int = 10) -> list[dict[str, Any]]:
    """A session whose first user message is ``user_text``."""
    replies = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"ok {i}"}
        for i in range(1, count)
    ]
    return [{"role": "user", "content": user_text}, *replies]


class EchoSummarizer:
    """Summarizes a span as its first message: what a real model would keep of a PIN."""

    def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:
        text = f"The user said: {messages[0]['content']}"
        return SummaryResult(text=text, model="echo", attempts=1)


class AsyncEchoSummarizer(EchoSummarizer):
    async def summarize(  # type: ignore[override]
        self, messages: Sequence[Mapping[str, Any]], **options: Any
    ) -> SummaryResult:
        return EchoSummarizer.summarize(self, messages, **options)


def texts(messages: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(str(m.get("content")) for m in messages)


@pytest.fixture
def postgres_store(postgres_url: str) -> Iterator[Callable[[], Any]]:
    """Sync PostgreSQL stores on a fresh schema (dropped afterwards)."""
    import psycopg
    from psycopg import sql

    from synopsis.memory.postgres import PostgresStore

    schema, opened = f"users_{uuid.uuid4().hex}", []

    def make() -> Any:
        opened.append(PostgresStore(postgres_url, schema=schema))
        return opened[-1]

    yield make
    for store in opened:
        store.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Any]:
    if request.param == "memory":
        return InMemoryStore
    if request.param == "sqlite":
        return lambda: SQLiteStore(tmp_path / "users.sqlite3")
    make: Callable[[], Any] = request.getfixturevalue("postgres_store")
    return make


def test_a_users_summary_is_never_injected_for_another_user(make_store: Callable[[], Any]) -> None:
    """alice and bob both use session "main": each is given only their own summary."""
    store = make_store()
    with SessionMemory(store=store, summarizer=EchoSummarizer(), summarize_every=10) as memory:
        assert memory.after_turn(T, "alice", SESSION, history(PIN)).scheduled
        assert memory.drain(timeout=60)
        assert memory.after_turn(T, "bob", SESSION, history("I like green tea")).scheduled
        assert memory.drain(timeout=60)
        for_bob = texts(memory.build_context(T, "bob", SESSION, history("hi", 2)))
        for_alice = texts(memory.build_context(T, "alice", SESSION, history("hi", 2)))
        for_carol = texts(memory.build_context(T, "carol", SESSION, history("hi", 2)))
    assert "4321" not in for_bob
    assert "green tea" in for_bob  # bob's own summary was saved and is served to him
    assert PIN in for_alice
    assert "4321" not in for_carol and "green tea" not in for_carol
    assert store.latest_summary(T, "bob", SESSION).text == "The user said: I like green tea"
    assert [s.user_id for s in store.summary_history(T, "alice", SESSION)] == ["alice"]


@pytest.mark.parametrize("flavor", ["memory", "sqlite"])
async def test_the_async_memory_keeps_users_apart_too(flavor: str, tmp_path: Path) -> None:
    """The same through AsyncSessionMemory."""
    store: Any = (
        AsyncInMemoryStore() if flavor == "memory" else AsyncSQLiteStore(tmp_path / "u.sqlite3")
    )
    async with AsyncSessionMemory(
        store=store, summarizer=AsyncEchoSummarizer(), summarize_every=10
    ) as memory:
        await memory.after_turn(T, "alice", SESSION, history(PIN))
        assert await memory.drain(timeout=60)
        await memory.after_turn(T, "bob", SESSION, history("I like green tea"))
        assert await memory.drain(timeout=60)
        for_bob = texts(await memory.build_context(T, "bob", SESSION, history("hi", 2)))
    await store.aclose()
    assert "4321" not in for_bob
    assert "green tea" in for_bob


def test_deleting_one_user_keeps_the_other_users_session(make_store: Callable[[], Any]) -> None:
    """delete_user("alice") removes alice's "main" and leaves bob's."""
    store = make_store()
    with SessionMemory(store=store, summarizer=EchoSummarizer(), summarize_every=10) as memory:
        memory.after_turn(T, "alice", SESSION, history(PIN))
        memory.after_turn(T, "bob", SESSION, history("I like green tea"))
        assert memory.drain(timeout=60)
        assert memory.delete_user(T, "alice") == 2  # her summary and its memory copy
        assert PIN not in texts(memory.build_context(T, "alice", SESSION, history("hi", 2)))
        assert "green tea" in texts(memory.build_context(T, "bob", SESSION, history("hi", 2)))
