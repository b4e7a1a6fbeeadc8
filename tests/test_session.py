"""Side-store session memory: the pure context helpers and SessionMemory on real stores."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from synopsis.errors import ConfigError, InvalidInput
from synopsis.events import SessionSummarySaved
from synopsis.memory._types import MemoryItem, SearchHit
from synopsis.memory.inmemory import AsyncInMemoryStore, InMemoryStore
from synopsis.memory.sqlite import SQLiteStore
from synopsis.messages import content_type, is_internal
from synopsis.session.context import (
    Recalled,
    assemble_context,
    choose_window_start,
    dedupe_recalled,
    fuse_ranked,
    hits_to_recalled,
    is_due,
    latest_user_text,
    plan_context,
    rank_history,
    render_summary_section,
    summary_span,
    system_with_summary,
    window_after_summary,
)
from synopsis.session.memory import AsyncSessionMemory, SessionMemory
from synopsis.summarizer import SummaryResult
from synopsis.testing import AsymmetricEmbedder

T = "acme"


def chars(text: str) -> int:
    """One token per character: makes budgets easy to reason about."""
    return len(text)


def turns(count: int, *, start: int = 0) -> list[dict[str, Any]]:
    """Alternating user/assistant messages numbered from ``start``."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
        for i in range(start, start + count)
    ]


def tool_turn(call_id: str) -> list[dict[str, Any]]:
    """An assistant tool call followed by its result."""
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "a.txt b.txt"},
    ]


class FakeSummarizer:
    """Records each call and answers with a numbered summary."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous_summary: str | None = None,
        session_id: str | None = None,
    ) -> SummaryResult:
        with self._lock:
            self.calls.append(
                {"messages": list(messages), "previous": previous_summary, "session_id": session_id}
            )
            number = len(self.calls)
        return SummaryResult(
            text=f"summary {number} of {session_id}: coffee talk", model="fake:sum", attempts=1
        )


class AsyncFakeSummarizer(FakeSummarizer):
    """The async twin of FakeSummarizer."""

    async def summarize(  # type: ignore[override]
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous_summary: str | None = None,
        session_id: str | None = None,
    ) -> SummaryResult:
        return FakeSummarizer.summarize(
            self, messages, previous_summary=previous_summary, session_id=session_id
        )


def hit(
    namespace: tuple[str, ...],
    text: str,
    *,
    kind: str = "note",
    version: int = 0,
    score: float = 1.0,
) -> SearchHit:
    """A search hit built by hand."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    tags = {"version": str(version)} if version else {}
    item = MemoryItem(
        tenant=T,
        namespace=namespace,
        key=text[:10],
        text=text,
        kind=kind,
        tags=tags,
        created_at=now,
        updated_at=now,
    )
    return SearchHit(item=item, score=score)


@pytest.fixture
def store() -> InMemoryStore:
    """A fresh in-memory store."""
    return InMemoryStore()


@pytest.fixture
def memory(store: InMemoryStore) -> Any:
    """A SessionMemory on the in-memory store with a recording summarizer."""
    summarizer = FakeSummarizer()
    session = SessionMemory(store=store, summarizer=summarizer, summarize_every=20)
    session.summarizer = summarizer  # type: ignore[attr-defined]
    yield session
    session.close()


# --- pure helpers -----------------------------------------------------------------------------


def test_is_due_counts_growth_since_last_summary() -> None:
    """A summary is due once the history grew by `every` messages past covers_to."""
    assert not is_due(19, 0, 20)
    assert is_due(20, 0, 20)
    assert not is_due(39, 20, 20)
    assert is_due(40, 20, 20)


def test_summary_span_stops_before_an_unanswered_tool_call() -> None:
    """A pending tool call at the end is left for the next summary."""
    history = [*turns(4), tool_turn("c1")[0]]
    assert summary_span(history, 2) == (2, 4)
    assert summary_span(turns(4), 2) == (2, 4)


def test_window_respects_message_limit() -> None:
    """The window keeps at most `max_messages` of the newest messages."""
    body = turns(10)
    assert choose_window_start(body, max_messages=4, max_tokens=None, estimate=chars) == 6


