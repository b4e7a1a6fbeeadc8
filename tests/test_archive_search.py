"""Searching the archives compaction writes: the in-memory and the JSONL archive, ranked by the
memory engine (keyword with neighbour context, hybrid with an embedder), one session at a time;
the summary's pointer naming the search tool; and the compactors writing to them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from synopsis import AsyncCompactor, Compactor, JsonlArchive, MemoryArchive, history_tool
from synopsis.compaction.archive import MAX_SEARCH_LIMIT, ArchiveHit, archived_text
from synopsis.compaction.store_archive import AsyncStoreArchive
from synopsis.errors import ConfigError, InvalidInput
from synopsis.memory import AsyncInMemoryStore
from synopsis.memory.ranking import CONTEXT_WINDOW
from synopsis.testing import BigramEmbedder

TRIP = [
    {"role": "user", "content": "Let's plan the trip to Portugal."},
    {"role": "assistant", "content": "I booked flight TP1234 to Lisbon, leaving May 3."},
    {"role": "user", "content": "Great. Which hotel did you pick?"},
    {"role": "assistant", "content": "Hotel Avenida, room 512, breakfast included."},
    {"role": "user", "content": "我们下午去断桥看看，然后去灵隐寺。"},
    {"role": "assistant", "content": "好的，门票已经订好了。"},
]


def _archives(tmp_path: Path) -> list[Any]:
    return [MemoryArchive(), JsonlArchive(tmp_path / "archive")]


def _texts(hits: Sequence[ArchiveHit]) -> list[str]:
    return [str(hit.message["content"]) for hit in hits]


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
def test_a_fact_is_found_best_first_with_its_position(tmp_path: Path, kind: str) -> None:
    archive = _archives(tmp_path)[kind == "jsonl"]
    archive.write(TRIP[:3], session_id="s1")
    archive.write(TRIP[3:], session_id="s1")
    hits = archive.search("flight Lisbon", session_id="s1")
    assert hits[0].message == TRIP[1]
    assert hits[0].position == 1
    assert hits[0].score > 0
    assert _texts(archive.search("room 512", session_id="s1"))[0] == TRIP[3]["content"]


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
def test_chinese_words_are_found_inside_sentences(tmp_path: Path, kind: str) -> None:
    archive = _archives(tmp_path)[kind == "jsonl"]
    archive.write(TRIP, session_id="s1")
    assert _texts(archive.search("断桥", session_id="s1"))[0] == TRIP[4]["content"]
    assert _texts(archive.search("门票", session_id="s1"))[0] == TRIP[5]["content"]


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
def test_a_turn_is_found_by_its_neighbours_words(tmp_path: Path, kind: str) -> None:
    """'Yes, the adoption agencies!' says nothing of research; the question before it does."""
    archive = _archives(tmp_path)[kind == "jsonl"]
    archive.write(
        [
            {"role": "user", "content": "What did Caroline research last week?"},
            {"role": "assistant", "content": "Yes, the adoption agencies!"},
            *[{"role": "user", "content": f"unrelated chatter number {i}"} for i in range(8)],
        ],
        session_id="s1",
    )
    found = _texts(archive.search("research", session_id="s1"))
    assert "Yes, the adoption agencies!" in found
    assert not any("chatter number 7" in text for text in found)


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
def test_a_search_sees_only_its_own_session(tmp_path: Path, kind: str) -> None:
    archive = _archives(tmp_path)[kind == "jsonl"]
    archive.write(TRIP, session_id="s1")
    archive.write([{"role": "user", "content": "flight to Paris on Friday"}], session_id="s2")
    assert _texts(archive.search("flight", session_id="s2")) == ["flight to Paris on Friday"]
    assert "flight to Paris on Friday" not in _texts(archive.search("flight", session_id="s1"))
    assert archive.search("flight", session_id="never-written") == []


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
def test_messages_written_after_a_search_are_found_by_the_next(tmp_path: Path, kind: str) -> None:
    archive = _archives(tmp_path)[kind == "jsonl"]
    archive.write(TRIP[:2], session_id="s1")
    assert archive.search("Avenida", session_id="s1") == []
    archive.write(TRIP[2:], session_id="s1")
    hits = archive.search("Avenida", session_id="s1")
    assert hits[0].message == TRIP[3]
    assert hits[0].position == 3


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
def test_a_later_search_embeds_only_what_was_added(tmp_path: Path, kind: str) -> None:
    """The index grows with the archive: the messages written since the last search, and the
    last CONTEXT_WINDOW before them (their neighbours changed), are indexed; nothing else."""
    embedder = CountingEmbedder()
    archive = (
        MemoryArchive(embedder=embedder)
        if kind == "memory"
        else JsonlArchive(tmp_path / "a", embedder=embedder)
    )
    history = [{"role": "user", "content": f"message {i} about topic {i % 7}"} for i in range(60)]
    archive.write(history, session_id="s1")
    archive.search("topic 3", session_id="s1")
    embedded = embedder.texts
    assert embedded >= 60
    archive.write([{"role": "user", "content": "one more about topic 3"}], session_id="s1")
    hits = archive.search("one more", session_id="s1")
    assert hits[0].message["content"] == "one more about topic 3"
    # 1 new + CONTEXT_WINDOW re-indexed, plus the query itself
    assert embedder.texts - embedded <= 1 + CONTEXT_WINDOW + 1
    archive.search("topic 5", session_id="s1")
    assert embedder.texts - embedded <= 1 + CONTEXT_WINDOW + 2


class CountingEmbedder(BigramEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return super().__call__(texts)


def test_hybrid_search_finds_a_message_sharing_no_term(tmp_path: Path) -> None:
    """With an embedder the ranking is hybrid: a misspelt query still finds the message by its
    character bigrams, which keyword search alone cannot."""
    history = [
        {"role": "user", "content": "the deployment finished without errors"},
        {"role": "assistant", "content": "kubernetes cluster upgraded"},
        *[{"role": "user", "content": f"note {i}: lunch at noon"} for i in range(6)],
    ]
    keyword = MemoryArchive()
    hybrid = MemoryArchive(embedder=BigramEmbedder())
    for archive in (keyword, hybrid):
        archive.write(history, session_id="s1")
    assert keyword.search("kubernetis", session_id="s1") == []
    assert _texts(hybrid.search("kubernetis", session_id="s1"))[0] == "kubernetes cluster upgraded"


def test_tool_calls_are_found_by_their_name_and_arguments() -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "src/billing.py"}'},
            }
        ],
    }
    assert "read_file" in archived_text(call)
    archive = MemoryArchive()
    archive.write([call, {"role": "tool", "tool_call_id": "c1", "content": "def charge(): ..."}],
                  session_id=None)  # fmt: skip
    assert archive.search("billing", session_id=None)[0].message == call


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
@pytest.mark.parametrize(
    ("query", "limit"), [("", 10), ("   ", 10), (None, 10), ("x", 0), ("x", MAX_SEARCH_LIMIT + 1),
                         ("x", True), ("x", "3")],
)  # fmt: skip
def test_bad_searches_are_refused_with_a_clear_error(
    tmp_path: Path, kind: str, query: Any, limit: Any
) -> None:
    archive = _archives(tmp_path)[kind == "jsonl"]
    with pytest.raises(InvalidInput, match=r"query|limit"):
        archive.search(query, session_id="s1", limit=limit)


def test_a_limit_bounds_the_hits(tmp_path: Path) -> None:
    archive = JsonlArchive(tmp_path)
    archive.write([{"role": "user", "content": f"apple {i}"} for i in range(30)], session_id="s")
    assert len(archive.search("apple", session_id="s", limit=4)) == 4
    assert len(archive.search("apple", session_id="s")) == 10


def test_a_corrupt_archive_line_names_the_file_and_line(tmp_path: Path) -> None:
    archive = JsonlArchive(tmp_path)
    path = Path(archive.write(TRIP[:2], session_id="s1"))
    with path.open("a", encoding="utf-8") as file:
        file.write("not json\n")
    with pytest.raises(InvalidInput, match=r"line 3: not JSON"):
        archive.search("flight", session_id="s1")


def test_a_rewritten_archive_file_is_read_again(tmp_path: Path) -> None:
    archive = JsonlArchive(tmp_path)
    path = Path(archive.write(TRIP, session_id="s1"))
    assert archive.search("Avenida", session_id="s1")
    path.write_text(json.dumps({"role": "user", "content": "only this"}) + "\n")
    assert archive.search("Avenida", session_id="s1") == []
    assert _texts(archive.search("only", session_id="s1")) == ["only this"]


def test_another_process_appending_is_seen(tmp_path: Path) -> None:
    writer, reader = JsonlArchive(tmp_path), JsonlArchive(tmp_path)
    writer.write(TRIP[:2], session_id="s1")
    assert reader.search("Avenida", session_id="s1") == []
    writer.write(TRIP[2:], session_id="s1")
    assert reader.search("Avenida", session_id="s1")[0].message == TRIP[3]


# --- the compactors and the summary's pointer -------------------------------------------------


def _long_history(n: int = 40) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for i in range(n):
        history.append({"role": "user", "content": f"question {i} about the project"})
        history.append({"role": "assistant", "content": f"answer {i}: the code word is w{i}x"})
    return history


def test_the_summary_names_the_tool_once_the_compactor_has_one(tmp_path: Path) -> None:
    compactor = Compactor(archive=MemoryArchive(), keep_tail=4, session_id="s1")
    plain = compactor.compact(_long_history())
    assert "search_history" not in str(plain.messages[0]["content"])
    tool = history_tool(compactor)
    assert compactor.options.history_tool == "search_history"
    result = compactor.compact(_long_history())
    summary = str(result.messages[0]["content"])
    assert "call the `search_history` tool" in summary
    assert "w3x" in tool.run("w3x")


def test_the_chinese_summary_names_the_tool() -> None:
    compactor = Compactor(archive=MemoryArchive(), keep_tail=4, prompts="zh")
    history_tool(compactor, name="查找记录")
    summary = str(compactor.compact(_long_history()).messages[0]["content"])
    assert "调用 `查找记录` 工具" in summary


def test_a_compactor_without_a_searchable_archive_has_no_tool() -> None:
    class WriteOnly:
        def write(self, messages: Any, *, session_id: str | None) -> str:
            return "somewhere"

    with pytest.raises(ConfigError, match="no archive"):
        history_tool(Compactor())
    with pytest.raises(ConfigError, match="cannot be searched"):
        history_tool(Compactor(archive=WriteOnly()))


async def test_an_async_compactor_awaits_an_async_store_archive() -> None:
    store = AsyncInMemoryStore()
    archive = AsyncStoreArchive(store, "tenant-a", user_id="u1")
    compactor = AsyncCompactor(archive=archive, keep_tail=4, session_id="s1")
    tool = history_tool(compactor)
    result = await compactor.compact(_long_history())
    assert result.compacted
    assert "the memory store" in str(result.messages[0]["content"])
    assert "w5x" in await tool.arun("w5x")
    with pytest.raises(ConfigError, match="call arun"):
        tool.run("w5x")


def test_a_sync_compactor_refuses_an_async_archive() -> None:
    with pytest.raises(ConfigError, match="needs a sync archive"):
        Compactor(archive=AsyncStoreArchive(AsyncInMemoryStore(), "t"))
