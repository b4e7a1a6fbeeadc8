"""In-place compaction end to end with scripted models (seed experiments C, D, E and more)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synopsis.compaction.archive import MemoryArchive
from synopsis.compaction.compactor import AsyncCompactor, Compactor
from synopsis.compaction.model import AsyncCompactingModel, CompactingModel
from synopsis.errors import (
    ConfigError,
    ContextLengthExceeded,
    PermanentModelError,
    ProviderUnavailable,
)
from synopsis.messages import (
    content_type,
    is_real_user_message,
    mark,
    marker_of,
    open_tool_calls,
    text_of,
)
from synopsis.models.retry import RetryPolicy
from synopsis.summarizer import Summarizer
from synopsis.testing import AsyncFakeModel, FakeModel, RecordingSleep, tool_call_reply
from synopsis.validation import validate_messages
from tests.strategies import histories

DATA = Path(__file__).parent / "data"
SUMMARY = (
    "<analysis>thinking</analysis><summary>1. Primary Request and Intent: fix the bug\n"
    "6. All user messages:\n<all_user_messages>\n- model's paraphrase\n"
    "</all_user_messages>\n8. Current Work: tests</summary>"
)
NO_SLEEP = RetryPolicy(initial_delay=0.0, max_delay=0.0, jitter=False)


def load(name: str) -> list[dict[str, Any]]:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def _call(call_id: str, name: str = "read_file", args: str = '{"path": "a.py"}') -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def make(model: Any, **options: Any) -> Compactor:
    options.setdefault("retry", NO_SLEEP)
    options.setdefault("sleep", RecordingSleep())
    return Compactor(model=model, **options)


def test_seed_c_summarizer_input_is_instruction_context_request() -> None:
    """1 system + 5 context messages -> the summarizer sees 7: persona, the 5, the request."""
    model = FakeModel([SUMMARY])
    history = [{"role": "system", "content": "agent prompt"}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(5)
    ]
    make(model, trigger_tokens=1).compact(history)
    sent = model.requests[0].messages
    assert len(sent) == 7
    assert sent[0]["role"] == "system" and sent[0]["content"] != "agent prompt"
    assert [m["content"] for m in sent[1:6]] == [f"m{i}" for i in range(5)]
    assert sent[-1]["role"] == "user" and "<summary>" in sent[-1]["content"]
    assert all(m["role"] != "system" for m in sent[1:])


def test_under_threshold_returns_a_new_unchanged_list() -> None:
    """Nothing fires: the same messages in a new list, and no model call."""
    model = FakeModel()
    history = [{"role": "user", "content": "short"}]
    out = make(model, trigger_tokens=1000)(history)
    assert out == history and out is not history
    assert model.requests == []


def test_over_threshold_replaces_history_with_one_marked_summary() -> None:
    """Tokens over the trigger: [system, summary], summary is a marked user message."""
    history = load("seed-a.json")
    before = copy.deepcopy(history)
    out = make(FakeModel([SUMMARY]), trigger_tokens=5000, counter="adk")(history)
    assert history == before
    assert out[0] == history[0]
    assert len(out) == 2
    summary = out[1]
    assert summary["role"] == "user" and content_type(summary) == "summary"
    assert "thinking" not in summary["content"]  # the analysis scratchpad is dropped
    assert "fix the bug" in summary["content"]


def test_seed_d_user_budget_keeps_fourth_and_fifth_in_order() -> None:
    """Budget 10 with adk keeps only the 4th and 5th user questions, oldest first."""
    result = make(FakeModel([SUMMARY]), counter="adk", user_budget=10).compact(load("seed-d.json"))
    block = text_of(result.messages[-1]).split("<all_user_messages>")[1]
    block = block.split("</all_user_messages>")[0]
    assert "用户提问第四号" in block and "用户提问第五号" in block
    assert block.index("第四号") < block.index("第五号")
    for other in ("第一号", "第二号", "第三号"):
        assert other not in block
    assert "model's paraphrase" not in block


def test_seed_d_full_budget_keeps_all_five() -> None:
    """The default 30,000-token budget keeps all five questions."""
    result = make(FakeModel([SUMMARY]), counter="adk").compact(load("seed-d.json"))
    text = text_of(result.messages[-1])
    positions = [text.index(f"用户提问第{n}号") for n in "一二三四五"]
    assert positions == sorted(positions)


def test_seed_e_compacted_history_has_no_real_user_messages() -> None:
    """After compaction [system, summary] holds 0 real user messages."""
    result = make(FakeModel([SUMMARY])).compact(load("seed-d.json"))
    assert [is_real_user_message(m) for m in result.messages] == [False, False]


def test_message_only_trigger_does_not_fire_forever() -> None:
    """trigger_messages alone leaves the token clause off (the original fired on every call)."""
    model = FakeModel([SUMMARY])
    compactor = make(model, trigger_messages=3)
    short = [{"role": "user", "content": "msg1"}, {"role": "assistant", "content": "msg2"}]
    assert compactor(short) == short
    assert model.requests == []


def test_fresh_summary_does_not_retrigger_on_the_next_call() -> None:
    """A compacted history plus one reply does not compact again."""
    model = FakeModel([SUMMARY, SUMMARY])
    compactor = make(model, trigger_messages=2)
    history = [{"role": "user", "content": f"q{i}"} for i in range(4)]
    out = compactor(history)
    assert len(model.requests) == 1
    out = compactor([*out, {"role": "assistant", "content": "ok"}])
    assert len(model.requests) == 1
    assert content_type(out[0]) == "summary"


def test_transient_error_is_retried_and_events_are_ordered() -> None:
    """A 5xx-like failure is retried; events: before, generate x2, after."""
    seen: list[str] = []
    model = FakeModel([ProviderUnavailable("boom", model="fake:model"), SUMMARY])
    result = make(model, on_event=[lambda e: seen.append(e.name)]).compact(load("seed-d.json"))
    assert result.compacted and result.attempts == 2
    assert seen == ["before_summarize", "generate_summary", "generate_summary", "after_summarize"]


def test_tool_call_response_is_rejected_and_retried() -> None:
    """A summarizer that calls a tool fails that attempt; the retry's text is used."""
    model = FakeModel([tool_call_reply(), SUMMARY])
    result = make(model).compact(load("seed-d.json"))
    assert result.attempts == 2 and "fix the bug" in (result.summary or "")