def test_window_never_separates_tool_call_from_result() -> None:
    """A cut that would orphan a tool result moves to the next safe point instead."""
    body = turns(3) + tool_turn("c1") + turns(1, start=5)
    assert choose_window_start(body, max_messages=2, max_tokens=None, estimate=chars) == 5
    start = choose_window_start(body, max_messages=3, max_tokens=None, estimate=chars)
    assert start == 3
    assert body[start]["role"] == "assistant"


def test_window_keeps_newest_segment_even_when_over_limit() -> None:
    """The newest tool-safe segment survives a token limit it alone exceeds."""
    body = [*turns(2), {"role": "user", "content": "x" * 500}]
    assert choose_window_start(body, max_messages=None, max_tokens=10, estimate=chars) == 2


def test_window_respects_token_limit() -> None:
    """The window is the longest safe tail within the token limit."""
    body = turns(6)
    per_message = len("message 0") + 4
    start = choose_window_start(body, max_messages=None, max_tokens=per_message * 2, estimate=chars)
    assert start == 4


def test_summary_injected_into_string_system_prompt() -> None:
    """The summary section is appended to the first system message, which is copied."""
    original = {"role": "system", "content": "You are helpful."}
    section = render_summary_section("They like tea.", version=2, covers_to=40)
    result = system_with_summary([original], section)
    assert result[0]["content"].startswith('You are helpful.\n\n<session_summary version="2"')
    assert "They like tea." in result[0]["content"]
    assert original["content"] == "You are helpful."


def test_summary_injected_as_part_or_new_message() -> None:
    """List content gets a text part; no system prompt yields a new system message."""
    parts = {"role": "system", "content": [{"type": "text", "text": "Be brief."}]}
    assert system_with_summary([parts], "S")[0]["content"][-1] == {"type": "text", "text": "S"}
    assert system_with_summary([], "S") == [{"role": "system", "content": "S"}]
    assert system_with_summary([parts], None) == [parts]


def test_rank_history_finds_chinese_keywords() -> None:
    """BM25 over CJK bigrams finds the older message that mentions the query first.

    Its neighbour follows through its context; the tool output is never a note.
    """
    older = [
        {"role": "user", "content": "我们聊聊天气"},
        {"role": "assistant", "content": "用户喜欢喝咖啡，不喜欢茶"},
        {"role": "tool", "tool_call_id": "x", "content": "咖啡 咖啡 咖啡"},
    ]
    ranked = rank_history(older, "咖啡", limit=5)
    assert [note.text for note in ranked] == ["用户喜欢喝咖啡，不喜欢茶", "我们聊聊天气"]
    assert "message 1" in ranked[0].label


def test_hits_exclude_current_session_and_old_summary_versions() -> None:
    """Recall drops the current session and keeps only each session's newest summary."""
    current = ("user", "u1", "session", "s2")
    other = ("user", "u1", "session", "s1")
    hits = [
        hit(current, "current summary", kind="summary", version=3),
        hit(other, "old summary", kind="summary", version=1),
        hit(other, "new summary", kind="summary", version=2),
        hit(("user", "u1", "profile"), "likes coffee"),
    ]
    texts = [note.text for note in hits_to_recalled(hits, exclude_prefix=current)]
    assert texts == ["new summary", "likes coffee"]


def test_dedupe_and_fuse() -> None:
    """Duplicates of the window are dropped; fusion interleaves rankings by rank."""
    a = [Recalled(text=t, source="memory", label="m", score=1.0) for t in ("A", "B")]
    b = [Recalled(text=t, source="history", label="h", score=1.0) for t in ("C", " a ")]
    fused = fuse_ranked(a, b, limit=10)
    assert [n.text for n in fused] == ["A", "C", "B", " a "]
    assert [n.text for n in dedupe_recalled(fused, against=["c"])] == ["A", "B"]


def test_budget_drops_notes_first_then_shrinks_window() -> None:
    """Over budget: the lowest-ranked notes go first, then the window's oldest segments."""
    system = [{"role": "system", "content": "S" * 20}]
    body = turns(6)
    notes = [Recalled(text=f"note {i}", source="memory", label="m", score=1.0) for i in range(3)]
    roomy = plan_context(
        system=system, body=body, window_start=0, notes=notes, budget=None, estimate=chars
    )
    assert len(roomy.notes) == 3
    tight = plan_context(
        system=system,
        body=body,
        window_start=0,
        notes=notes,
        budget=roomy.tokens - 1,
        estimate=chars,
    )
    assert len(tight.notes) < 3
    assert tight.window_start == 0
    tiny = plan_context(
        system=system, body=body, window_start=0, notes=notes, budget=60, estimate=chars
    )
    assert tiny.notes == ()
    assert 0 < tiny.window_start < len(body)
    assert tiny.system == tuple(system)
    assert tiny.tokens <= 60


