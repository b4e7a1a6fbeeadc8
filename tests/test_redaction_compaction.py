"""Redaction in a compaction, end to end: planted values appear nowhere in the summarizer's
requests, the archive, the output or the events; near-misses survive; hash tokens agree.

The summarizer is a recording fake that copies every word it was sent into its summary (the
worst case), so a value that reached it would reach the output too.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synopsis import AsyncCompactor, Compactor, JsonlArchive, MemoryArchive, Redactor
from synopsis.compaction.options import CompactionOptions
from synopsis.errors import ConfigError
from synopsis.messages import content_type, marker_of, split_leading_system
from synopsis.testing import FakeModel
from synopsis.validation import validate_messages
from tests.redaction_corpus import Sample, build_corpus
from tests.redaction_history import (
    SAME_EMAIL,
    AsyncEchoModel,
    EchoModel,
    leaks,
    planted_history,
    strings,
)
from tests.strategies import histories

PLANTED = planted_history()
KEY = b"k" * 32


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def compactor(flavor: str, tmp_path: Path, **options: Any) -> tuple[Any, EchoModel]:
    model = EchoModel() if flavor == "sync" else AsyncEchoModel()
    kind = Compactor if flavor == "sync" else AsyncCompactor
    defaults: dict[str, Any] = {
        "model": model,
        "archive": JsonlArchive(tmp_path / "archive"),
        "trigger_tokens": 500,
        "keep_tail": 6,
        "summarizer_window": 200_000,
        "session_id": "s1",
    }
    return kind(**{**defaults, **options}), model


def archived(tmp_path: Path) -> list[str]:
    """Every string in the archive folder: raw file text and the decoded JSON lines."""
    found: list[str] = []
    for path in sorted((tmp_path / "archive").glob("*")):
        text = path.read_text(encoding="utf-8")
        found.append(text)
        found += [s for line in text.splitlines() if line for s in strings(json.loads(line))]
    return found


@pytest.mark.parametrize("clear", [True, False], ids=["tiered", "summary-only"])
@pytest.mark.parametrize("mode", ["mask", "hash", "drop"])
@pytest.mark.parametrize("flavor", ["sync", "async"])
async def test_planted_values_appear_nowhere_and_near_misses_survive(
    flavor: str, mode: Any, clear: bool, tmp_path: Path
) -> None:
    """Nothing planted reaches the summarizer, the archive, the output or an event; every
    near-miss is still somewhere it belongs, and those of kept messages in the output."""
    twin, model = compactor(flavor, tmp_path, redact=Redactor(mode=mode), clear_tool_outputs=clear)
    preview = twin.preview(PLANTED.messages)
    result = await settle(twin.compact(PLANTED.messages))
    assert result.compacted and result.summary and model.requests
    sent = [s for request in model.requests for s in strings(request)]
    output = list(strings(result.messages))
    stored = archived(tmp_path)
    events = [s for event in result.events for s in strings(event.to_dict())]
    assert stored, "the compaction archived nothing"
    assert leaks(PLANTED.values, sent) == []
    assert leaks(PLANTED.values, stored) == []
    assert leaks(PLANTED.values, output) == []
    assert leaks(PLANTED.values, events) == []
    everywhere = "\x00".join([*sent, *stored, *output])
    assert [near for near in PLANTED.near_misses if near not in everywhere] == []
    kept = [near for near, at in PLANTED.near_at if at in preview.kept]
    assert kept, "the kept tail holds no near-miss: the case tests nothing"
    assert leaks(kept, output) == kept


@pytest.mark.parametrize("flavor", ["sync", "async"])
async def test_the_report_and_the_last_event_count_by_kind(flavor: str, tmp_path: Path) -> None:
    twin, _ = compactor(flavor, tmp_path, redact=Redactor())
    result = await settle(twin.compact(PLANTED.messages))
    counts = result.report()["redacted"]
    assert counts["email"] >= 2 and counts["cn_resident_id"] >= 1 and counts["private_key"] >= 1
    assert sum(counts.values()) >= len(PLANTED.values)
    last = result.events[-1]
    assert last.name == "values_redacted"
    assert last.to_dict()["counts"] == counts and last.to_dict()["total"] == sum(counts.values())


def test_the_preview_counts_what_the_run_redacts(tmp_path: Path) -> None:
    """The echo writes no new value, so the run redacts exactly what the dry run predicted."""
    twin, _ = compactor("sync", tmp_path, redact=Redactor(mode="hash"))
    preview = twin.preview(PLANTED.messages)
    result = twin.compact(PLANTED.messages)
    assert preview.redacted and preview.redacted == result.redacted
    assert preview.to_dict()["redacted"] == dict(result.redacted)
    assert preview.backfilled, "user messages quoted as redacted are still found back-filled"


def test_hash_tokens_name_one_value_alike_in_the_summary_and_the_kept_tail(
    tmp_path: Path,
) -> None:
    redactor = Redactor(mode="hash", hash_key=KEY)
    twin, _ = compactor("sync", tmp_path, redact=redactor)
    result = twin.compact(PLANTED.messages)
    token = redactor.redact_text(SAME_EMAIL).text
    summary = next(m for m in result.messages if content_type(m) == "summary")
    assert token in summary["content"]
    assert token in result.messages[-2]["content"]


def test_structure_survives_redaction(tmp_path: Path) -> None:
    """The leading system message verbatim, tool calls paired, the summary marker intact."""
    twin, _ = compactor("sync", tmp_path, redact=Redactor())
    result = twin.compact(PLANTED.messages)
    validate_messages(result.messages)
    assert result.messages[0] == PLANTED.messages[0]
    calls = {c["id"] for m in result.messages for c in m.get("tool_calls") or ()}
    results = {m["tool_call_id"] for m in result.messages if m["role"] == "tool"}
    assert results <= calls
    summary = next(m for m in result.messages if content_type(m) == "summary")
    marker = marker_of(summary)
    assert marker is not None and marker.integer("version") == 1


def test_a_pattern_that_matches_marker_attributes_leaves_markers_alone(tmp_path: Path) -> None:
    """Numbers are redacted everywhere but in the summary's tag: the next compaction still
    reads the version and the tokens, and writes version 2."""
    redactor = Redactor(patterns={"number": r"\d+"})
    twin, _ = compactor("sync", tmp_path, redact=redactor, clear_tool_outputs=False)
    first = twin.compact(PLANTED.messages)
    marker = marker_of(next(m for m in first.messages if content_type(m) == "summary"))
    assert marker is not None and marker.integer("tokens_after") == first.tokens_after
    grown = [*first.messages, *PLANTED.messages[2:40]]
    second = twin.compact(grown)
    assert second.version == 2 and second.compacted


@pytest.mark.parametrize("flavor", ["sync", "async"])
async def test_below_the_trigger_the_hook_returns_the_history_untouched(
    flavor: str, tmp_path: Path
) -> None:
    """Redaction guards what a compaction sends, archives and returns; a request that does
    not compact goes out as the caller wrote it (redact it yourself to change that)."""
    twin, model = compactor(flavor, tmp_path, redact=Redactor(), trigger_tokens=10**6)
    history = await settle(twin(PLANTED.messages))
    assert history == PLANTED.messages and not model.requests


def test_without_redact_the_values_go_through(tmp_path: Path) -> None:
    """The control case: the same run without redaction leaks, so the checks above bite."""
    twin, model = compactor("sync", tmp_path)
    result = twin.compact(PLANTED.messages)
    sent = [s for request in model.requests for s in strings(request)]
    assert leaks(PLANTED.values, sent) and leaks(PLANTED.values, strings(result.messages))
    assert result.report()["redacted"] == {}
    assert all(event.name != "values_redacted" for event in result.events)


def test_redact_takes_a_redactor_or_a_switch() -> None:
    assert isinstance(CompactionOptions.from_keywords(redact=True).redact, Redactor)
    assert CompactionOptions.from_keywords(redact=False).redact is None
    assert CompactionOptions().redact is None
    mine = Redactor(mode="hash")
    assert Compactor(redact=mine).options.redact is mine
    with pytest.raises(ConfigError, match="redact must be a Redactor"):
        CompactionOptions(redact="yes")  # type: ignore[arg-type]


def test_readme_redaction_example() -> None:
    """The README's redaction example: the compacted history holds no address."""
    from synopsis import SessionMemory, Summarizer
    from synopsis.memory import InMemoryStore

    compactor = Compactor(model="extractive", trigger_tokens=50, redact=True)
    messages = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(10):
        messages.append({"role": "user", "content": f"Mail bug {i} to dev{i}@example.com"})
        messages.append({"role": "assistant", "content": f"Sent bug {i}."})
    compacted = compactor(messages)
    assert compacted[0] == messages[0] and content_type(compacted[1]) == "summary"
    assert "@example.com" not in json.dumps(compacted) and "[REDACTED:email]" in str(compacted)
    store, summarizer = InMemoryStore(), Summarizer(model="extractive")
    memory = SessionMemory(store=store, summarizer=summarizer, redact=Redactor(mode="hash"))
    memory.close()


