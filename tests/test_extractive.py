"""The offline extractive summarizer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synopsis.compaction.summary import (
    finalize_summary,
    parse_user_messages_block,
)
from synopsis.models._base import AsyncModel, Model, ModelSettings
from synopsis.models._clip import clip, clip_line
from synopsis.models._facts import ungroup
from synopsis.models.extractive import AsyncExtractiveModel, ExtractiveModel, extractive_summary
from synopsis.prompts import CHINESE, ENGLISH, build_summarizer_input
from synopsis.summarizer import extract_summary, validate_summary_response
from synopsis.tokens import default_estimate


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
    assert default_estimate(capped) <= 1000  # the answer budget is in (estimated) tokens
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


# -- clipping on word boundaries (issue #8, item 19) ---------------------------------------------

words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz().", min_size=1, max_size=12)


@settings(max_examples=200)
@given(st.text(max_size=400), st.integers(min_value=0, max_value=300))
def test_clip_stays_within_its_limit(text: str, limit: int) -> None:
    assert len(clip(text, limit)) <= max(limit, 0)


@settings(max_examples=200)
@given(st.lists(words, min_size=2, max_size=80), st.integers(min_value=90, max_value=300))
def test_clip_cuts_between_words(parts: list[str], limit: int) -> None:
    """The head ends before a space and the tail starts after one: no word is cut in half
    (words are at most 12 letters, so at these limits a space is always near the cut)."""
    text = " ".join(parts)
    clipped = clip(text, limit)
    assert len(clipped) <= limit
    if clipped == text:
        return
    head, _, tail = clipped.partition(" … ")
    assert text.startswith(head) and text.endswith(tail)
    assert text[len(head)] == " " and text[len(text) - len(tail) - 1] == " "


def test_the_reported_cut_keeps_both_words() -> None:
    """The issue's example, "open ... plitlines()": both ends are whole words now."""
    text = "open the file, then " + "read every line carefully " * 20 + "and call splitlines()"
    clipped = clip_line(text, 120)
    assert clipped.endswith(" splitlines()") or "splitlines()" not in clipped
    tokens = set(text.split())
    assert all(token in tokens for token in clipped.split() if token != "…")


def test_chinese_is_cut_after_punctuation() -> None:
    """Text without spaces is cut after its punctuation when there is some nearby."""
    sentence = "用户希望把数据库连接池调大，并且在配置文件里记录原因。"
    text = sentence * 40
    clipped = clip(text, 100)
    head, _, tail = clipped.partition(" … ")
    assert len(clipped) <= 100
    assert head[-1] in "，。" and text[len(text) - len(tail) - 1] in "，。"


@pytest.mark.parametrize(
    "unit",
    [
        "e\u0301",  # e + combining acute accent
        "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # a ZWJ family
        "\U0001f44d\U0001f3fd",  # thumbs up, skin tone
        "\ud83d\ude00",  # a surrogate pair as two code points (surrogatepass input)
    ],
    ids=["combining", "zwj", "modifier", "surrogates"],
)
def test_text_without_boundaries_is_cut_between_graphemes(unit: str) -> None:
    text = unit * 200
    for limit in range(20, 60):
        head, _, tail = clip(text, limit).partition(" … ")
        assert len(head) % len(unit) == 0 and len(tail) % len(unit) == 0, limit
        assert head and tail


def test_problem_solving_counts_are_singular_for_one() -> None:
    """ "1 user message", not "1 user messages"."""
    context = [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "done"},
    ]
    text = summarize(context)
    assert "1 user message," in text and "1 assistant reply," in text


# -- facts (issue 23, item 3) -------------------------------------------------------------------

FILLER = [
    "That sounds really nice, thanks for telling me about it.",
    "I think so too, it is good to hear from you again.",
    "Yes, it was a lovely time and we should do it more often.",
    "Totally agree, let us keep in touch about all of this.",
]

PLANTED = {
    "user": "My sister Ingrid moved to Lisbon in March 2021 to open a bakery.",
    "assistant": "I booked the table at Quinta do Lago for 8 guests on Friday at 19:30.",
    "tool": "Invoice 48213 from Halvorsen Ltd is due on 14 June 2024.",
}


def planted_history(sessions: int = 6) -> list[dict[str, object]]:
    """Chat sessions, each opened with its date, mostly small talk; three planted facts (one
    from the user, one from the assistant, one in a tool result) in the second session."""
    history: list[dict[str, object]] = []
    for number in range(sessions):
        stamp = f"[10:00 am on {number + 1} May, 2023] "
        for turn in range(12):
            role = "user" if turn % 2 == 0 else "assistant"
            text = FILLER[(number + turn) % len(FILLER)]
            history.append({"role": role, "content": (stamp if turn == 0 else "") + text})
        if number == 1:
            history.append({"role": "user", "content": PLANTED["user"]})
            history.append(
                {
                    "role": "assistant",
                    "content": PLANTED["assistant"],
                    "tool_calls": [call("c1", "read_mail", '{"folder": "inbox"}')],
                }
            )
            history.append({"role": "tool", "tool_call_id": "c1", "content": PLANTED["tool"]})
    return history


def facts_of(text: str) -> str:
    """Section 5 of a summary, where the facts are."""
    return text[text.index("5. Problem solving:") : text.index("6. All user messages:")]


def tagged_facts(text: str) -> list[str]:
    """The fact lines of a summary, each with the tag (date or position) it is printed under."""
    return ungroup(facts_of(text).splitlines())