def test_failover_goes_to_the_next_model_in_order() -> None:
    """When the primary keeps failing the backup writes the summary."""
    primary = FakeModel(default=PermanentModelError("bad key", model="p"), name="p")
    backup = FakeModel([SUMMARY], name="b")
    result = make(primary, failover=[backup]).compact(load("seed-d.json"))
    assert result.model == "b"
    assert len(primary.requests) == 1  # a permanent error is not retried


def test_all_models_failing_keeps_history_and_reports() -> None:
    """Every model fails: the original history comes back, with an error and an event."""
    events: list[Any] = []
    history = load("seed-d.json")
    model = FakeModel(default=ProviderUnavailable("down", model="fake:model"))
    result = make(model, on_event=[events.append]).compact(history)
    assert result.messages == history and not result.compacted
    assert result.error and result.error["type"] == "AllModelsFailed"
    assert events[-1].name == "summarize_failed"
    json.dumps([e.to_dict() for e in events])
    assert len(model.requests) == 4  # 1 + 3 retries


def test_extractive_fallback_compacts_when_models_fail() -> None:
    """fallback='extractive' still compacts, offline, when every LLM failed."""
    model = FakeModel(default=ProviderUnavailable("down", model="fake:model"))
    result = make(model, fallback="extractive").compact(load("seed-d.json"))
    assert result.compacted and result.fallback == "extractive"
    assert content_type(result.messages[-1]) == "summary"


def test_truncate_fallback_archives_and_drops() -> None:
    """fallback='truncate' drops the old part after archiving it, with a notice; the newest
    user message is never dropped (issue #8), so the archive holds all but that one."""
    archive = MemoryArchive()
    model = FakeModel(default=ProviderUnavailable("down", model="fake:model"))
    history = load("seed-d.json")
    result = make(model, fallback="truncate", archive=archive).compact(history)
    assert result.compacted and result.fallback == "truncate"
    newest = history[-2]
    assert newest["content"] == "用户提问第五号" and newest in result.messages
    assert archive.batches[0][1] == [m for m in history[1:] if m is not newest]
    assert "removed" in text_of(result.messages[1])


