"""Session memory with ``redact=``, on every store backend, sync and async: planted values
appear nowhere in the summarizer's requests, the store (every table, every record) or the
events; the near-misses survive in the stored summaries."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from synopsis import AsyncSessionMemory, AsyncSummarizer, Redactor, SessionMemory, Summarizer
from synopsis.errors import ConfigError
from synopsis.memory import InMemoryStore
from synopsis.testing import FakeModel
from tests.redaction_history import (
    ECHO_PREFIX,
    AsyncEchoModel,
    EchoModel,
    leaks,
    planted_history,
    strings,
)

from .conftest import Store

PLANTED = planted_history()
IDS = ("t1", "u1", "s1")


def postgres_strings(url: str, schema: str) -> Iterator[str]:
    """Every value of every table in the test's schema, as text."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        ).fetchall()
        for (table,) in tables:
            query = sql.SQL("SELECT * FROM {}.{}").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            for row in conn.execute(query):
                yield from strings([str(v) if not isinstance(v, str) else v for v in row])


def store_strings(
    backend: str, store: Store, request: pytest.FixtureRequest, tmp_path: Path
) -> list[str]:
    if backend == "postgres":
        url = request.getfixturevalue("postgres_url")
        return list(postgres_strings(url, (tmp_path / "postgres-schema").read_text()))
    return list(strings(store.raw))  # records, and every table of a SQLite connection


def memory(flavor: str, store: Store, on_event: Callable[[Any], None]) -> tuple[Any, EchoModel]:
    model = EchoModel() if flavor == "sync" else AsyncEchoModel()
    options: dict[str, Any] = {
        "store": store.raw,
        "summarize_every": 10,
        "max_summary_chars": None,
        "redact": Redactor(mode="hash"),
        "on_event": [on_event],
    }
    if flavor == "sync":
        return SessionMemory(summarizer=Summarizer(model=model, window=200_000), **options), model
    summarizer = AsyncSummarizer(model=model, window=200_000)
    return AsyncSessionMemory(summarizer=summarizer, **options), model


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def test_nothing_planted_reaches_the_summarizer_the_store_or_an_event(
    backend: str, flavor: str, store: Store, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    events: list[Any] = []
    mem, model = memory(flavor, store, events.append)
    half = len(PLANTED.messages) // 2
    for upto in (half, len(PLANTED.messages)):  # the second job reads the first summary back
        await settle(mem.after_turn(*IDS, PLANTED.messages[:upto]))
        assert await settle(mem.drain(30))
    await settle(mem.aclose() if flavor == "async" else mem.close())
    assert len(model.requests) == 2
    latest = await store.latest_summary(*IDS)
    assert latest is not None and latest.version == 2
    sent = [s for r in model.requests for s in strings(r)]
    stored = store_strings(backend, store, request, tmp_path)
    reported = [s for event in events for s in strings(event.to_dict())]
    assert any(ECHO_PREFIX in s for s in stored), "the store dump does not show the summary"
    assert leaks(PLANTED.values, sent) == []
    assert leaks(PLANTED.values, stored) == []
    assert leaks(PLANTED.values, reported) == []
    assert leaks(PLANTED.near_misses, stored) == list(PLANTED.near_misses)  # v1 and v2
    started = [e for e in events if e.name == "session_summary_started"]
    assert started[0].redacted["email"] >= 1 and sum(started[1].redacted.values()) >= 1


def test_the_control_case_leaks() -> None:
    """Without redact= the same job stores the planted values, so the test above bites."""
    model = EchoModel()
    store = InMemoryStore()
    with SessionMemory(store=store, summarizer=Summarizer(model=model), summarize_every=10) as mem:
        mem.after_turn(*IDS, PLANTED.messages)
        assert mem.drain(30)
    assert leaks(PLANTED.values, strings(store))


def test_redact_is_a_redactor_or_a_switch() -> None:
    store = InMemoryStore()
    with SessionMemory(store=store, summarizer=None, redact=True) as mem:
        assert isinstance(mem.options.redact, Redactor)
    with pytest.raises(ConfigError, match="redact must be a Redactor"):
        SessionMemory(store=store, summarizer=None, redact="mask")  # type: ignore[arg-type]


def test_a_summary_stored_before_redaction_was_on_is_redacted_when_sent_again() -> None:
    store = InMemoryStore()
    half = len(PLANTED.messages) // 2
    with SessionMemory(store=store, summarizer=Summarizer(model=EchoModel())) as plain:
        plain.after_turn(*IDS, PLANTED.messages[:half])
        assert plain.drain(30)
    first = store.latest_summary(*IDS)
    assert first is not None and leaks(PLANTED.values, [first.text])
    model = EchoModel()
    summarizer = Summarizer(model=model, window=200_000)
    with SessionMemory(store=store, summarizer=summarizer, redact=True) as redacting:
        redacting.after_turn(*IDS, PLANTED.messages)
        assert redacting.drain(30)
    (request,) = model.requests
    second = store.latest_summary(*IDS)
    assert second is not None and second.version == 2
    assert leaks(PLANTED.values, strings(request)) == []
    assert leaks(PLANTED.values, [second.text]) == []


def test_a_value_the_model_writes_itself_is_redacted_before_it_is_stored() -> None:
    """No false ``session_summary_truncated`` either: redaction is not a cut."""
    store = InMemoryStore()
    events: list[Any] = []
    model = FakeModel(default="<summary>Write to ana.silva@example.org about it.</summary>")
    options: dict[str, Any] = {"redact": Redactor(mode="drop"), "on_event": [events.append]}
    with SessionMemory(store=store, summarizer=Summarizer(model=model), **options) as mem:
        mem.after_turn(*IDS, PLANTED.messages[:30])
        assert mem.drain(30)
    stored = store.latest_summary(*IDS)
    assert stored is not None and stored.text == "Write to  about it."
    assert not leaks(["ana.silva@example.org"], strings(store))
    assert [e.name for e in events] == ["session_summary_started", "session_summary_saved"]


@pytest.mark.parametrize("redact", [True, False])
def test_the_built_context_is_redacted_like_a_compaction(redact: bool) -> None:
    """build_context with redact= (hybrid): the window, the notes quoted from older turns, a
    summary stored before redaction was on and memories written without it hold no planted
    value; the caller's system prompt is left as it is. Without redact= they do leak."""
    store = InMemoryStore()
    with SessionMemory(store=store, summarizer=Summarizer(model=EchoModel())) as plain:
        plain.after_turn(*IDS, PLANTED.messages[:40])
        assert plain.drain(30)
    for index, message in enumerate(PLANTED.messages[1:40]):
        store.put("t1", ("user", "u1", "notes"), f"n{index}", str(message["content"]))
    options: dict[str, Any] = {"hybrid": True, "recall_limit": 8, "window_messages": 12}
    with SessionMemory(store=store, summarizer=None, redact=redact, **options) as mem:
        context = mem.build_context(
            *IDS, PLANTED.messages[1:], system_prompt="Be brief.", query=PLANTED.values[0]
        )
    assert context[0]["role"] == "system" and str(context[0]["content"]).startswith("Be brief.")
    found = leaks(PLANTED.values, strings(context))
    assert (found == []) is redact, found
