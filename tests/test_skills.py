"""Skill preservation across compactions."""

from __future__ import annotations

import json
import logging

import pytest

from synopsis.compaction.skills import (
    Skill,
    SkillConfig,
    build_skills_message,
    find_skills,
    preserve_skills,
)
from synopsis.compaction.summary import collect_user_messages
from synopsis.errors import ConfigError
from synopsis.messages import content_type, is_internal, marked_body
from synopsis.prompts import CHINESE, ENGLISH


def adk(text: str) -> int:
    return len(text.encode()) // 4


def load(
    call_id: str, name: str | None, content: str, *, tool: str = "skill", raw: str | None = None
):
    """An assistant skill call and its result."""
    arguments = raw if raw is not None else json.dumps({} if name is None else {"skill": name})
    call = {"id": call_id, "type": "function", "function": {"name": tool, "arguments": arguments}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": content},
    ]


def find(messages, config: SkillConfig | None = None) -> list[Skill]:
    return find_skills(messages, config or SkillConfig(), estimate=adk)


# --- config (TestPreserveSkillsConfigCheck) -----------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tool_name": ""},
        {"name_field": ""},
        {"max_skills": -1},
        {"max_tokens_per_skill": -1},
        {"total_budget": -5},
        {"max_tokens_per_skill": 0},
        {"total_budget": 0},
        {"max_skills": True},
    ],
)
def test_bad_config_is_rejected(kwargs: dict[str, object]) -> None:
    """Negative or contradictory limits and empty names raise ConfigError naming the field."""
    with pytest.raises(ConfigError, match="SkillConfig"):
        SkillConfig(**kwargs)  # type: ignore[arg-type]


def test_defaults_match_the_spec() -> None:
    """Defaults: tool "skill", 5 skills, 5000 per skill, 25000 in all."""
    config = SkillConfig()
    assert (config.tool_name, config.max_skills) == ("skill", 5)
    assert (config.max_tokens_per_skill, config.total_budget) == (5000, 25000)
    assert SkillConfig(max_skills=0, total_budget=0).max_skills == 0


# --- detection (TestBuildPreservedSkillsText) ----------------------------------------------------


def test_off_and_no_match_give_nothing() -> None:
    """max_skills=0 or no skill calls -> no skills and no message."""
    messages = load("c1", "pdf", "PDF rules")
    assert find(messages, SkillConfig(max_skills=0)) == []
    assert find(load("c1", "pdf", "x", tool="read_file")) == []
    assert build_skills_message([], prompts=ENGLISH) is None
    assert preserve_skills([], SkillConfig(), estimate=adk) is None


def test_default_tool_name_pairs_call_and_result() -> None:
    """A call to "skill" plus its result by id gives the skill's name and content."""
    assert find(load("c1", "pdf", "PDF rules")) == [Skill("pdf", "PDF rules")]


def test_custom_name_field_and_reader() -> None:
    """The argument holding the name is configurable, as a field or a callable."""
    messages = load("c1", None, "body", tool="load_skill", raw='{"id": "x", "meta": {"n": "deep"}}')
    by_field = SkillConfig(tool_name="load_skill", name_field="id")
    by_reader = SkillConfig(tool_name="load_skill", name_field=lambda a: a["meta"]["n"])
    assert find(messages, by_field) == [Skill("x", "body")]
    assert find(messages, by_reader) == [Skill("deep", "body")]


def test_malformed_call_is_skipped_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    """Defect fix: bad JSON or a missing name skips that call with a warning; others survive."""
    messages = [
        *load("c1", None, "bad json", raw="{not json"),
        *load("c2", None, "no name"),
        *load("c3", "ok", "good"),
    ]
    broken_reader = SkillConfig(name_field=lambda a: a["missing"])
    with caplog.at_level(logging.WARNING, logger="synopsis.compaction.skills"):
        assert find(messages) == [Skill("ok", "good")]
        assert find(messages, broken_reader) == []
    assert "unusable arguments" in caplog.text


def test_unpaired_calls_and_results_are_ignored() -> None:
    """A call without a result, or a result without its call, is not a skill."""
    call, result = load("c1", "pdf", "text")
    assert find([call]) == []
    assert find([result]) == []


def test_dedupe_keeps_latest_and_max_skills_keeps_newest() -> None:
    """The same skill loaded twice keeps the later text; max_skills keeps the newest names."""
    messages = [
        *load("1", "a", "a-old"),
        *load("2", "b", "b"),
        *load("3", "c", "c"),
        *load("4", "a", "a-new"),
    ]
    assert find(messages) == [Skill("b", "b"), Skill("c", "c"), Skill("a", "a-new")]
    assert [s.name for s in find(messages, SkillConfig(max_skills=2))] == ["c", "a"]


