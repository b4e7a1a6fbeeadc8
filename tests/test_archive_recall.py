"""Automatic recall (``recall=Recall()``): archived messages relevant to the newest request come
back into the context, within budget, marked internal, never re-summarized or accumulated."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from synopsis import (
    ArchiveRecalled,
    AsyncCompactor,
    Compactor,
    JsonlArchive,
    MemoryArchive,
    StoreArchive,
)
from synopsis.compaction import Recall
from synopsis.compaction.archive import ArchiveHit
from synopsis.compaction.recall import RECALL_KIND, without_recall
from synopsis.compaction.store_archive import AsyncStoreArchive
from synopsis.errors import ConfigError, StoreError
from synopsis.events import Event
from synopsis.memory import AsyncInMemoryStore, InMemoryStore
from synopsis.messages import is_internal, marker_of, text_of
from synopsis.tokens import TokenCounter

TRIGGER = 1_500
FACT = "My locker combination is 4417 at the Riverside gym."
QUESTION = "What is my locker combination at the gym?"


def _turns(count: int, start: int = 0) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(start, start + count):
        ask = f"Tell me about topic {i}: the weather, the food and the trains of the region."
        said = f"Topic {i} covers the rain, the soup and the slow trains, in some detail here."
        messages += [{"role": "user", "content": ask}, {"role": "assistant", "content": said}]
    return messages


def _replay(compactor: Compactor, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each message through the hook; the last one's call compacts (``compact()``), so the
    recall after it has room under the trigger."""
    history: list[dict[str, Any]] = [{"role": "system", "content": "You help."}]
    for message in messages[:-1]:
        history = compactor([*history, message])
    return compactor.compact([*history, messages[-1]]).messages


def _session(fact: str = FACT) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"[2:00 pm on 3 May, 2023] {fact}"},
        {"role": "assistant", "content": "Noted."},
        *_turns(60),
    ]


def _blocks(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [m for m in messages if (k := marker_of(m)) is not None and k.kind == RECALL_KIND]


def _compactor(archive: Any, events: list[Event] | None = None, **options: Any) -> Compactor:
    return Compactor(
        trigger_tokens=TRIGGER,
        archive=archive,
        recall=Recall(share=0.2),
        on_event=[events.append] if events is not None else [],
        **options,
    )


@pytest.mark.parametrize("kind", ["memory", "jsonl", "store"])
def test_recall_brings_back_the_archived_fact_for_the_newest_question(
    tmp_path: Path, kind: str
) -> None:
    archive: Any = {
        "memory": MemoryArchive(),
        "jsonl": JsonlArchive(tmp_path / "archive"),
        "store": StoreArchive(InMemoryStore(), "tenant-a"),
    }[kind]
    events: list[Event] = []
    compactor = _compactor(archive, events)
    history = _replay(compactor, [*_session(), {"role": "user", "content": QUESTION}])
    assert not any(FACT in text_of(m) for m in history if not is_internal(m))  # compacted away
    (block,) = _blocks(history)
    assert "4417" in text_of(block)
    assert history[-1]["content"] == QUESTION and history[-2] is block  # right before it
    assert is_internal(block)
    recalled = [e for e in events if isinstance(e, ArchiveRecalled)]
    assert recalled and recalled[-1].messages >= 1
    assert recalled[-1].tokens <= recalled[-1].budget <= TRIGGER * 0.2


def test_the_recall_block_never_pushes_the_context_over_the_budget() -> None:
    counter = TokenCounter()
    compactor = _compactor(MemoryArchive(), counter=counter)
    history: list[dict[str, Any]] = [{"role": "system", "content": "You help."}]
    seen = 0
    for message in [*_session(), *_turns(40, start=100)]:
        history = compactor([*history, message])
        if _blocks(history):
            seen += 1
            assert counter.count(history).total <= TRIGGER
    assert seen >= 3


def test_a_recall_block_is_replaced_never_summarized_quoted_or_archived() -> None:
    archive = MemoryArchive()
    compactor = _compactor(archive)
    history = _replay(compactor, [*_session(), {"role": "user", "content": QUESTION}])
    assert len(_blocks(history)) == 1
    # Go on long enough for more compactions: still one block, and no summary, quote or
    # archived message ever holds the block's text.
    for message in [*_turns(40, start=200), {"role": "user", "content": "Locker combination?"}]:
        history = compactor([*history, message])
        assert len(_blocks(history)) <= 1
    archived = [m for _, batch in archive.batches for m in batch]
    assert not any("Archived earlier messages" in text_of(m) for m in archived)
    assert not any(marker_of(m) and marker_of(m).kind == RECALL_KIND for m in archived)  # type: ignore[union-attr]
    summary = next(m for m in history if (k := marker_of(m)) and k.kind == "summary")
    assert "Archived earlier messages" not in text_of(summary)


def test_a_message_already_in_the_context_or_a_repeat_is_not_recalled() -> None:
    archive = MemoryArchive()
    archive.write(
        [
            {"role": "user", "content": FACT},
            {"role": "user", "content": FACT},
            {"role": "assistant", "content": "The gym locker is by the pool."},
        ],
        session_id=None,
    )
    compactor = Compactor(trigger_tokens=TRIGGER, archive=archive, recall=Recall())
    history = [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "<synopsis:summary>\nEarlier.\n</synopsis:summary>"},
        {"role": "assistant", "content": "The gym locker is by the pool."},
        {"role": "user", "content": QUESTION},
    ]
    (block,) = _blocks(compactor(history))
    assert text_of(block).count("4417") == 1
    assert "by the pool" not in text_of(block)