def test_budget_never_drops_system_or_last_segment() -> None:
    """Even a budget smaller than the system prompt keeps it and the newest message."""
    system = [{"role": "system", "content": "S" * 100}]
    plan = plan_context(system=system, body=turns(4), window_start=0, budget=5, estimate=chars)
    result = assemble_context(plan, turns(4))
    assert result[0] == system[0]
    assert result[1:] == [turns(4)[-1]]


def test_latest_user_text_skips_internal_and_tool_messages() -> None:
    """The recall query is the newest message a person typed."""
    history = [
        {"role": "user", "content": "where is my order"},
        {"role": "user", "content": "summary", "meta": {"content_type": "summary"}},
        {"role": "assistant", "content": "checking"},
    ]
    assert latest_user_text(history) == "where is my order"


# --- SessionMemory ----------------------------------------------------------------------------


def test_after_turn_not_due_below_threshold(memory: Any) -> None:
    """Fewer than summarize_every new messages schedules nothing."""
    result = memory.after_turn(T, "u1", "s1", turns(19))
    assert (result.scheduled, result.reason, result.pending_messages) == (False, "not_due", 19)


def test_after_turn_without_summarizer_is_skipped(store: InMemoryStore) -> None:
    """Without a summarizer the turn goes on and nothing is written."""
    with SessionMemory(store=store, summarizer=None) as session:
        assert session.after_turn(T, "u1", "s1", turns(50)).reason == "no_summarizer"
    assert store.latest_summary(T, "u1", "s1") is None


def test_dual_write_stores_summary_and_memory(memory: Any, store: InMemoryStore) -> None:
    """A due turn yields summary v1 and one `summary` memory in the session namespace."""
    assert memory.after_turn(T, "u1", "s1", turns(20)).scheduled
    assert memory.drain(timeout=30)
    summary = store.latest_summary(T, "u1", "s1")
    assert summary is not None
    assert (summary.version, summary.covers_from, summary.covers_to) == (1, 0, 20)
    item = store.get(T, ("user", "u1", "session", "s1"), "summary-v1")
    assert item is not None
    assert item.kind == "summary"
    assert item.text == summary.text
    assert item.tags["source"] == "session_summary"
    assert item.tags["version"] == "1"
    assert item.tags["content_hash"] == summary.content_hash
    assert store.pending_outbox(T) == []


def test_summaries_are_incremental(memory: Any, store: InMemoryStore) -> None:
    """The second job reads only new messages, with the previous summary as context."""
    history = turns(45)
    memory.after_turn(T, "u1", "s1", history[:20])
    memory.drain(timeout=30)
    assert memory.after_turn(T, "u1", "s1", history[:39]).reason == "not_due"
    assert memory.after_turn(T, "u1", "s1", history).scheduled
    memory.drain(timeout=30)
    second = memory.summarizer.calls[1]
    assert second["messages"] == history[20:45]
    assert second["previous"].startswith("summary 1")
    latest = store.latest_summary(T, "u1", "s1")
    assert latest is not None
    assert (latest.version, latest.covers_to) == (2, 45)


def test_job_works_on_a_snapshot(memory: Any) -> None:
    """Changing the caller's list after after_turn does not change what is summarized."""
    history = turns(20)
    memory.after_turn(T, "u1", "s1", history)
    history[0]["content"] = "changed"
    memory.drain(timeout=30)
    assert memory.summarizer.calls[0]["messages"][0]["content"] == "message 0"


def test_build_context_injects_summary_and_windows(memory: Any) -> None:
    """The request is the system prompt with the summary, then the messages after what the
    summary covers; a summary of everything still leaves the user's latest message."""
    history = [{"role": "system", "content": "Be kind."}, *turns(60)]
    memory.after_turn(T, "u1", "s1", history)
    memory.drain(timeout=30)
    built = memory.build_context(T, "u1", "s1", history)
    assert built[0]["role"] == "system"
    assert built[0]["content"].startswith("Be kind.")
    assert "summary 1 of s1" in built[0]["content"]
    assert built[1:] == history[-2:]  # message 58 (the user's latest) and the answer to it
    assert history[0] == {"role": "system", "content": "Be kind."}


