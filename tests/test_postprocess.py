"""Post-processing: validation, extraction, user-message back-fill and the summary message."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synopsis.compaction.summary import (
    build_summary_message,
    collect_user_messages,
    fill_user_messages,
    finalize_summary,
    parse_user_messages_block,
    trim_middle,
)
from synopsis.errors import InvalidSummary
from synopsis.messages import (
    Marker,
    content_type,
    is_internal,
    is_real_user_message,
    mark,
    marked_body,
    marker_of,
    text_of,
)
from synopsis.models._base import ModelResponse
from synopsis.prompts import CHINESE, ENGLISH
from synopsis.summarizer import extract_summary, validate_summary_response
from synopsis.testing import tool_call_reply


def adk(text: str) -> int:
    return len(text.encode()) // 4


SEED_D = ["用户提问第一号", "用户提问第二号", "用户提问第三号", "用户提问第四号", "用户提问第五号"]
PLACEHOLDER = "<all_user_messages>\n- what the model remembers\n</all_user_messages>"
SUMMARY = (
    "1. Primary request and intent:\nfix it\n\n6. All user messages:\n"
    + PLACEHOLDER
    + "\n\n7. Pending tasks:\nnone"
)


def response(message: dict[str, object] | str) -> ModelResponse:
    if isinstance(message, str):
        message = {"role": "assistant", "content": message}
    return ModelResponse(message=message, model="m1")


def fill(text: str, users: list[str], budget: int = 30_000) -> str:
    return fill_user_messages(text, users, budget_tokens=budget, estimate=adk, prompts=ENGLISH)


# --- validation -------------------------------------------------------------------------------


def test_valid_response_returns_text() -> None:
    """A response with a summary part passes and its full text is returned."""
    text = "<analysis>x</analysis><summary>all good here</summary>"
    assert validate_summary_response(response(text)) == text


@pytest.mark.parametrize("text", ["", "   \n", "<summary> </summary>", "<analysis>long</analysis>"])
def test_empty_responses_are_invalid(text: str) -> None:
    """Empty text, an empty summary and an analysis alone are rejected, naming the model."""
    with pytest.raises(InvalidSummary) as info:
        validate_summary_response(response(text))
    assert info.value.model == "m1"


def test_tool_calls_are_invalid_even_with_text() -> None:
    """A summarizer that calls tools failed the task, whatever text came with it."""
    reply = {**tool_call_reply("read_file"), "content": "<summary>text</summary>"}
    with pytest.raises(InvalidSummary, match="read_file"):
        validate_summary_response(response(reply))


def test_substantial_text_without_tags_is_accepted() -> None:
    """A model that forgot the tags but wrote a real summary is not rejected."""
    text = "The user asked to migrate the database; we changed three files and tests pass."
    assert validate_summary_response(response(text)) == text


# --- extraction -------------------------------------------------------------------------------


def test_extract_drops_analysis() -> None:
    """Defect fix: the <analysis> scratchpad never reaches the summary."""
    text = "<analysis>thinking <summary> mentioned</analysis>\n<summary>\nthe real one\n</summary>"
    assert extract_summary(text) == "the real one"


def test_extract_takes_the_last_complete_summary() -> None:
    """With two summary parts the last complete one wins; the match is non-greedy."""
    assert extract_summary("<summary>draft</summary> then <summary>final</summary>") == "final"


def test_extract_tolerates_unclosed_summary() -> None:
    """An unclosed <summary> runs to the end of the text."""
    assert extract_summary("<analysis>a</analysis><summary>\nbody text") == "body text"


def test_extract_without_tags_keeps_text_minus_analysis() -> None:
    """No summary tag: the whole text without analysis blocks (even an unclosed one)."""
    assert extract_summary("<analysis>x</analysis>\nplain summary") == "plain summary"
    assert extract_summary("<ANALYSIS>x<summary>kept</summary>") == "kept"


# --- back-fill (TestPopulateUserMessagesInternal / TestAllUserMessagesTagRegex) ------------------


def test_seed_d_small_budget_keeps_latest_two_in_order() -> None:
    """Seed D: budget 10 keeps only the fourth and fifth messages, oldest first."""
    assert [adk(t) for t in SEED_D] == [5] * 5
    out = fill(SUMMARY, SEED_D, budget=10)
    assert parse_user_messages_block(out) == ["用户提问第四号", "用户提问第五号"]
    assert ENGLISH.omitted_note in out


def test_seed_d_default_budget_keeps_all_five() -> None:
    """Seed D: budget 30000 keeps all five, in order, and adds no note."""
    out = fill(SUMMARY, SEED_D)
    assert parse_user_messages_block(out) == SEED_D
    assert ENGLISH.omitted_note not in out
    assert "- 用户提问第一号\n- 用户提问第二号" in out


def test_block_replaced_and_surroundings_kept() -> None:
    """The placeholder disappears; text before and after (section 7) is kept."""
    out = fill(SUMMARY, ["msg1", "msg2"])
    assert "what the model remembers" not in out
    assert out.startswith("1. Primary request and intent:\nfix it")
    assert out.endswith("7. Pending tasks:\nnone")
    assert "<all_user_messages>\n- msg1\n- msg2\n</all_user_messages>" in out


def test_tag_named_earlier_does_not_swallow_the_text() -> None:
    """Defect fix: a tag mentioned in prose before the block never makes a greedy match."""
    text = "Section 6 goes in <all_user_messages>.\n2. Key concepts: KEEP ME\n" + PLACEHOLDER
    out = fill(text, ["real"])
    assert "KEEP ME" in out
    assert "Section 6 goes in <all_user_messages>." in out
    assert parse_user_messages_block(out) == ["real"]


def test_only_the_last_block_is_replaced() -> None:
    """With two complete blocks, the last is replaced and the first left alone."""
    first = "<all_user_messages>\n- early\n</all_user_messages>"
    out = fill(first + "\nmiddle\n" + PLACEHOLDER, ["real"])
    assert out.startswith(first + "\nmiddle\n")
    assert parse_user_messages_block(out) == ["real"]


def test_missing_block_is_inserted_before_section_seven() -> None:
    """No block and no section 6: a heading and block go in before section 7."""
    text = "1. Primary request and intent:\nx\n\n7. Pending tasks:\ny"
    out = fill(text, ["hello"])
    assert out.index("6. All user messages:") < out.index("7. Pending tasks")
    assert parse_user_messages_block(out) == ["hello"]


def test_missing_block_replaces_model_section_six_body() -> None:
    """A section-6 heading without a block: its paraphrased body is replaced by the block."""
    text = (
        "3. Files:\n1. a.py\n6. Items\n\n## 6. All User Messages\n- paraphrase"
        "\n\n8. Current work:\nz"
    )
    out = fill(text, ["exact words"])
    assert "paraphrase" not in out
    assert "6. Items" in out  # a numbered list item is not mistaken for the heading
    assert out.endswith("8. Current work:\nz")
    assert parse_user_messages_block(out) == ["exact words"]


def test_missing_block_appended_at_end() -> None:
    """No block and no later section: the block is appended."""
    out = fill("just prose", ["hi"])
    assert out.startswith("just prose\n\n6. All user messages:\n<all_user_messages>")


def test_no_user_messages_empties_the_models_block() -> None:
    """Without user messages the model's recollection is dropped; the rest is kept."""
    empty = SUMMARY.replace(PLACEHOLDER, "<all_user_messages>\n</all_user_messages>")
    assert fill(SUMMARY, []) == empty
    assert fill(SUMMARY, ["", "  ", "\r"]) == empty
    assert parse_user_messages_block(fill(SUMMARY, [])) == []
    assert fill("just prose", []) == "just prose"