def test_a_later_call_for_the_same_request_keeps_the_block_without_searching() -> None:
    class Counting(MemoryArchive):
        searches = 0

        def search(self, query: str, *, session_id: str | None, limit: int = 10) -> list[Any]:
            Counting.searches += 1
            return super().search(query, session_id=session_id, limit=limit)

    compactor = _compactor(Counting())
    history = _replay(compactor, [*_session(), {"role": "user", "content": QUESTION}])
    before = Counting.searches
    block = _blocks(history)[0]
    # The agent's loop goes on within the same request: a tool call and its result.
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    history = compactor([*history, {"role": "assistant", "content": None, "tool_calls": [call]}])
    history = compactor([*history, {"role": "tool", "tool_call_id": "c1", "content": "ok"}])
    assert Counting.searches == before
    assert _blocks(history) == [block]


def test_off_by_default_the_output_is_byte_identical() -> None:
    """Recall is off by default; and on, a recall that finds nothing changes no byte."""

    class Empty(MemoryArchive):
        def search(self, query: str, *, session_id: str | None, limit: int = 10) -> list[Any]:
            return []

    plain = Compactor(trigger_tokens=TRIGGER, archive=MemoryArchive())
    assert plain.options.recall is None
    messages = [*_session(), {"role": "user", "content": QUESTION}]
    off = json.dumps(_replay(plain, messages), sort_keys=True)
    empty = json.dumps(_replay(_compactor(Empty()), messages), sort_keys=True)
    assert "synopsis:recall" not in off
    assert empty == off


def test_recall_off_leaves_the_compaction_itself_unchanged() -> None:
    """With recall on, the messages other than the block are those recall off gives."""
    on = _replay(_compactor(MemoryArchive()), [*_session(), {"role": "user", "content": QUESTION}])
    off = _replay(
        Compactor(trigger_tokens=TRIGGER, archive=MemoryArchive()),
        [*_session(), {"role": "user", "content": QUESTION}],
    )
    assert without_recall(on)[0] == off


async def test_sync_and_async_compactors_agree() -> None:
    messages = [*_session(), {"role": "user", "content": QUESTION}]
    sync = _replay(_compactor(StoreArchive(InMemoryStore(), "t", clock=_clock())), messages)
    compactor = AsyncCompactor(
        trigger_tokens=TRIGGER,
        archive=AsyncStoreArchive(AsyncInMemoryStore(), "t", clock=_clock()),
        recall=Recall(share=0.2),
    )
    history: list[dict[str, Any]] = [{"role": "system", "content": "You help."}]
    for message in messages[:-1]:
        history = await compactor([*history, message])
    history = (await compactor.compact([*history, messages[-1]])).messages
    assert history == sync
    assert _blocks(history)


async def test_an_async_compactor_searches_a_sync_archive_in_a_thread() -> None:
    compactor = AsyncCompactor(trigger_tokens=TRIGGER, archive=MemoryArchive(), recall=Recall())
    history: list[dict[str, Any]] = [{"role": "system", "content": "You help."}]
    for message in _session():
        history = await compactor([*history, message])
    history = (await compactor.compact([*history, {"role": "user", "content": QUESTION}])).messages
    assert "4417" in text_of(_blocks(history)[0])


