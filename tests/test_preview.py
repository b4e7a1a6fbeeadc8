"""The dry run: it calls no model, writes nothing, tells no one, and predicts the real run.

The prediction is checked against what a real compaction then does, read off its output and
its archive (not off its own report): the messages it cleared, summarized, kept verbatim and
quoted, on the seed cases, on tool-heavy sessions and on random histories.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synopsis.compaction.archive import JsonlArchive, MemoryArchive
from synopsis.compaction.compactor import AsyncCompactor, CompactionResult, Compactor
from synopsis.compaction.options import ToolClearing
from synopsis.compaction.preview import CompactionPreview
from synopsis.compaction.summary import collect_user_messages, parse_user_messages_block
from synopsis.messages import content_type, is_real_user_message, is_system, marked_body
from synopsis.tokens import TokenCounter
from synopsis.transcripts import load_transcript
from tests.strategies import histories
from tests.test_tiered import AsyncForbiddenSummarizer, ForbiddenSummarizer, tool_heavy

DATA = Path(__file__).parent / "data"


def counter_of(text: str) -> int:
    return TokenCounter().estimate_text(text)


def seed(name: str) -> list[dict[str, Any]]:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


# -- what a real run did, read off its output and archive -------------------------------------


def observed(
    messages: Sequence[Mapping[str, Any]],
    result: CompactionResult,
    batches: Sequence[Sequence[Mapping[str, Any]]],
) -> dict[str, tuple[int, ...]]:
    """Cleared, summarized, kept and back-filled input messages, from the real output."""
    everything = range(len(messages))
    cleared: set[int] = set()
    if any(event.name == "tool_outputs_cleared" for event in result.events):
        ids = {m.get("tool_call_id") for m in batches[0] if m["role"] == "tool"}
        cleared = {
            i
            for i in everything
            if messages[i]["role"] == "tool" and messages[i]["tool_call_id"] in ids
        }
    summarized: set[int] = set()
    if result.summary is not None:
        at = next(i for i, m in enumerate(result.messages) if content_type(m) == "summary")
        system = sum(1 for _ in _leading(messages, is_system))
        tail = len(result.messages) - at - 1
        summarized = set(range(system, len(messages) - tail))
    return {
        "cleared": tuple(sorted(cleared)),
        "summarized": tuple(sorted(summarized)),
        "kept": tuple(i for i in everything if i not in summarized | cleared),
        "backfilled": _quoted(messages, result, summarized),
    }


def _leading(messages: Sequence[Mapping[str, Any]], test: Any) -> list[Mapping[str, Any]]:
    out = []
    for message in messages:
        if not test(message):
            break
        out.append(message)
    return out


def _quoted(
    messages: Sequence[Mapping[str, Any]], result: CompactionResult, summarized: set[int]
) -> tuple[int, ...]:
    if not summarized:
        return ()
    summary = next(m for m in result.messages if content_type(m) == "summary")
    quoted = {t.strip() for t in parse_user_messages_block(marked_body(summary))}
    return tuple(
        i
        for i in sorted(summarized)
        if is_real_user_message(messages[i])
        and any(t.strip() in quoted for t in collect_user_messages([messages[i]]))
    )


def predicted(preview: CompactionPreview) -> dict[str, tuple[int, ...]]:
    return {
        "cleared": preview.cleared,
        "summarized": preview.summarized,
        "kept": preview.kept,
        "backfilled": preview.backfilled,
    }


def check_prediction(
    messages: list[dict[str, Any]], directory: str, force: bool, **keywords: Any
) -> None:
    """Preview, then compact for real with the same options; the two must agree."""
    compactor = Compactor(archive=JsonlArchive(directory), session_id="s1", **keywords)
    preview = compactor.preview(messages, force=force)
    assert not any(Path(directory).iterdir()), "the preview wrote a file"
    result = compactor.compact(messages, force=force)
    path = Path(directory) / "s1.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    written = [json.loads(line) for line in lines]
    cleared = [e for e in result.events if e.name == "tool_outputs_cleared"]
    batches = [written[: cleared[0].cleared] if cleared else written]  # tier 1's comes first
    assert predicted(preview) == observed(messages, result, batches)
    assert preview.events == tuple(event.name for event in result.events)
    assert (preview.triggered, preview.compacts) == (result.triggered, result.compacted)
    assert preview.tokens_before == result.tokens_before
    assert [t.name for t in preview.tiers] == [t.name for t in result.tiers]
    if result.tiers and result.tiers[0].name == "clear":
        assert preview.tiers[0] == result.tiers[0]  # same stubs, same archive path, same counts


# -- no model, no write, no event -------------------------------------------------------------


def test_a_preview_calls_no_model_writes_nothing_and_tells_no_one(tmp_path: Path) -> None:
    heard: list[Any] = []
    compactor = Compactor(
        trigger_tokens=1_000,
        clear_tool_outputs=True,
        archive=str(tmp_path / "archive"),
        summarizer=ForbiddenSummarizer(),
        on_event=[heard.append],
    )
    preview = compactor.preview(tool_heavy(chat=10))
    assert preview.calls_model and preview.compacts
    assert not (tmp_path / "archive").exists() and heard == []
    assert preview.archive == str(tmp_path / "archive" / "session.jsonl")


def test_the_async_compactor_previews_the_same(tmp_path: Path) -> None:
    keywords: dict[str, Any] = {"trigger_tokens": 1_000, "clear_tool_outputs": True}
    sync = Compactor(summarizer=ForbiddenSummarizer(), **keywords).preview(tool_heavy(chat=4))
    compactor = AsyncCompactor(summarizer=AsyncForbiddenSummarizer(), **keywords)
    assert compactor.preview(tool_heavy(chat=4)) == sync


def test_the_summary_is_the_offline_stand_in_and_its_input_is_counted() -> None:
    compactor = Compactor(counter="adk", user_budget=10, summarizer=ForbiddenSummarizer())
    preview = compactor.preview(seed("seed-d.json"))  # seed D: a budget of 10 quotes two
    assert preview.summarizer_tokens > 0 and preview.tiers[-1].name == "summarize"
    # The extractive summary stands in for the model's; the user messages it quotes count.
    assert preview.backfilled == (7, 9)
    offline = Compactor(counter="adk", user_budget=10, model="extractive")
    assert preview.tokens_after == offline.compact(seed("seed-d.json")).tokens_after


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "coding-session.json"


def test_the_readme_dry_run_predicts_the_real_run(tmp_path: Path) -> None:
    """The README's command: --dry-run's tokens after is the real run's (it once said 392 for
    a real 922)."""
    from click.testing import CliRunner

    from synopsis.cli import main

    args = [str(EXAMPLE), "--trigger-tokens", "2000", "--json", "-o", str(tmp_path / "c.json")]
    runner = CliRunner()
    dry = runner.invoke(main, ["compact", *args, "--dry-run"])
    assert list(tmp_path.iterdir()) == []
    real = runner.invoke(main, ["compact", *args])
    assert dry.exit_code == 0 and real.exit_code == 0, (dry.output, real.output)
    predicted = json.loads(dry.stdout)["tokens_after"]
    actual = json.loads(real.stdout)["tokens_after"]
    assert predicted == actual


def test_a_preview_of_a_history_below_the_trigger_keeps_everything() -> None:
    preview = Compactor(summarizer=ForbiddenSummarizer()).preview(seed("seed-a.json"), force=False)
    assert not preview.compacts and preview.kept == tuple(range(6)) and preview.tiers == ()


def test_to_dict_is_json() -> None:
    preview = Compactor(trigger_tokens=1_000, clear_tool_outputs=True).preview(tool_heavy())
    data = json.loads(json.dumps(preview.to_dict()))
    assert data["cleared"] == list(preview.cleared) and data["tiers"][0]["tier"] == "clear"


def test_a_memory_archive_is_named_not_written() -> None:
    archive = MemoryArchive()
    Compactor(trigger_tokens=1_000, archive=archive, clear_tool_outputs=True).preview(tool_heavy())
    assert archive.batches == []


# -- the prediction matches the real run ------------------------------------------------------


@pytest.mark.parametrize("name", ["seed-a.json", "seed-d.json"])
@pytest.mark.parametrize("keep_tail", [0, 2])
@pytest.mark.parametrize("force", [True, False])
def test_the_prediction_matches_the_real_run_on_the_seed_cases(
    tmp_path: Path, name: str, keep_tail: int, force: bool
) -> None:
    messages = load_transcript(DATA / name).messages
    check_prediction(
        messages, str(tmp_path), force, trigger_tokens=40, keep_tail=keep_tail, user_budget=10
    )


@pytest.mark.parametrize("trigger", [2_000, 6_000, 60_000])
@pytest.mark.parametrize("keep_tail", [0, 4])
def test_the_prediction_matches_the_real_run_on_tool_heavy_sessions(
    tmp_path: Path, trigger: int, keep_tail: int
) -> None:
    check_prediction(
        tool_heavy(chat=6),
        str(tmp_path),
        False,
        trigger_tokens=trigger,
        keep_tail=keep_tail,
        clear_tool_outputs=ToolClearing(keep_recent=2),
    )


@settings(max_examples=120, deadline=None)
@given(
    histories(max_turns=16),
    st.sampled_from([0, 20, 60, 200]),
    st.integers(0, 5),
    st.one_of(
        st.none(),
        st.builds(ToolClearing, keep_recent=st.integers(0, 3), min_tokens=st.sampled_from([0, 5])),
    ),
    st.booleans(),
)
def test_the_prediction_matches_the_real_run_on_random_histories(
    messages: list[dict[str, Any]],
    trigger: int,
    keep_tail: int,
    clearing: ToolClearing | None,
    force: bool,
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        check_prediction(
            messages,
            directory,
            force,
            trigger_tokens=trigger,
            keep_tail=keep_tail,
            clear_tool_outputs=clearing,
            user_budget=30,
        )


# -- the command line -------------------------------------------------------------------------


def cli(*args: str) -> Any:
    from click.testing import CliRunner

    from synopsis.cli import main

    return CliRunner().invoke(main, list(args))


def test_compact_dry_run_prints_json_and_writes_nothing(tmp_path: Path) -> None:
    source, output = tmp_path / "t.json", tmp_path / "out.json"
    source.write_text(json.dumps(tool_heavy(chat=4)), encoding="utf-8")
    before = source.read_bytes()
    flags = ["--trigger-tokens", "12000", "--clear-tool-outputs", "--clear-keep-recent", "2"]
    done = cli("compact", str(source), "-o", str(output), *flags, "--dry-run", "--json")
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["cleared"] == [3, 5, 7, 9, 11, 13] and not data["calls_model"]
    assert [tier["tier"] for tier in data["tiers"]] == ["clear"]
    assert not output.exists() and source.read_bytes() == before


def test_compact_dry_run_prints_a_table_by_default(tmp_path: Path) -> None:
    source = tmp_path / "t.json"
    source.write_text(json.dumps(tool_heavy(chat=4)), encoding="utf-8")
    done = cli(
        "compact", str(source), "--trigger-tokens", "2000", "--clear-min-tokens", "50", "--dry-run"
    )
    assert done.exit_code == 0, done.output
    for words in ("tiers", "clear", "summarize", "summarized", "kept verbatim"):
        assert words in done.output


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({}, ToolClearing()),  # the library default
        ({"clear_tool_outputs": True}, ToolClearing()),
        ({"clear_keep_recent": 1}, ToolClearing(keep_recent=1)),
        (
            {"clear_exclude": ("grep",), "clear_arguments": True},
            ToolClearing(exclude_tools=frozenset({"grep"}), clear_arguments=True),
        ),
        ({"clear_tool_outputs": False, "clear_keep_recent": 1}, None),
        ({"clear_tool_outputs": False}, None),
    ],
)
def test_the_clearing_flags_fold_into_the_options(
    flags: dict[str, Any], expected: ToolClearing | None
) -> None:
    from synopsis.cli._compact_flags import with_clearing
    from synopsis.compaction.options import CompactionOptions

    assert with_clearing(CompactionOptions(), flags).clear_tool_outputs == expected