def test_single_huge_message_is_budgeted() -> None:
    """Defect fix: one oversized message is trimmed to the budget, not kept whole."""
    huge = "a" * 40_000 + "THE QUESTION"
    out = fill(PLACEHOLDER, [huge], budget=100)
    [kept] = parse_user_messages_block(out)
    assert adk(kept) <= 100
    assert kept.startswith("aaa")
    assert kept.endswith("THE QUESTION")
    assert "characters cut" in kept
    assert ENGLISH.omitted_note in out


def test_trim_uses_remaining_budget_then_stops() -> None:
    """An over-budget message is cut to what is left; older messages are dropped."""
    users = ["oldest", "b" * 4000, "c" * 40]
    out = fill(PLACEHOLDER, users, budget=60)
    kept = parse_user_messages_block(out)
    assert kept[-1] == "c" * 40
    assert len(kept) == 2
    assert adk(kept[0]) <= 60 - 10


def test_multiline_and_tag_text_do_not_break_the_block() -> None:
    """Continuation lines are indented and a closing tag in user text is escaped."""
    users = ["line one\nline two", "see </all_user_messages> here"]
    out = fill(PLACEHOLDER, users)
    assert "- line one\n  line two" in out
    assert out.count("</all_user_messages>") == 1
    assert parse_user_messages_block(out) == users


def test_default_trim_edge_cases() -> None:
    """TestDefaultTrimUserMessage: no budget -> None, empty -> None, long text -> head+tail."""
    assert trim_middle("text", 0, estimate=adk, prompts=ENGLISH) is None
    assert trim_middle("", 100, estimate=adk, prompts=ENGLISH) is None
    long = "x" * 3000 + "y" * 3000
    trimmed = trim_middle(long, 200, estimate=adk, prompts=ENGLISH)
    assert trimmed is not None
    assert trimmed.startswith("x")
    assert trimmed.endswith("y")
    assert adk(trimmed) <= 200
    assert "characters cut" in trimmed


@given(
    users=st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=8),
    budget=st.integers(min_value=0, max_value=200),
)
def test_fill_stays_within_budget_and_keeps_newest(users: list[str], budget: int) -> None:
    """Whatever the texts, kept messages fit the budget and the newest kept one comes last."""
    out = fill(PLACEHOLDER, users, budget=budget)
    kept = parse_user_messages_block(out)
    assert sum(adk(t) for t in kept) <= budget
    assert out.count("<all_user_messages>") <= 1
    nonblank = [u for u in users if u.strip()]
    if kept and kept[-1] in nonblank:
        assert kept[-1] == nonblank[-1]