def test_the_store_archive_recalls_only_its_own_tenant_and_session() -> None:
    store = InMemoryStore()
    other_tenant = _compactor(StoreArchive(store, "tenant-b"), session_id="s1")
    other_session = _compactor(StoreArchive(store, "tenant-a"), session_id="s2")
    _replay(other_tenant, _session("My locker combination is 9999 at the Riverside gym."))
    _replay(other_session, _session("My locker combination is 8888 at the Riverside gym."))
    mine = _compactor(StoreArchive(store, "tenant-a"), session_id="s1")
    history = _replay(mine, [*_session(), {"role": "user", "content": QUESTION}])
    text = text_of(_blocks(history)[0])
    assert "4417" in text
    assert "9999" not in text and "8888" not in text


def test_a_failing_search_recalls_nothing_and_the_turn_goes_on() -> None:
    class Broken(MemoryArchive):
        def search(self, query: str, *, session_id: str | None, limit: int = 10) -> list[Any]:
            raise StoreError("the database is down")

    history = _replay(_compactor(Broken()), [*_session(), {"role": "user", "content": QUESTION}])
    assert not _blocks(history)
    assert history[-1]["content"] == QUESTION


def test_recall_needs_a_searchable_archive_and_sane_settings() -> None:
    with pytest.raises(ConfigError, match="recall needs an archive"):
        Compactor(recall=Recall())
    with pytest.raises(ConfigError, match=r"Recall\.share"):
        Recall(share=0.9)
    with pytest.raises(ConfigError, match=r"Recall\.limit"):
        Recall(limit=0)
    assert Compactor(archive=MemoryArchive(), recall=True).options.recall == Recall()


def test_a_hit_carries_the_dated_heading_it_was_archived_under(tmp_path: Path) -> None:
    for archive in (MemoryArchive(), JsonlArchive(tmp_path / "a")):
        archive.write(
            [
                {"role": "user", "content": "Session 3 took place on 25 May, 2023."},
                {"role": "assistant", "content": "The invoice number is INV-2024-0042."},
            ],
            session_id=None,
        )
        hit = archive.search("invoice", session_id=None)[0]
        assert isinstance(hit, ArchiveHit) and "INV" in text_of(hit.message)
        assert hit.dated == "Session 3 took place on 25 May, 2023"


def _clock() -> Any:
    ticks = iter(range(1, 10**9))
    return lambda: next(ticks)


@pytest.mark.parametrize("kind", ["memory", "jsonl", "store"])
def test_a_hit_comes_with_its_neighbours_when_asked(tmp_path: Path, kind: str) -> None:
    archive: Any = {
        "memory": MemoryArchive(),
        "jsonl": JsonlArchive(tmp_path / "archive"),
        "store": StoreArchive(InMemoryStore(), "tenant-a"),
    }[kind]
    talk = [
        {"role": "user", "content": "Where did you go on holiday?"},
        {"role": "assistant", "content": "We went to Lisbon in April."},
        {"role": "user", "content": "Did the kids like the aquarium?"},
    ]
    archive.write(talk, session_id="s")
    alone = archive.search("Lisbon", session_id="s", limit=1)[0]
    assert alone.before == () and alone.after == ()
    (hit,) = archive.search("Lisbon", session_id="s", limit=1, neighbours=1)
    assert text_of(hit.message) == "We went to Lisbon in April."
    assert [text_of(m) for m in hit.before] == ["Where did you go on holiday?"]
    assert [text_of(m) for m in hit.after] == ["Did the kids like the aquarium?"]


def test_the_tool_shows_each_hit_with_its_neighbours() -> None:
    from synopsis import history_tool

    archive = MemoryArchive()
    compactor = Compactor(archive=archive)
    archive.write(
        [
            {"role": "user", "content": "Which flight did you book?"},
            {"role": "assistant", "content": "Flight TP1234 to Lisbon."},
        ],
        session_id=None,
    )
    answer = history_tool(compactor).run("TP1234", limit=1)
    assert "[1] assistant (message #1): Flight TP1234 to Lisbon." in answer
    assert "just before, user: Which flight did you book?" in answer