def test_the_window_leaves_out_what_the_summary_covers(memory: Any, store: InMemoryStore) -> None:
    """A 24-message history whose summary covers 20 goes out as the summary and the 4 after
    it (it once went out as the summary plus all 24)."""
    history = [{"role": "system", "content": "Be kind."}, *turns(24)]
    memory.after_turn(T, "u1", "s1", history[:21])  # the system message and 20 turns
    memory.drain(timeout=30)
    summary = store.latest_summary(T, "u1", "s1")
    assert summary is not None and summary.covers_to == 21
    built = memory.build_context(T, "u1", "s1", history)
    assert "summary 1 of s1" in built[0]["content"]
    assert built[1:] == history[21:]
    # covers_to counts the history's system message; a system prompt given besides it leads.
    built = memory.build_context(T, "u1", "s1", history, system_prompt="Rules.")
    assert [m["role"] for m in built[:2]] == ["system", "system"] and built[2:] == history[21:]


def test_the_window_after_a_summary_keeps_a_pending_tool_call_whole() -> None:
    body = [*turns(4), {"role": "user", "content": "list files"}, *tool_turn("c1")]
    assert window_after_summary(body, 0, 2) == 2  # the summary covers messages 0 and 1
    # Covering the request, the call or its result: the request and the pair still go.
    assert [window_after_summary(body, 0, covered) for covered in (5, 6, 7)] == [4, 4, 4]
    assert window_after_summary(body, 3, 1) == 3  # the window already starts later


def test_build_context_with_explicit_system_prompt_and_no_summary(memory: Any) -> None:
    """A given system prompt leads; without a summary nothing is injected."""
    built = memory.build_context(T, "u1", "s9", turns(3), system_prompt="Rules.")
    assert built == [{"role": "system", "content": "Rules."}, *turns(3)]


def test_hybrid_recalls_other_sessions_and_older_messages(store: InMemoryStore) -> None:
    """Layer 2 holds memories from other sessions and fallen-out messages matching the query."""
    store.put(
        T,
        ("user", "u1", "session", "old"),
        "summary-v1",
        "We planned a trip to Kyoto",
        kind="summary",
        tags={"version": "1"},
    )
    store.put(T, ("user", "u2", "session", "x"), "k", "Kyoto belongs to someone else")
    history = [
        {"role": "user", "content": "book the Kyoto hotel"},
        *turns(10),
        {"role": "user", "content": "what about Kyoto?"},
    ]
    with SessionMemory(store=store, summarizer=None, hybrid=True, window_messages=4) as session:
        built = session.build_context(T, "u1", "s1", history)
    recalled = built[0]
    assert set(recalled) == {"role", "content"}  # schema keys only: sendable as it is
    assert content_type(recalled) == "memory" and is_internal(recalled)
    assert "We planned a trip to Kyoto" in recalled["content"]
    assert "book the Kyoto hotel" in recalled["content"]
    assert "someone else" not in recalled["content"]
    assert "what about Kyoto?" not in recalled["content"]
    assert built[1:] == history[-4:]


def test_recalled_notes_join_the_leading_system_message(store: InMemoryStore) -> None:
    """Strict chat templates refuse a system message that does not lead: the notes go into
    the system prompt (after the summary), never into a system message of their own."""
    store.put(T, ("user", "u1", "session", "old"), "k", "We planned a trip to Kyoto")
    history = [*turns(10), {"role": "user", "content": "what about Kyoto?"}]
    with SessionMemory(store=store, summarizer=None, hybrid=True, window_messages=4) as session:
        built = session.build_context(T, "u1", "s1", history, system_prompt="Be kind.")
    assert [m["role"] for m in built].count("system") == 1 and built[0]["role"] == "system"
    assert built[0]["content"].startswith("Be kind.\n\n<recalled_context>")
    assert "We planned a trip to Kyoto" in built[0]["content"]
    assert built[1:] == history[-4:]


def test_hybrid_is_off_by_default(memory: Any, store: InMemoryStore) -> None:
    """Without hybrid=True no recalled section appears."""
    store.put(T, ("user", "u1", "session", "old"), "k", "Kyoto trip", kind="summary")
    built = memory.build_context(T, "u1", "s1", [{"role": "user", "content": "Kyoto?"}])
    assert built == [{"role": "user", "content": "Kyoto?"}]