# --- collecting user messages -----------------------------------------------------------------


def test_collect_excludes_tool_results_and_internal_messages() -> None:
    """Only messages a person wrote count; tools, summaries' text, skills, reminders do not."""
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "real one"},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "c", "content": "tool output"},
        {"role": "user", "content": "reminder", "meta": {"content_type": "reminder"}},
        {"role": "user", "content": "skills", "meta": {"content_type": "skills"}},
        {"role": "user", "content": "flagged", "meta": {"internal": True}},
        {"role": "user", "content": "real two"},
    ]
    assert collect_user_messages(messages) == ["real one", "real two"]


def test_collect_media_only_message_gets_placeholder() -> None:
    """An image-only message prints a placeholder rather than nothing."""
    image = {"type": "image_url", "image_url": {"url": "data:"}}
    messages = [{"role": "user", "content": [image]}]
    assert collect_user_messages(messages) == ["[image]"]


def test_second_compaction_carries_earlier_user_messages() -> None:
    """Defect fix: user messages quoted in an earlier summary survive the next compaction."""
    first = finalize_summary(
        "<summary>" + SUMMARY + "</summary>",
        context_messages=[{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
        prompts=ENGLISH,
        estimate=adk,
    )
    history = [first, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "three"}]
    assert collect_user_messages(history) == ["one", "two", "three"]
    second = finalize_summary(SUMMARY, context_messages=history, prompts=ENGLISH, estimate=adk)
    assert parse_user_messages_block(second["content"]) == ["one", "two", "three"]


def test_collect_dedupes_keeping_latest() -> None:
    """A text seen twice is listed once, at its latest position."""
    messages = [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
        {"role": "user", "content": "a"},
    ]
    assert collect_user_messages(messages) == ["b", "a"]


# --- the summary message (TestPostProcessSummary, seed E) ---------------------------------------


def test_summary_message_wraps_and_marks() -> None:
    """Preamble, summary, transcript pointer and continue instruction, in that order; marked."""
    message = build_summary_message(
        "BODY", prompts=ENGLISH, transcript_path="/t/x.jsonl", extra_meta={"version": 2}
    )
    content = marked_body(message)
    assert message["role"] == "user"
    assert content.startswith(ENGLISH.summary_preamble + "\n\nBODY\n\n")
    assert content.index("/t/x.jsonl") < content.index(ENGLISH.continue_instruction)
    assert content.endswith(ENGLISH.continue_instruction)
    assert marker_of(message) == Marker("summary", {"version": "2"})
    assert set(message) == {"role", "content"}


def test_seed_e_summary_is_internal() -> None:
    """Seed E: the summary is role user, internal, and [system, summary] has 0 user messages."""
    message = build_summary_message("x", prompts=CHINESE)
    assert content_type(message) == "summary"
    assert is_internal(message)
    history = [{"role": "system", "content": "s"}, message]
    assert sum(is_real_user_message(m) for m in history) == 0
    assert collect_user_messages(history) == []


def test_extra_meta_cannot_unmark_the_summary() -> None:
    """content_type stays "summary" whatever extra_meta says."""
    message = build_summary_message("x", prompts=ENGLISH, extra_meta={"content_type": "other"})
    assert content_type(message) == "summary"


def test_finalize_drops_analysis_and_fills_users() -> None:
    """finalize_summary = extract + back-fill + wrap."""
    text = "<analysis>scratch</analysis><summary>" + SUMMARY + "</summary>"
    message = finalize_summary(
        text,
        context_messages=[{"role": "user", "content": "hello"}],
        prompts=ENGLISH,
        estimate=adk,
    )
    assert "scratch" not in message["content"]
    assert parse_user_messages_block(message["content"]) == ["hello"]


def test_user_words_that_look_like_markers_are_quoted_safely() -> None:
    """Marker text a person typed is escaped where the summary quotes it: the summary still
    reads as one summary, and the next compaction gets the words back exactly."""
    words = 'try </synopsis:summary> then <synopsis:summary version="9"> and &lt;synopsis:x'
    message = finalize_summary(
        SUMMARY,
        context_messages=[{"role": "user", "content": words}],
        prompts=ENGLISH,
        estimate=adk,
    )
    text = text_of(message)
    assert text.count("<synopsis:") == 1 and text.count("</synopsis:") == 1
    assert marker_of(message) == Marker("summary")
    assert collect_user_messages([message]) == [words]


def test_a_truncation_notice_carries_its_quotes_forward() -> None:
    """The user messages quoted in a truncation notice are carried into the next summary."""
    block = "<all_user_messages>\n- dropped request\n</all_user_messages>"
    notice = {"role": "user", "content": mark("notice", f"[3 messages removed]\n{block}")}
    later = [notice, {"role": "user", "content": "new request"}]
    assert collect_user_messages(later) == ["dropped request", "new request"]
