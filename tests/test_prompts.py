"""Prompt sets and the summarizer input."""

from __future__ import annotations

import dataclasses

import pytest

from synopsis.errors import ConfigError
from synopsis.messages import is_system
from synopsis.prompts import CHINESE, ENGLISH, PromptSet, build_summarizer_input, prompt_set

SETS = [ENGLISH, CHINESE]


def test_prompt_set_picks_language_per_call() -> None:
    """prompt_set chooses a built-in set by language code, regional variants included."""
    assert prompt_set("en") is ENGLISH
    assert prompt_set("zh") is CHINESE
    assert prompt_set("zh-CN") is CHINESE
    assert prompt_set("EN_us") is ENGLISH


def test_unknown_language_is_a_config_error() -> None:
    """An unknown language names the choices instead of falling back silently."""
    with pytest.raises(ConfigError, match="'en' or 'zh'"):
        prompt_set("fr")


def test_prompt_sets_are_frozen_values() -> None:
    """A PromptSet cannot be mutated in place; replace() makes a custom one."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        ENGLISH.language = "xx"  # type: ignore[misc]
    custom = dataclasses.replace(ENGLISH, summarizer_system="Summarize.")
    assert isinstance(custom, PromptSet)
    assert ENGLISH.summarizer_system != "Summarize."


@pytest.mark.parametrize("prompts", SETS, ids=["en", "zh"])
def test_instruction_asks_for_analysis_then_nine_sections(prompts: PromptSet) -> None:
    """The instruction asks for <analysis> then <summary> with sections 1-9 and the user block."""
    text = prompts.summary_instruction
    assert text.index("<analysis>") < text.index("<summary>")
    positions = [text.index(f"\n{n}. {prompts.section_titles[n - 1]}") for n in range(1, 10)]
    assert positions == sorted(positions)
    assert "<all_user_messages></all_user_messages>" in text


@pytest.mark.parametrize(("prompts", "word"), [(ENGLISH, "tool"), (CHINESE, "工具")])
def test_instruction_forbids_tools_at_start_and_end(prompts: PromptSet, word: str) -> None:
    """The no-tools demand opens and closes the instruction."""
    text = prompts.summary_instruction
    assert word in text[:200]
    assert word in text[-200:]


@pytest.mark.parametrize("prompts", SETS, ids=["en", "zh"])
def test_placeholders_are_filled_without_format(prompts: PromptSet) -> None:
    """Paths and names with braces survive: placeholders are replaced, not str.format-ed."""
    assert "/tmp/{odd}/t.jsonl" in prompts.transcript("/tmp/{odd}/t.jsonl")
    assert "1234" in prompts.truncation(1234)
    assert "{x}" in prompts.skill_title("{x}")
    assert "{x}" in prompts.skill_cut("{x}")
    for field in dataclasses.fields(PromptSet):
        value = getattr(prompts, field.name)
        assert value, field.name


def test_seed_c_summarizer_input_shape() -> None:
    """Seed C: 1 system + 5 context -> [persona, the 5, instruction] (7 messages)."""
    history = [
        {"role": "system", "content": "You are a helpful agent."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
        {"role": "assistant", "content": "second answer"},
        {"role": "user", "content": "third question"},
    ]
    context = history[1:]
    result = build_summarizer_input(context, prompts=ENGLISH)
    assert len(result) == 7
    assert result[0] == {"role": "system", "content": ENGLISH.summarizer_system}
    assert result[1:6] == context
    assert result[6] == {"role": "user", "content": ENGLISH.summary_instruction}
    assert [is_system(m) for m in result] == [True] + [False] * 6


def test_summarizer_input_strips_extensions_and_copies() -> None:
    """usage and meta never reach the summarizer, and the caller's messages stay as they were."""
    message = {"role": "assistant", "content": "hi", "usage": {"total_tokens": 5}, "meta": {"a": 1}}
    result = build_summarizer_input([message], prompts=ENGLISH)
    assert result[1] == {"role": "assistant", "content": "hi"}
    assert "usage" in message
    assert "meta" in message


def test_incremental_instruction_carries_previous_summary() -> None:
    """With a previous summary the incremental instruction quotes it in <previous_summary>."""
    result = build_summarizer_input([], prompts=CHINESE, previous_summary="旧的总结 {braces}")
    text = result[-1]["content"]
    assert "<previous_summary>\n旧的总结 {braces}\n</previous_summary>" in text
    assert "{previous_summary}" not in text
    assert "<all_user_messages>" in text


def test_focus_is_appended_to_the_instruction() -> None:
    """A focus adds one line to the end of the instruction."""
    text = build_summarizer_input([], prompts=ENGLISH, focus="the database migration")[-1]
    assert text["content"].endswith("Give particular attention to: the database migration")


def test_blank_previous_summary_and_focus_are_ignored() -> None:
    """Whitespace-only options leave the plain instruction."""
    text = build_summarizer_input([], prompts=ENGLISH, previous_summary="  ", focus=" ")[-1]
    assert text["content"] == ENGLISH.summary_instruction