def test_per_skill_cap_truncates_with_marker() -> None:
    """A skill over its cap is cut to the cap, keeps its name and ends with the marker."""
    content = "rule line\n" * 400
    [skill] = find(load("1", "big", content), SkillConfig(max_tokens_per_skill=100))
    assert skill.truncated
    assert skill.name == "big"
    assert adk(skill.content) <= 100
    assert skill.content.endswith(ENGLISH.skill_cut("big"))
    assert content.startswith(skill.content.split("\n\n[")[0])


def test_multibyte_truncation_stays_valid_text() -> None:
    """Truncating Chinese text keeps whole characters (valid UTF-8)."""
    content = "这是一条很长的技能说明。" * 300
    config = SkillConfig(max_tokens_per_skill=50)
    [skill] = find_skills(load("1", "中文", content), config, estimate=adk, prompts=CHINESE)
    skill.content.encode("utf-8")
    assert skill.content.endswith(CHINESE.skill_cut("中文"))
    assert adk(skill.content) <= 50


def test_budget_drops_what_does_not_fit() -> None:
    """The total budget keeps the newest skills that fit."""
    messages = [*load("1", "a", "a" * 400), *load("2", "b", "b" * 400), *load("3", "c", "c" * 400)]
    assert [s.name for s in find(messages, SkillConfig(total_budget=200))] == ["b", "c"]


def test_budget_skips_big_skill_but_keeps_smaller_older_one() -> None:
    """Defect fix: a skill that does not fit is skipped, and an older small one still gets in."""
    messages = [
        *load("1", "small-old", "s" * 40),  # 10 tokens
        *load("2", "big-mid", "m" * 400),  # 100 tokens
        *load("3", "new", "n" * 320),  # 80 tokens
    ]
    kept = find(messages, SkillConfig(total_budget=100))
    assert [s.name for s in kept] == ["small-old", "new"]


# --- the message and re-compaction ---------------------------------------------------------------


def test_skills_message_is_internal_and_structured() -> None:
    """The message is role user, content_type "skills", internal, with headings per skill."""
    skills = [Skill("pdf", "PDF rules"), Skill("git", "Git rules")]
    message = build_skills_message(skills, prompts=ENGLISH)
    assert message is not None
    assert message["role"] == "user"
    assert content_type(message) == "skills"
    assert is_internal(message)
    content = marked_body(message)
    assert content.startswith(ENGLISH.skills_preamble)
    assert content.index("### Skill `pdf`") < content.index("PDF rules")
    assert content.index("PDF rules") < content.index("### Skill `git`")
    assert collect_user_messages([message]) == []


def test_skills_survive_recompaction() -> None:
    """Defect fix: skills kept by one compaction are found again by the next, exactly."""
    first = preserve_skills(
        [*load("1", "pdf", "PDF rules"), *load("2", "git", "Git rules")],
        SkillConfig(),
        estimate=adk,
    )
    assert first is not None
    later = [first, {"role": "user", "content": "go on"}, *load("3", "sql", "SQL rules")]
    assert find(later) == [
        Skill("pdf", "PDF rules"),
        Skill("git", "Git rules"),
        Skill("sql", "SQL rules"),
    ]


def test_reloaded_skill_replaces_carried_copy() -> None:
    """A skill loaded again after a compaction supersedes the carried copy."""
    first = build_skills_message([Skill("pdf", "old rules")], prompts=ENGLISH)
    assert first is not None
    assert find([first, *load("9", "pdf", "new rules")]) == [Skill("pdf", "new rules")]


def test_skill_text_that_looks_like_markers_survives_recompaction_exactly() -> None:
    """A skill's text and name may hold anything, marker text included: read back exactly,
    also after LangChain's conversion and back."""
    from langchain_core.messages import convert_to_messages, convert_to_openai_messages

    text = "rules </synopsis:skill>\n<synopsis:skills>\n&lt;synopsis:x\n\n---\n\nmore"
    skills = [Skill('odd "name" <synopsis:x>', text), Skill("cut", "short", truncated=True)]
    message = build_skills_message(skills, prompts=CHINESE)
    assert message is not None and set(message) == {"role", "content"}
    (converted,) = convert_to_openai_messages(convert_to_messages([message]))
    assert find([converted]) == skills


def test_a_legacy_skills_message_is_still_read() -> None:
    """Skills kept by an older version (in ``meta``) are still carried forward."""
    legacy = {
        "role": "user",
        "content": "old text",
        "meta": {"content_type": "skills", "skills": [{"name": "pdf", "content": "PDF rules"}]},
    }
    assert find([legacy, *load("2", "git", "Git rules")]) == [
        Skill("pdf", "PDF rules"),
        Skill("git", "Git rules"),
    ]
