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


def summary_of(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary message of a compacted history (the last message always stays after it)."""
    return next(m for m in messages if content_type(m) == "summary")


def make(model: Any, **options: Any) -> Compactor:
    options.setdefault("retry", NO_SLEEP)
    options.setdefault("sleep", RecordingSleep())
    return Compactor(model=model, **options)


def test_seed_c_summarizer_input_is_instruction_context_request() -> None:
    """1 system + 5 context messages -> the summarizer sees 6: persona, the 4 before the last
    message (which always stays in the context), the request."""
    model = FakeModel([SUMMARY])
    history = [{"role": "system", "content": "agent prompt"}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(5)
    ]
    make(model, trigger_tokens=1).compact(history)
    sent = model.requests[0].messages
    assert len(sent) == 6
    assert sent[0]["role"] == "system" and sent[0]["content"] != "agent prompt"
    assert [m["content"] for m in sent[1:5]] == [f"m{i}" for i in range(4)]
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
    """Tokens over the trigger: [system, summary, newest request], the summary a marked user
    message; the last message (the newest request) stays as itself."""
    history = load("seed-a.json")
    before = copy.deepcopy(history)
    out = make(FakeModel([SUMMARY]), trigger_tokens=5000, counter="adk", keep_tail=0)(history)
    assert history == before
    assert out[0] == history[0]
    assert len(out) == 3 and out[2] == history[-1]
    summary = out[1]
    assert summary["role"] == "user" and content_type(summary) == "summary"
    assert "thinking" not in summary["content"]  # the analysis scratchpad is dropped
    assert "fix the bug" in summary["content"]


def test_seed_d_user_budget_keeps_fourth_and_fifth_in_order() -> None:
    """Budget 10 with adk quotes only the 3rd and 4th user questions, oldest first: the 5th,
    the newest, stays in the context as its own message and is not quoted again."""
    compactor = make(FakeModel([SUMMARY]), counter="adk", user_budget=10, keep_tail=0)
    result = compactor.compact(load("seed-d.json"))
    summary = next(m for m in result.messages if content_type(m) == "summary")
    block = text_of(summary).split("<all_user_messages>")[1]
    block = block.split("</all_user_messages>")[0]
    assert "用户提问第三号" in block and "用户提问第四号" in block
    assert block.index("第三号") < block.index("第四号")
    for other in ("第一号", "第二号", "第五号"):
        assert other not in block
    assert text_of(result.messages[-2]) == "用户提问第五号"
    assert "model's paraphrase" not in block


def test_seed_d_full_budget_keeps_all_five() -> None:
    """The default 30,000-token budget quotes all four questions the summary replaced (the
    fifth, the newest, stays as itself)."""
    result = make(FakeModel([SUMMARY]), counter="adk", keep_tail=0).compact(load("seed-d.json"))
    text = text_of(next(m for m in result.messages if content_type(m) == "summary"))
    positions = [text.index(f"用户提问第{n}号") for n in "一二三四"]
    assert positions == sorted(positions)
    assert [text_of(m) for m in result.messages[-2:]] == ["用户提问第五号", "回答第五号"]


def test_seed_e_compacted_history_has_no_real_user_messages() -> None:
    """After compaction [system, summary, newest request, last reply] holds exactly one real
    user message: the newest (issue 20.5 changed seed E, which kept none)."""
    result = make(FakeModel([SUMMARY]), keep_tail=0).compact(load("seed-d.json"))
    assert [is_real_user_message(m) for m in result.messages] == [False, False, True, False]


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
    assert summary_of(result.messages)


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
    # ... nor the last message, which always stays
    assert archive.batches[0][1] == [m for m in history[1:-1] if m is not newest]
    assert "removed" in text_of(result.messages[1])


def test_tail_is_kept_tool_pair_safe_and_without_stale_usage() -> None:
    """keep_tail keeps whole tool groups verbatim and drops their stale usage numbers."""
    history = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "read b.py"},
        {"role": "assistant", "content": "b.py is fine"},
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
    # system, summary, the newest request (pinned), the tool pair
    assert roles == ["system", "user", "user", "assistant", "tool"]
    assert result.messages[2] == history[3]
    assert "usage" not in result.messages[3]
    validate_messages(result.messages)


def test_second_compaction_is_incremental_and_carries_user_messages() -> None:
    """The previous summary is given to the model, and quoted user messages survive."""
    model = FakeModel([SUMMARY, SUMMARY])
    compactor = make(model, keep_tail=0)
    turns = (("first request", "done"), ("third request", "ok"))
    first = compactor.compact(
        [
            m
            for q, a in turns
            for m in ({"role": "user", "content": q}, {"role": "assistant", "content": a})
        ]
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
    text = text_of(summary_of(second))
    assert "first request" in text and "third request" in text
    assert second[-2] == {"role": "user", "content": "second request"}  # pinned, as itself
    marker = marker_of(summary_of(second))
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
    compactor = make(FakeModel([SUMMARY]), archive=archive, session_id="s1", keep_tail=0)
    result = compactor.compact(history)
    assert archive.batches == [("s1", history[1:-2])]  # the newest request and reply stay
    assert result.archive and result.archive in text_of(summary_of(result.messages))


def test_jsonl_archive_is_a_loadable_transcript(tmp_path: Path) -> None:
    """The default archive format reads back as a transcript."""
    from synopsis.transcripts import load_transcript

    history = load("seed-d.json")
    compactor = make(FakeModel([SUMMARY]), archive=str(tmp_path), session_id="a/b", keep_tail=0)
    result = compactor.compact(history)
    assert load_transcript(result.archive or "").messages == history[1:-2]


def test_overflow_error_compacts_and_retries_once() -> None:
    """CompactingModel retries after compacting when the provider says context exceeded."""
    agent = FakeModel([ContextLengthExceeded("too long", model="agent"), "answer"], name="agent")
    wrapped = CompactingModel(agent, make(FakeModel([SUMMARY]), trigger_tokens=10**9))
    response = wrapped.complete(load("seed-d.json"))
    assert response.text == "answer"
    assert summary_of(agent.requests[1].messages)


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
    assert "用户提问第五号" in text_of(result.messages[-2])  # the newest request, pinned
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
        [
            {"role": "user", "content": "x " * 300},
            {"role": "assistant", "content": "y"},
            {"role": "user", "content": "z"},
        ]
    )
    assert summary_of(first) and len(model.requests) == 1
    again = convert_to_openai_messages(convert_to_messages(json.loads(json.dumps(first))))
    again.append({"role": "user", "content": "a little more"})
    assert compactor(again) == again and len(model.requests) == 1


def test_the_result_and_the_marker_carry_the_summary_version() -> None:
    """Each compaction numbers its summary one above the previous one."""
    compactor = make(FakeModel(default=SUMMARY), keep_tail=0)
    turns = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "A"}]
    first = compactor.compact([*turns, {"role": "user", "content": "b"}])
    second = compactor.compact([*first.messages, *turns, {"role": "user", "content": "c"}])
    assert (first.version, second.version) == (1, 2) and second.report()["version"] == 2
    marker = marker_of(summary_of(second.messages))
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
    summary = summary_of(make(FakeModel(default=SUMMARY)).compact(truncated.messages).messages)
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
    assert plan.tail == (history[6],)  # the last message always stays
    keep_all = plan_truncation(plan, estimate=size)
    assert keep_all.dropped == (skills,)
    tight = plan_truncation(plan, estimate=size, max_tokens=21)
    assert tight.kept == (summary, history[5])
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


# -- defaults never bury the newest request; a compaction ends within its trigger (issue 20) --


def chat(turns: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} about topic {i}"}
        for i in range(turns)
    ]


@pytest.mark.parametrize("keep_tail", [None, 0])
def test_a_compaction_of_two_thousand_messages_ends_within_its_trigger(
    keep_tail: int | None,
) -> None:
    """2,000 messages and a trigger of 2,000 tokens (issue 20.4 measured 30,710 after): the
    quotes of the user's words and the summary are capped by the trigger, the tail too."""
    keywords: dict[str, Any] = {} if keep_tail is None else {"keep_tail": keep_tail}
    result = Compactor(trigger_tokens=2_000, **keywords).compact(chat(2_000))
    assert result.compacted and result.tokens_before > 9 * 2_000
    assert result.tokens_after <= 2_000


def test_the_caps_follow_the_trigger_and_give_way_to_explicit_settings() -> None:
    options = Compactor(trigger_tokens=2_000).options
    assert options.quote_budget == 400 and options.summary_cap == 800
    assert Compactor().options.quote_budget == 30_000  # 160,000 tokens: the budget itself
    explicit = Compactor(trigger_tokens=2_000, summarizer_max_output_tokens=900)
    assert explicit.options.summary_cap is None
    assert explicit.summarizer.max_output_tokens == 900  # type: ignore[attr-defined]
    assert Compactor(trigger_tokens=2_000).summarizer.max_output_tokens == 800  # type: ignore[attr-defined]


@pytest.mark.parametrize("keep_tail", [None, 0, 2])
def test_the_newest_request_and_a_pending_tool_result_stay_as_their_own_messages(
    keep_tail: int | None,
) -> None:
    """Whatever the tail, the upstream never gets only [system, summary] (issue 20.5)."""
    keywords: dict[str, Any] = {} if keep_tail is None else {"keep_tail": keep_tail}
    history = [
        {"role": "system", "content": "You are helpful."},
        *chat(40),
        {"role": "user", "content": "What is the weather in Oslo tomorrow?"},
        {"role": "assistant", "content": None, "tool_calls": [_call("w1", "weather")]},
        {"role": "tool", "tool_call_id": "w1", "content": "Oslo tomorrow: 4 C, light snow."},
    ]
    result = Compactor(trigger_tokens=100, **keywords).compact(history)
    assert result.compacted
    assert history[-3] in result.messages  # the newest request, as itself
    assert result.messages[-2:] == history[-2:]  # the pending call and its result
    validate_messages(result.messages)


def test_a_newest_message_larger_than_a_token_tail_still_stays() -> None:
    """LangChain keeps at least the last message; so does a token-sized tail."""
    from synopsis.compaction.plan import KeepTail

    history = [*chat(20), {"role": "user", "content": "paste: " + "data " * 2_000}]
    result = Compactor(trigger_tokens=500, keep_tail=KeepTail(tokens=50)).compact(history)
    assert result.compacted and result.messages[-1] == history[-1]


def test_a_plain_text_answer_is_a_summary_and_costs_one_call() -> None:
    """Issue 20.3: a callable answering plain text compacted nothing, after 4 paid calls."""
    calls: list[int] = []

    def summarizer(messages: Any) -> str:
        calls.append(len(messages))
        return "SUMMARY"

    history = chat(30)
    result = Compactor(model=summarizer, trigger_messages=10).compact(history, force=False)
    assert result.compacted and len(calls) == 1 and result.attempts == 1
    assert "SUMMARY" in text_of(summary_of(result.messages))


def test_a_langchain_chat_model_is_a_summarizer() -> None:
    """Issue 20.3: GenericFakeChatModel was refused with ConfigError; any chat model works."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    model = GenericFakeChatModel(messages=iter([AIMessage(content="The user chatted 30 turns.")]))
    result = Compactor(model=model, trigger_messages=10).compact(chat(30), force=False)
    assert result.compacted and result.model == "langchain:GenericFakeChatModel"
    assert "The user chatted 30 turns." in text_of(summary_of(result.messages))


async def test_a_langchain_chat_model_summarizes_for_the_async_compactor() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    model = GenericFakeChatModel(messages=iter([AIMessage(content="Thirty turns of chat.")]))
    result = await AsyncCompactor(model=model, trigger_messages=10).compact(chat(30))
    assert result.compacted and "Thirty turns of chat." in text_of(summary_of(result.messages))