def test_tail_is_kept_tool_pair_safe_and_without_stale_usage() -> None:
    """keep_tail keeps whole tool groups verbatim and drops their stale usage numbers."""
    history = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "fix a.py"},
        {
            "role": "assistant",
            "tool_calls": [_call("c1")],
            "content": None,
            "usage": {"total_tokens": 90_000},
        },
        {"role": "tool", "tool_call_id": "c1", "content": "print(1)"},
    ]
    result = make(FakeModel([SUMMARY]), keep_tail=1).compact(history)
    roles = [m["role"] for m in result.messages]
    assert roles == ["system", "user", "assistant", "tool"]
    assert "usage" not in result.messages[2]
    validate_messages(result.messages)


def test_second_compaction_is_incremental_and_carries_user_messages() -> None:
    """The previous summary is given to the model, and quoted user messages survive."""
    model = FakeModel([SUMMARY, SUMMARY])
    compactor = make(model)
    first = compactor.compact(
        [{"role": "user", "content": "first request"}, {"role": "assistant", "content": "done"}]
    ).messages
    second = compactor.compact(
        [
            *first,
            {"role": "user", "content": "second request"},
            {"role": "assistant", "content": "ok"},
        ]
    ).messages
    request = model.requests[1].messages[-1]["content"]
    assert "fix the bug" in request  # the previous summary, for updating
    text = text_of(second[-1])
    assert "first request" in text and "second request" in text
    marker = marker_of(second[-1])
    assert marker is not None and marker.integer("version") == 2


def test_skills_survive_two_compactions() -> None:
    """A skill loaded through the skill tool is kept verbatim across compactions."""
    model = FakeModel(default=SUMMARY)
    compactor = make(model)
    history = [
        {"role": "user", "content": "use the style guide"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [_call("s1", "skill", '{"skill": "style"}')],
        },
        {"role": "tool", "tool_call_id": "s1", "content": "Always use tabs."},
    ]
    once = compactor.compact(history).messages
    twice = compactor.compact([*once, {"role": "user", "content": "more"}]).messages
    skills = [m for m in twice if content_type(m) == "skills"]
    assert len(skills) == 1 and "Always use tabs." in text_of(skills[0])


def test_malformed_skill_call_is_skipped_not_fatal() -> None:
    """Bad JSON in a skill call does not fail the compaction."""
    history = [
        {"role": "assistant", "content": None, "tool_calls": [_call("s1", "skill", "{oops")]},
        {"role": "tool", "tool_call_id": "s1", "content": "x"},
        {"role": "user", "content": "go on"},
    ]
    assert make(FakeModel([SUMMARY])).compact(history).compacted


def test_archive_receives_replaced_messages_and_summary_points_to_it() -> None:
    """Nothing is lost: the replaced messages are archived and the summary names where."""
    archive = MemoryArchive()
    history = load("seed-d.json")
    result = make(FakeModel([SUMMARY]), archive=archive, session_id="s1").compact(history)
    assert archive.batches == [("s1", history[1:])]
    assert result.archive and result.archive in text_of(result.messages[-1])


def test_jsonl_archive_is_a_loadable_transcript(tmp_path: Path) -> None:
    """The default archive format reads back as a transcript."""
    from synopsis.transcripts import load_transcript

    history = load("seed-d.json")
    result = make(FakeModel([SUMMARY]), archive=str(tmp_path), session_id="a/b").compact(history)
    assert load_transcript(result.archive or "").messages == history[1:]


def test_overflow_error_compacts_and_retries_once() -> None:
    """CompactingModel retries after compacting when the provider says context exceeded."""
    agent = FakeModel([ContextLengthExceeded("too long", model="agent"), "answer"], name="agent")
    wrapped = CompactingModel(agent, make(FakeModel([SUMMARY]), trigger_tokens=10**9))
    response = wrapped.complete(load("seed-d.json"))
    assert response.text == "answer"
    assert content_type(agent.requests[1].messages[-1]) == "summary"


