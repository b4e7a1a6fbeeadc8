"""The offline extractive summarizer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from synopsis.compaction.summary import (
    finalize_summary,
    parse_user_messages_block,
)
from synopsis.models._base import AsyncModel, Model, ModelSettings
from synopsis.models.extractive import AsyncExtractiveModel, ExtractiveModel, extractive_summary
from synopsis.prompts import CHINESE, ENGLISH, build_summarizer_input
from synopsis.summarizer import extract_summary, validate_summary_response


def adk(text: str) -> int:
    return len(text.encode()) // 4


def call(call_id: str, name: str, arguments: str) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


CODING = [
    {
        "role": "user",
        "content": "Fix the failing test in tests/test_parser.py. TODO: update docs/usage.md",
    },
    {
        "role": "assistant",
        "content": "Reading it.",
        "tool_calls": [call("c1", "read_file", '{"path": "src/app/parser.py"}')],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "def parse_header(line):\n    return None\n"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("c2", "bash", '{"cmd": "pytest -x"}')],
    },
    {
        "role": "tool",
        "tool_call_id": "c2",
        "content": (
            "Traceback (most recent call last):\n  File x\nAssertionError: expected Header\n"
        ),
    },
    {"role": "assistant", "content": "parse_header returns None; I will raise ValueError instead."},
    {"role": "user", "content": "ok, and make HeaderParser handle CRLF too"},
]


def summarize(context, **kwargs) -> str:
    messages = build_summarizer_input(context, prompts=kwargs.pop("prompts", ENGLISH), **kwargs)
    return ExtractiveModel().complete(messages).text


def test_satisfies_both_model_protocols() -> None:
    """ExtractiveModel is a Model and AsyncExtractiveModel an AsyncModel, named "extractive"."""
    assert isinstance(ExtractiveModel(), Model)
    assert isinstance(AsyncExtractiveModel(), AsyncModel)
    assert ExtractiveModel().name == "extractive"


def test_answer_passes_validation_with_nine_sections() -> None:
    """The answer is a valid summary with the nine section headings in order."""
    response = ExtractiveModel().complete(build_summarizer_input(CODING, prompts=ENGLISH))
    text = validate_summary_response(response)
    positions = [text.index(ENGLISH.section_heading(n)) for n in range(1, 10)]
    assert positions == sorted(positions)
    assert response.tool_calls == []


def test_sections_are_filled_from_the_transcript() -> None:
    """Requests, files (with tools), errors, pending work and the next step come from the text."""
    text = summarize(CODING)
    assert "Fix the failing test" in text
    assert "src/app/parser.py (read_file)" in text
    assert "tests/test_parser.py" in text
    assert "AssertionError: expected Header" in text
    assert "raise ValueError" in text  # what followed the error
    assert "TODO: update docs/usage.md" in text
    assert "HeaderParser" in text
    assert "pytest -x" in text  # current work lists the last tool calls
    next_step = text[text.index(ENGLISH.section_heading(9)) :]
    assert "> ok, and make HeaderParser handle CRLF too" in next_step


def test_user_block_is_backfilled_by_postprocessing() -> None:
    """Section 6 is an <all_user_messages> block that finalize_summary fills with exact texts."""
    text = summarize(CODING)
    message = finalize_summary(text, context_messages=CODING, prompts=ENGLISH, estimate=adk)
    assert parse_user_messages_block(message["content"]) == [
        CODING[0]["content"],
        CODING[-1]["content"],
    ]


def test_incremental_input_merges_previous_summary() -> None:
    """With a previous summary the earlier request and files are kept and new ones added."""
    first = extract_summary(summarize(CODING))
    later = [{"role": "user", "content": "now also check config/settings.toml"}]
    text = summarize(later, previous_summary=first)
    assert "Fix the failing test" in text
    assert "src/app/parser.py" in text
    assert "config/settings.toml" in text
    assert "> now also check config/settings.toml" in text[text.index("9. ") :]


def test_earlier_summary_message_in_context_is_merged() -> None:
    """A summary message in the context counts as the previous summary, not as user text."""
    summary = finalize_summary(
        summarize(CODING), context_messages=CODING, prompts=ENGLISH, estimate=adk
    )
    plain = {k: v for k, v in summary.items() if k != "meta"}
    text = summarize([plain, {"role": "user", "content": "run the suite"}])
    assert "Fix the failing test" in text
    assert ENGLISH.continue_instruction not in text
    block = text[text.index("<all_user_messages>") : text.index("</all_user_messages>")]
    assert ENGLISH.summary_preamble not in block


def test_chinese_transcript_gets_chinese_sections() -> None:
    """Chinese input gives Chinese headings and repeated Chinese terms as concepts."""
    context = [
        {"role": "user", "content": "帮我把数据库连接池改成异步的，配置在 config/db.yaml 里"},
        {"role": "assistant", "content": "好的，我先看看连接池的实现。连接池目前是同步的。"},
        {"role": "user", "content": "连接池的最大连接数改成 20"},
    ]
    text = summarize(context, prompts=CHINESE)
    assert CHINESE.section_heading(1) in text
    assert "连接池" in text[text.index(CHINESE.section_heading(2)) :]
    assert "config/db.yaml" in text


def test_output_respects_max_chars_and_max_tokens() -> None:
    """A long transcript is shrunk to max_chars, and settings.max_tokens lowers the cap."""
    long = [{"role": "user", "content": f"request {i}: " + "word " * 300} for i in range(40)]
    messages = build_summarizer_input(long, prompts=ENGLISH)
    text = ExtractiveModel(max_chars=3000).complete(messages).text
    assert len(text) <= 3000
    assert text.rstrip().endswith("</summary>")
    capped = ExtractiveModel().complete(messages, settings=ModelSettings(max_tokens=1000)).text
    assert len(capped) <= 2000
    assert "<all_user_messages>" in capped
    assert "</all_user_messages>" in capped


def test_empty_and_odd_input_never_raise() -> None:
    """No messages, junk entries and broken tool calls still give a summary."""
    odd = [
        "not a message",
        {"role": "assistant", "tool_calls": [{"id": 1, "function": "oops"}, None]},
        {"role": "tool", "tool_call_id": None, "content": None},
        {"role": "user", "content": [{"type": "text"}, 5]},
    ]
    for messages in ([], odd):
        text = extractive_summary(messages)  # type: ignore[arg-type]
        assert text.startswith("<summary>")


async def test_async_twin_gives_the_same_answer() -> None:
    """AsyncExtractiveModel answers exactly like the sync model."""
    messages = build_summarizer_input(CODING, prompts=ENGLISH)
    sync = ExtractiveModel().complete(messages)
    result = await AsyncExtractiveModel().complete(messages)
    assert result.text == sync.text
    assert result.model == "extractive"


message_strategy = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "tool", "system"]),
        "content": st.one_of(st.none(), st.text(max_size=200)),
    }
)


@settings(max_examples=60)
@given(st.lists(message_strategy, max_size=12))
def test_any_history_gives_a_bounded_deterministic_summary(
    messages: list[dict[str, object]],
) -> None:
    """Arbitrary histories never raise, stay within the cap and give the same answer twice."""
    model = ExtractiveModel(max_chars=4000)
    first = model.complete(messages).text
    assert first == model.complete(messages).text
    assert first.startswith("<summary>")
    assert len(first) <= 4000
