"""Stored transcripts are not memories: an OpenAI Agents session kept in a user's namespace
never comes back from that user's recall, ``build_context`` or a LangGraph store search.

End to end, on every backend, through the sync ``SessionMemory`` and its async twin (which
must agree): the Agents adapter stores a session for user u1, who also has real memories.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from synopsis import AsyncSessionMemory, SessionMemory
from synopsis.adapters.openai_agents import HEAD_KIND, ITEM_KIND, SynopsisSession
from synopsis.memory import (
    ARCHIVED_MESSAGE_KIND,
    TRANSCRIPT_KINDS,
    AsyncInMemoryStore,
    AsyncSQLiteStore,
    InMemoryStore,
    SQLiteStore,
)

T = "acme"
QUESTION = "Where do I go kayaking?"


def agents_turn() -> list[dict[str, Any]]:
    """The items a run leaves in an Agents session: JSON that mentions what u1 asks about."""
    return [
        {"role": "user", "content": "Plan a kayaking weekend near the lake"},
        {"arguments": '{"q": "kayaking lake"}', "call_id": "c1", "name": "lookup",
         "type": "function_call", "id": "fc_1", "status": "completed"},
        {"call_id": "c1", "output": "kayaking rentals open at the lake", "type":
         "function_call_output"},
    ]  # fmt: skip


def _postgres(async_: bool) -> Callable[[pytest.FixtureRequest, Path], Any]:
    def make(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
        from synopsis.memory.postgres import AsyncPostgresStore, PostgresStore

        url = request.getfixturevalue("postgres_url")
        schema = f"transcripts_{uuid.uuid4().hex}"
        request.addfinalizer(lambda: _drop(url, schema))
        return (AsyncPostgresStore if async_ else PostgresStore)(url=url, schema=schema)

    return make


def _drop(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


#: backend -> (sync store factory, async store factory)
BACKENDS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "memory": (lambda r, p: InMemoryStore(), lambda r, p: AsyncInMemoryStore()),
    "sqlite": (lambda r, p: SQLiteStore(p / "s.db"), lambda r, p: AsyncSQLiteStore(p / "a.db")),
    "postgres": (_postgres(async_=False), _postgres(async_=True)),
}


@pytest.fixture(params=sorted(BACKENDS))
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """A sync store and an async store of the backend under test (separate data)."""
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
    sync, async_ = (make(request, tmp_path) for make in BACKENDS[request.param])
    yield sync, async_
    sync.close()


async def _fill(store: Any) -> None:
    """An Agents session of u1 (through the adapter) and two real memories of u1."""
    await SynopsisSession("chat-1", store=store, tenant=T, user_id="u1").add_items(agents_turn())
    for key, text, kind in (("lake", "u1 goes kayaking at Lake Tahoe", "fact"),
                            ("note", "kayaking gear is in the garage", "note")):  # fmt: skip
        made = store.put(T, ("user", "u1", "notes"), key, text, kind=kind)
        if hasattr(made, "__await__"):
            await made


def _seen(hits: list[Any]) -> list[tuple[str, str]]:
    return [(hit.item.kind, hit.item.key) for hit in hits]


def _sync_run(store: Any) -> dict[str, Any]:
    with SessionMemory(store=store, summarizer=None, hybrid=True, recall_limit=5) as memory:
        history = [{"role": "user", "content": QUESTION}]
        return {
            "recall": _seen(memory.recall(T, "u1", QUESTION)),
            "asked": _seen(memory.recall(T, "u1", QUESTION, kind=ITEM_KIND)),
            "everything": _seen(memory.recall(T, "u1", QUESTION, exclude_kinds=())),
            "context": memory.build_context(T, "u1", "s1", history)[0]["content"],
        }


async def _async_run(store: Any) -> dict[str, Any]:
    async with AsyncSessionMemory(
        store=store, summarizer=None, hybrid=True, recall_limit=5
    ) as memory:
        history = [{"role": "user", "content": QUESTION}]
        return {
            "recall": _seen(await memory.recall(T, "u1", QUESTION)),
            "asked": _seen(await memory.recall(T, "u1", QUESTION, kind=ITEM_KIND)),
            "everything": _seen(await memory.recall(T, "u1", QUESTION, exclude_kinds=())),
            "context": (await memory.build_context(T, "u1", "s1", history))[0]["content"],
        }


async def test_recall_and_build_context_return_only_real_memories(
    stores: tuple[Any, Any],
) -> None:
    """The user's recall finds the two memories, never the session's JSON items; an explicit
    ``kind`` (or ``exclude_kinds=()``) still reaches them; the twins agree."""
    sync_store, async_store = stores
    await _fill(sync_store)
    await _fill(async_store)
    sync = _sync_run(sync_store)
    assert sorted(sync["recall"]) == [("fact", "lake"), ("note", "note")]
    assert "kayaking" in sync["context"] and "Lake Tahoe" in sync["context"]
    assert "function_call" not in sync["context"] and "rentals" not in sync["context"]
    assert {kind for kind, _ in sync["asked"]} == {ITEM_KIND} and len(sync["asked"]) == 3
    assert {kind for kind, _ in sync["everything"]} == {"fact", "note", ITEM_KIND}
    assert await _async_run(async_store) == sync


def test_the_agents_adapter_writes_only_transcript_kinds() -> None:
    """The adapter's kinds come from the one list recall leaves out (with the kind of the
    messages compaction archives in a store)."""
    assert {ITEM_KIND, HEAD_KIND, ARCHIVED_MESSAGE_KIND} == TRANSCRIPT_KINDS


def test_a_langgraph_store_search_never_returns_agents_items() -> None:
    """A LangGraph store over the same user's namespace finds its items and synopsis'
    memories, but not the Agents session stored there; ``get`` still reads any item."""
    from synopsis.adapters.langgraph import SynopsisStore

    store = InMemoryStore()
    store.put(T, ("user", "u1", "agents", "c1", "generation-0"), "0", '{"kayaking": 1}',
              kind=ITEM_KIND)  # fmt: skip
    store.put(T, ("user", "u1", "notes"), "fact", "kayaking at Lake Tahoe", kind="fact")
    graph_store = SynopsisStore(store, tenant=T)
    graph_store.put(("user", "u1", "prefs"), "boat", {"text": "prefers a red kayaking boat"})
    found = graph_store.search(("user", "u1"), query="kayaking", limit=10)
    assert sorted(item.key for item in found) == ["boat", "fact"]
    listed = graph_store.search(("user", "u1"), limit=10)
    assert sorted(item.key for item in listed) == ["boat", "fact"]
    assert graph_store.get(("user", "u1", "agents", "c1", "generation-0"), "0") is not None
    # An adapter that itself writes a transcript kind still finds what it wrote.
    transcripts = SynopsisStore(store, tenant=T, kind=ITEM_KIND)
    found = transcripts.search(("user", "u1"), query="kayaking", limit=10)
    assert sorted(item.key for item in found) == ["0", "boat", "fact"]