def test_planted_facts_of_both_speakers_and_tools_are_quoted_with_their_date() -> None:
    messages = build_summarizer_input(planted_history(), prompts=ENGLISH)
    text = ExtractiveModel().complete(messages, settings=ModelSettings(max_tokens=600)).text
    facts = facts_of(text)
    for sentence in PLANTED.values():
        assert sentence in facts  # whole and word for word
    line = next(x for x in tagged_facts(text) if PLANTED["tool"] in x)
    assert line == f"- (2 May, 2023) read_mail: {PLANTED['tool']}"
    assert default_estimate(text) <= 600
    validate_summary_response(ExtractiveModel().complete(messages))


def test_a_fact_said_twice_is_quoted_once() -> None:
    history = planted_history()
    history.append({"role": "user", "content": PLANTED["user"]})
    text = summarize(history)
    assert facts_of(text).count(PLANTED["user"]) == 1


def test_without_dates_a_fact_is_tagged_with_its_position() -> None:
    history = [m for m in planted_history() if "[" not in str(m["content"])]
    text = summarize(history)
    assert any(
        line.startswith("- (#") and line.endswith(PLANTED["assistant"])
        for line in tagged_facts(text)
    )


def test_facts_of_a_previous_summary_compete_with_the_new_ones() -> None:
    first = summarize(planted_history())
    later = [
        {"role": "user", "content": "[9:00 am on 9 May, 2023] Kenji starts at Novartis in Basel."},
        {"role": "assistant", "content": "Congratulations to Kenji on the new job in Basel!"},
    ]
    text = summarize(later, previous_summary=extract_summary(first))
    facts = facts_of(text)
    assert PLANTED["tool"] in facts and "Kenji starts at Novartis in Basel." in facts
    assert facts.index(PLANTED["tool"]) < facts.index("Kenji starts at Novartis")


def test_chinese_key_concepts_are_phrases_never_overlapping_windows() -> None:
    context = [
        {"role": "user", "content": "明天上午游览断桥，下午去灵隐寺，晚上在楼外楼吃饭。"},
        {"role": "assistant", "content": "好的，上午游览断桥，下午去灵隐寺，楼外楼已经订好。"},
        {"role": "user", "content": "灵隐寺门票多少钱？楼外楼几点开门？"},
    ]
    text = summarize(context, prompts=CHINESE)
    start = text.index(CHINESE.section_heading(2))
    section = text[start : text.index(CHINESE.section_heading(3))]
    concepts = [line[2:] for line in section.splitlines() if line.startswith("- ")]
    assert "灵隐寺" in concepts and "楼外楼" in concepts
    for a in concepts:
        for b in concepts:
            if a == b or a in b or b in a:
                continue
            # a shifted window: the end of one is the start of the other
            assert not any(a[k:] == b[: len(a) - k] for k in range(1, len(a))), (a, b)


def test_a_session_header_is_no_fact_and_an_update_keeps_the_session_date() -> None:
    """ "Session 2 took place on ..." dates what follows but is not quoted as a fact; an update
    whose part starts mid-session dates its facts by the session the summary ended in."""
    history = [
        {"role": "user", "content": "Session 2 took place on 10:00 am on 2 May, 2023."},
        {"role": "user", "content": PLANTED["user"]},
        {"role": "assistant", "content": "That is wonderful news, I hope she loves it there."},
    ]
    first = summarize(history)
    assert "Session 2 took place" not in facts_of(first)
    assert f"- (2 May, 2023) user: {PLANTED['user']}" in tagged_facts(first)
    later = [
        {"role": "user", "content": "Her bakery sells 300 pastéis de nata every Sunday morning."},
        {"role": "assistant", "content": "Three hundred on a Sunday is a lot of custard tarts!"},
    ]
    facts = "\n".join(tagged_facts(summarize(later, previous_summary=extract_summary(first))))
    assert "- (2 May, 2023) user: Her bakery sells 300 pastéis de nata" in facts


def test_small_talk_loses_to_a_fact_when_the_budget_is_tight() -> None:
    """Of two sentences of one length, the reaction gives way to the event with a name."""
    history: list[dict[str, object]] = []
    for number in range(8):
        history += [
            {
                "role": "user",
                "content": f"Wow, that is so awesome and really amazing, love it {number}!",
            },
            {
                "role": "assistant",
                "content": "Thanks, it really means a lot to hear that from you.",
            },
        ]
    history.append({"role": "user", "content": "Last week I adopted a beagle named Biscuit."})
    history.append(
        {"role": "assistant", "content": "Great, so sweet and awesome, I totally love it!"}
    )
    messages = build_summarizer_input(history, prompts=ENGLISH)
    text = ExtractiveModel().complete(messages, settings=ModelSettings(max_tokens=300)).text
    facts = facts_of(text)
    assert "I adopted a beagle named Biscuit." in facts
    assert "so sweet and awesome" not in facts


def test_prose_gives_no_code_definitions() -> None:
    """ "the type of paint" or "let them know" is English, not a definition of ``of``/``them``."""
    history = [
        {"role": "user", "content": "What type of paint did you use? Please let them know."},
        {
            "role": "assistant",
            "content": "Acrylic. I will let them know tonight.\n\ndef fix_paint(x):\n    pass",
        },
    ]
    text = summarize(history)
    files = text[text.index("3. Files and code sections:") : text.index("4. Errors and fixes:")]
    assert "`fix_paint`" in files
    assert "`of`" not in files and "`them`" not in files


def test_a_short_dated_sentence_naming_someone_is_a_fact_not_a_session_header() -> None:
    history = [
        {"role": "user", "content": "Who deployed it?"},
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "Deployed by Marguerite Okafor on 2024-03-17.\n",
        },
    ]
    summary = extractive_summary(history)
    assert "Marguerite Okafor" in summary