def test_chunked_summarization_respects_the_summarizer_window() -> None:
    """A history larger than the summarizer's window is summarized in rolling chunks."""
    model = FakeModel(default=SUMMARY, context_window=3000)
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": "word " * 400} for i in range(20)
    ]
    summarizer = Summarizer(model=model, retry=NO_SLEEP, window=3000, max_output_tokens=500)
    compactor = Compactor(summarizer=summarizer)
    result = compactor.compact(history)
    assert result.compacted and len(model.requests) > 1
    estimate = compactor.counter.estimate
    for request in model.requests:
        assert sum(estimate(m) for m in request.messages) <= 3000
    assert "fix the bug" in model.requests[-1].messages[-1]["content"]


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(histories(max_turns=14), st.integers(0, 5))
def test_compaction_invariants_on_random_histories(history: list, keep: int) -> None:
    """No orphans or dangling calls, system messages verbatim, input never mutated."""
    before = copy.deepcopy(history)
    result = make(FakeModel(default=SUMMARY), keep_tail=keep).compact(history)
    assert history == before
    out = result.messages
    validate_messages(out)
    assert not open_tool_calls(out)
    leading = []
    for m in history:
        if m["role"] != "system":
            break
        leading.append(m)
    assert out[: len(leading)] == leading


def test_ten_rounds_of_recompaction_keep_the_summary_bounded() -> None:
    """Re-compacting ten times with the offline summarizer does not snowball."""
    compactor = Compactor(model="extractive", user_budget=200)
    history: list[dict[str, Any]] = [{"role": "system", "content": "agent"}]
    sizes = []
    for round_ in range(10):
        for i in range(6):
            history.append({"role": "user", "content": f"round {round_} question {i} " * 5})
            history.append({"role": "assistant", "content": f"answer {i} " * 20})
        history = compactor.compact(history).messages
        sizes.append(compactor.counter.estimate(history[-1]))
    assert max(sizes) < 3 * sizes[0] + 400
    assert max(sizes[5:]) <= max(sizes[:5]) * 1.5 + 200


async def test_async_compactor_matches_sync() -> None:
    """The async twin compacts the same way and awaits async event handlers."""
    seen: list[str] = []

    async def handler(event: Any) -> None:
        seen.append(event.name)

    model = AsyncFakeModel([ProviderUnavailable("x", model="fake:model"), SUMMARY])
    compactor = AsyncCompactor(
        model=model,
        retry=NO_SLEEP,
        on_event=[handler],
        sleep=RecordingSleep().asleep,
        counter="adk",
        user_budget=10,
    )
    result = await compactor.compact(load("seed-d.json"))
    assert result.compacted and result.attempts == 2
    assert seen[0] == "before_summarize" and seen[-1] == "after_summarize"
    assert "用户提问第五号" in text_of(result.messages[-1])
    assert await compactor([{"role": "user", "content": "x"}]) == [{"role": "user", "content": "x"}]


async def test_async_overflow_path() -> None:
    """AsyncCompactingModel compacts and retries on a context-length error."""
    agent = AsyncFakeModel([ContextLengthExceeded("long", model="a"), "fine"], name="a")
    compactor = AsyncCompactor(
        model=AsyncFakeModel([SUMMARY]), retry=NO_SLEEP, trigger_tokens=10**9
    )
    response = await AsyncCompactingModel(agent, compactor).complete(load("seed-d.json"))
    assert response.text == "fine"


def test_sync_compactor_rejects_async_handlers() -> None:
    """An async handler given to the sync compactor is a ConfigError at construction."""

    async def handler(event: Any) -> None:
        return None

    with pytest.raises(ConfigError):
        Compactor(on_event=[handler])


# -- markers in the text, truncation and the skipped event (issue #8) ----------------------------


