"""Pins the public signatures: mypy --strict checks this file (see tests/test_public_api.py).

Nothing here runs; a signature change that breaks a user's typed code breaks this file first.
"""

from __future__ import annotations

from typing import Any, assert_type

from synopsis import (
    AsyncCompactor,
    AsyncSessionMemory,
    AsyncSummarizer,
    CompactionResult,
    Compactor,
    ModelResponse,
    Redactor,
    ScheduleResult,
    SessionMemory,
    SessionOptions,
    Summarizer,
    SummaryResult,
    TokenCount,
    TokenCounter,
    Transcript,
    Trigger,
    TriggerDecision,
    load_transcript,
    resolve_model,
)
from synopsis.memory import (
    TRANSCRIPT_KINDS,
    AsyncSessionStore,
    AsyncSQLiteStore,
    MemoryItem,
    SearchHit,
    SessionStore,
    SQLiteStore,
    neighbour_contexts,
    open_store,
)

History = list[dict[str, Any]]


def compaction(history: History) -> None:
    compactor = Compactor(model="extractive", trigger_tokens=1_000, keep_tail=4)
    assert_type(compactor(history), list[dict[str, Any]])
    assert_type(compactor.compact(history), CompactionResult)
    assert_type(compactor.should_compact(history), TriggerDecision)
    result = compactor.compact(history, force=False, reason="manual")
    assert_type(result.messages, list[dict[str, Any]])
    assert_type(result.report(), dict[str, Any])
    assert_type(Trigger(tokens=10).evaluate(5, 1), TriggerDecision)


async def async_compaction(history: History) -> None:
    compactor = AsyncCompactor(model="extractive", trigger_messages=20)
    assert_type(await compactor(history), list[dict[str, Any]])
    assert_type(await compactor.compact(history), CompactionResult)


def summarizing(history: History) -> None:
    assert_type(Summarizer(model="extractive").summarize(history), SummaryResult)
    assert_type(resolve_model("extractive").complete(history), ModelResponse)
    assert_type(TokenCounter(estimator="adk").count(history), TokenCount)
    assert_type(load_transcript("session.json"), Transcript)


async def async_summarizing(history: History) -> None:
    summary = await AsyncSummarizer(model="extractive").summarize(history)
    assert_type(summary, SummaryResult)


def session_memory(history: History) -> None:
    store = SQLiteStore("synopsis.db")
    memory = SessionMemory(store=store, summarizer=Summarizer(model="extractive"))
    assert_type(memory.after_turn("t", "u", "s", history), ScheduleResult)
    assert_type(memory.build_context("t", "u", "s", history), list[dict[str, Any]])
    assert_type(memory.recall("t", "u", "咖啡"), list[SearchHit])
    assert_type(memory.delete_user("t", "u"), int)
    assert_type(store.get("t", ("user", "u"), "k"), MemoryItem | None)
    assert_type(store.search("t", ("user", "u"), query="咖啡", limit=5), list[SearchHit])
    memories = store.search("t", ("user", "u"), kind=("fact", "note"), exclude_kinds="summary")
    assert_type(memories, list[SearchHit])
    no_transcripts = store.search("t", ("user", "u"), exclude_kinds=TRANSCRIPT_KINDS)
    assert_type(no_transcripts, list[SearchHit])
    assert_type(memory.recall("t", "u", "x", kind="fact", exclude_kinds=()), list[SearchHit])
    turn = store.put("t", ("user", "u"), "t1", "yes!", context=neighbour_contexts(["a", "b"])[1])
    assert_type(turn.context, str)
    assert_type(open_store("synopsis.db"), SessionStore)
    assert_type(open_store("synopsis.db", async_=True), AsyncSessionStore)
    assert_type(store.embedder_id, str | None)
    assert_type(store.forget_vectors("t"), int)
    assert_type(store.adopt_vectors("t"), int)
    configured = SessionMemory(store=store, summarizer=None, options=SessionOptions(hybrid=True))
    assert_type(configured.options, SessionOptions)
    keyworded = SessionMemory(store=store, summarizer=None, redact=True, window_messages=None)
    assert_type(keyworded.options.redact, Redactor | None)


async def async_session_memory(history: History) -> None:
    store = AsyncSQLiteStore("synopsis.db")
    memory = AsyncSessionMemory(store=store, summarizer=AsyncSummarizer(model="extractive"))
    assert_type(await memory.after_turn("t", "u", "s", history), ScheduleResult)
    assert_type(await memory.build_context("t", "u", "s", history), list[dict[str, Any]])
    assert_type(await memory.recall("t", "u", "咖啡"), list[SearchHit])
    found = await store.search("t", "user/u", kind=["fact"], exclude_kinds=TRANSCRIPT_KINDS)
    assert_type(found, list[SearchHit])