CORPUS = build_corpus(11, size=104)


@settings(max_examples=50, deadline=None)
@given(histories(), st.lists(st.sampled_from(CORPUS), max_size=3), st.data())
def test_any_compacted_history_holds_no_finding_and_stays_valid(
    history: list[dict[str, Any]], samples: list[Sample], data: st.DataObject
) -> None:
    """Whatever the history and wherever values are planted: a compaction's output (leading
    system messages aside) holds nothing the redactor would find, its tool calls stay
    paired, and the caller's history is not modified."""
    for sample in samples:
        targets = [m for m in history if isinstance(m.get("content"), str)]
        if targets:
            data.draw(st.sampled_from(targets))["content"] += " " + sample.text
    before = json.dumps(history)
    redactor = Redactor(mode="hash")
    model = FakeModel(default="<summary>1. Primary request: go on.</summary>")
    compactor = Compactor(model=model, redact=redactor, keep_tail=2, archive=MemoryArchive())
    result = compactor.compact(history)
    assert json.dumps(history) == before
    validate_messages(result.messages)
    system, rest = split_leading_system(result.messages)
    assert system == split_leading_system(history)[0]
    assert [s for s in strings(rest) if redactor.find(s)] == []
    sent = [s for request in model.requests for s in strings(request.messages[1:])]
    assert [s for s in sent if redactor.find(s)] == []


@pytest.mark.parametrize("flavor", ["sync", "async"])
async def test_a_compacting_model_sends_its_model_the_redacted_compaction(flavor: str) -> None:
    """CompactingModel: when the trigger fires, the wrapped model gets the redacted history."""
    from synopsis import AsyncCompactingModel, CompactingModel
    from synopsis.testing import AsyncFakeModel

    upstream = FakeModel(default="fine") if flavor == "sync" else AsyncFakeModel(default="fine")
    twin, _ = compactor(flavor, Path("unused"), redact=Redactor(), archive=None)
    wrapper = (CompactingModel if flavor == "sync" else AsyncCompactingModel)(upstream, twin)
    response = await settle(wrapper.complete(PLANTED.messages))
    assert response.text == "fine"
    (request,) = upstream.requests
    assert leaks(PLANTED.values, strings(request.messages)) == []
    assert leaks(PLANTED.values, strings(wrapper.history)) == []