def test_regrowth_guard_reads_the_summary_marker_after_a_round_trip() -> None:
    """A summary that could not get below the trigger is not redone on the very next call,
    even after the history went through JSON and LangChain: the guard reads the marker."""
    from langchain_core.messages import convert_to_messages, convert_to_openai_messages

    model = FakeModel(default="<summary>" + "word " * 400 + "</summary>")
    compactor = make(model, trigger_tokens=100, counter="adk")
    first = compactor(
        [{"role": "user", "content": "x " * 300}, {"role": "assistant", "content": "y"}]
    )
    assert content_type(first[-1]) == "summary" and len(model.requests) == 1
    again = convert_to_openai_messages(convert_to_messages(json.loads(json.dumps(first))))
    again.append({"role": "user", "content": "a little more"})
    assert compactor(again) == again and len(model.requests) == 1


def test_the_result_and_the_marker_carry_the_summary_version() -> None:
    """Each compaction numbers its summary one above the previous one."""
    compactor = make(FakeModel(default=SUMMARY))
    first = compactor.compact([{"role": "user", "content": "a"}])
    second = compactor.compact([*first.messages, {"role": "user", "content": "b"}])
    assert (first.version, second.version) == (1, 2) and second.report()["version"] == 2
    marker = marker_of(second.messages[-1])
    assert marker is not None and marker.integer("version") == 2


def test_a_truncation_notice_is_summarized_later_with_its_quotes() -> None:
    """User messages dropped by a truncation survive into the next real summary."""
    failing = FakeModel(default=ProviderUnavailable("down", model="fake:model"))
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " * 20}
        for i in range(12)
    ]
    truncated = make(failing, fallback="truncate").compact(history)
    assert truncated.compacted and content_type(truncated.messages[0]) == "notice"
    summary = make(FakeModel(default=SUMMARY)).compact(truncated.messages).messages[-1]
    assert "message 0 message 0" in text_of(summary)


async def test_both_drivers_emit_compaction_skipped() -> None:
    """A compaction with nothing worth summarizing is reported by an event, sync and async."""
    sync_events: list[Any] = []
    async_events: list[Any] = []
    history = [{"role": "user", "content": "only one"}]
    sync = make(FakeModel(), keep_tail=1, on_event=[sync_events.append]).compact(history)
    asynchronous = await AsyncCompactor(
        model=AsyncFakeModel(), keep_tail=1, on_event=[async_events.append]
    ).compact(history)
    assert sync == asynchronous and sync.events == tuple(sync_events) == tuple(async_events)
    assert [e.to_dict()["event"] for e in sync_events] == ["compaction_skipped"]
    json.dumps(sync_events[0].to_dict())


def test_plan_truncation_drops_the_oldest_unprotected_groups_first() -> None:
    """The previous summary and the newest user message stay; other internal messages go;
    tool groups go whole; the newest run that fits the budget is kept."""
    from synopsis.compaction.plan import plan_compaction, plan_truncation

    summary = {"role": "user", "content": mark("summary", "S")}
    skills = {"role": "user", "content": mark("skills", "K")}
    history = [
        summary,
        skills,
        {"role": "user", "content": "old " * 10},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "r " * 10},
        {"role": "user", "content": "newest request"},
        {"role": "assistant", "content": "a " * 10},
    ]

    def size(message: Any) -> int:
        return len(text_of(message)) // 4 + 1

    plan = plan_compaction(history, estimate=size)
    keep_all = plan_truncation(plan, estimate=size)
    assert keep_all.dropped == (skills,)
    tight = plan_truncation(plan, estimate=size, max_tokens=21)
    assert tight.kept == (summary, history[5], history[6])
    assert tight.dropped == (skills, history[2], history[3], history[4])
    nothing = plan_truncation(plan, estimate=size, max_tokens=0)
    assert nothing.kept == (summary, history[5])


def test_the_extractive_model_reads_a_marked_summary_as_the_previous_one() -> None:
    """The offline model folds a summary it meets in its input into its own sections and
    never quotes it as something the user said."""
    from synopsis.models.extractive import ExtractiveModel

    first = make(FakeModel([SUMMARY])).compact([{"role": "user", "content": "first request"}])
    later = [*first.messages, {"role": "user", "content": "second request"}]
    text = ExtractiveModel().complete(later).text
    assert "first request" in text and "second request" in text  # the block of the previous
    assert "continues an earlier one" not in text and "<synopsis:" not in text