def test_recall_searches_all_sessions_of_one_user_in_one_tenant(store: InMemoryStore) -> None:
    """recall() finds the user's memories across sessions, never another user's or tenant's."""
    store.put(T, ("user", "u1", "session", "a"), "k1", "espresso machine broke")
    store.put(T, ("user", "u1", "session", "b"), "k2", "espresso beans order")
    store.put(T, ("user", "u2", "session", "c"), "k3", "espresso for u2")
    store.put("other", ("user", "u1", "session", "a"), "k4", "espresso elsewhere")
    with SessionMemory(store=store, summarizer=None) as session:
        hits = session.recall(T, "u1", "espresso")
    assert sorted(h.item.key for h in hits) == ["k1", "k2"]


def test_recall_mode_searches_by_meaning_with_an_embedder() -> None:
    """recall_mode="vector" finds a memory that shares no word with the question."""
    embedder = AsymmetricEmbedder({"which pet do I have": "adopted a puppy named Rex"})
    store = InMemoryStore(embedder=embedder)
    store.put(T, ("user", "u1", "session", "a"), "pet", "adopted a puppy named Rex")
    store.put(T, ("user", "u1", "session", "a"), "tax", "quarterly tax filing is due")
    with SessionMemory(store=store, summarizer=None, recall_mode="vector") as session:
        assert session.recall(T, "u1", "which pet do I have")[0].item.key == "pet"
        assert session.recall(T, "u1", "which pet do I have", mode="keyword") == []
    history = [{"role": "user", "content": "which pet do I have"}]
    with SessionMemory(
        store=store, summarizer=None, hybrid=True, recall_mode="hybrid", recall_limit=1
    ) as session:
        built = session.build_context(T, "u1", "s1", history)
    assert "adopted a puppy named Rex" in built[0]["content"]
    assert "tax" not in built[0]["content"]


async def test_async_recall_mode_is_used_by_default() -> None:
    """The async twin passes its recall_mode to the store, too."""
    embedder = AsymmetricEmbedder({"which pet do I have": "adopted a puppy named Rex"})
    store = AsyncInMemoryStore(embedder=embedder)
    await store.put(T, ("user", "u1", "session", "a"), "pet", "adopted a puppy named Rex")
    async with AsyncSessionMemory(store=store, summarizer=None, recall_mode="vector") as session:
        hits = await session.recall(T, "u1", "which pet do I have")
    assert [h.item.key for h in hits] == ["pet"]
    assert embedder.queried == ["which pet do I have"]


def test_delete_user_removes_memories_and_summaries(memory: Any, store: InMemoryStore) -> None:
    """delete_user clears the user's summaries, memories and outbox."""
    memory.after_turn(T, "u1", "s1", turns(20))
    memory.drain(timeout=30)
    assert memory.delete_user(T, "u1") >= 2
    assert store.latest_summary(T, "u1", "s1") is None
    assert store.search(T, ("user", "u1")) == []


def test_events_report_started_and_saved(store: InMemoryStore) -> None:
    """A successful job emits started then saved (with memory_written)."""
    seen: list[Any] = []
    with SessionMemory(
        store=store, summarizer=FakeSummarizer(), on_event=[seen.append], summarize_every=5
    ) as session:
        session.after_turn(T, "u1", "s1", turns(5))
        session.drain(timeout=30)
    names = [event.name for event in seen]
    assert names == ["session_summary_started", "session_summary_saved"]
    saved = seen[1]
    assert isinstance(saved, SessionSummarySaved)
    assert saved.memory_written
    assert saved.to_dict()["event"] == "session_summary_saved"


def test_options_are_validated(store: InMemoryStore) -> None:
    """Impossible options raise ConfigError naming them; async handlers are refused."""
    with pytest.raises(ConfigError, match="summarize_every"):
        SessionMemory(store=store, summarizer=None, summarize_every=0)
    with pytest.raises(ConfigError, match="window_tokens"):
        SessionMemory(store=store, summarizer=None, window_tokens=0)
    with pytest.raises(ConfigError, match="recall_mode"):
        SessionMemory(store=store, summarizer=None, recall_mode="fuzzy")  # type: ignore[arg-type]

    async def handler(event: Any) -> None:
        """Never called."""

    with pytest.raises(ConfigError, match="async event handler"):
        SessionMemory(store=store, summarizer=None, on_event=[handler])


def test_bad_tenant_is_rejected(memory: Any) -> None:
    """An empty tenant is a caller bug and raises InvalidInput."""
    with pytest.raises(InvalidInput):
        memory.after_turn("", "u1", "s1", turns(20))


def test_after_close_nothing_is_scheduled(store: InMemoryStore) -> None:
    """A closed SessionMemory skips with reason 'closed'."""
    session = SessionMemory(store=store, summarizer=FakeSummarizer())
    session.close()
    assert session.after_turn(T, "u1", "s1", turns(40)).reason == "closed"


def test_dual_write_on_sqlite(tmp_path: Any) -> None:
    """The whole flow works on the SQLite store from worker threads."""
    store = SQLiteStore(str(tmp_path / "m.db"))
    try:
        with SessionMemory(store=store, summarizer=FakeSummarizer(), summarize_every=10) as s:
            s.after_turn(T, "u1", "s1", turns(10))
            s.drain(timeout=30)
            s.after_turn(T, "u1", "s1", turns(20))
            s.drain(timeout=30)
            hits = s.recall(T, "u1", "coffee", kind="summary")
            built = s.build_context(T, "u1", "s1", turns(20))
        assert sorted(h.item.key for h in hits) == ["summary-v1", "summary-v2"]
        assert [x.version for x in store.summary_history(T, "u1", "s1")] == [1, 2]
        assert "summary 2 of s1" in built[0]["content"]
    finally:
        store.close()


# --- AsyncSessionMemory -----------------------------------------------------------------------


async def test_async_dual_write_and_context() -> None:
    """The async twin schedules a task, dual-writes, and builds the same context."""
    store = AsyncInMemoryStore()
    summarizer = AsyncFakeSummarizer()
    async with AsyncSessionMemory(
        store=store, summarizer=summarizer, summarize_every=10
    ) as session:
        assert (await session.after_turn(T, "u1", "s1", turns(9))).reason == "not_due"
        assert (await session.after_turn(T, "u1", "s1", turns(10))).scheduled
        assert await session.drain(timeout=30)
        built = await session.build_context(T, "u1", "s1", turns(10), system_prompt="Hi")
        hits = await session.recall(T, "u1", "coffee")
    assert "summary 1 of s1" in built[0]["content"]
    assert [h.item.key for h in hits] == ["summary-v1"]
    assert await store.pending_outbox(T) == []


async def test_async_hybrid_and_delete_user() -> None:
    """Async hybrid recall works, and delete_user wipes the user."""
    store = AsyncInMemoryStore()
    await store.put(T, ("user", "u1", "session", "old"), "k", "Kyoto trip notes")
    session = AsyncSessionMemory(store=store, summarizer=None, hybrid=True)
    built = await session.build_context(T, "u1", "s1", [{"role": "user", "content": "Kyoto"}])
    assert "Kyoto trip notes" in built[0]["content"]
    assert await session.delete_user(T, "u1") == 1
    await session.aclose()


@pytest.mark.postgres
def test_dual_write_and_recover_on_postgres(postgres_url: str, pg_schema: str) -> None:
    """open_store picks PostgreSQL for a URL; the dual write and recovery work there too."""
    from synopsis.memory.open import open_store

    tenant = f"t-{uuid.uuid4().hex}"
    store = open_store(postgres_url, schema=pg_schema)
    try:
        with SessionMemory(store=store, summarizer=FakeSummarizer(), summarize_every=5) as s:
            s.after_turn(tenant, "u1", "s1", turns(5))
            assert s.drain(timeout=60)
            assert [h.item.key for h in s.recall(tenant, "u1", "coffee")] == ["summary-v1"]
            assert s.recover(tenant) == 0
            assert s.delete_user(tenant, "u1") >= 2
        assert store.latest_summary(tenant, "u1", "s1") is None
    finally:
        store.close()
    import psycopg

    with psycopg.connect(postgres_url) as conn:
        query = "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s"
        row = conn.execute(query, (pg_schema,)).fetchone()
    assert row is not None and row[0] > 0  # the tables went to the schema asked for


def test_open_store_refuses_a_schema_for_sqlite(tmp_path: Path) -> None:
    from synopsis.memory.open import open_store

    with pytest.raises(ConfigError, match="PostgreSQL only"):
        open_store(str(tmp_path / "x.db"), schema="other")
