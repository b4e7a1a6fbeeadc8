"""Keeping loaded skills verbatim across compactions.

A *skill* is a text an agent loaded through a skill tool (a call named ``tool_name`` and its
result): coding rules, a framework's conventions, a playbook. Such text is a standing
instruction, and a summary would blur it, so it is kept word for word in one internal message
placed before the summary, within per-skill and total token budgets.

Differences from the original design: skills already kept by an earlier compaction are read
back from that message (each sits in its own marked element, word for word), so they survive
every later compaction; a malformed skill call is skipped with a warning instead of failing
the whole compaction; and a skill too large for the remaining budget is skipped while
smaller, older ones still get in.

Pure apart from logging a warning for malformed calls.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from synopsis.compaction.summary import longest_fitting_prefix
from synopsis.errors import ConfigError
from synopsis.messages import (
    content_type,
    escape_markers,
    mark,
    marked_body,
    marked_elements,
    text_of,
)
from synopsis.prompts import ENGLISH, PromptSet
from synopsis.tokens import Estimator

__all__ = [
    "SKILLS_CONTENT_TYPE",
    "Skill",
    "SkillConfig",
    "build_skills_message",
    "find_skills",
    "preserve_skills",
]

_log = logging.getLogger(__name__)

SKILLS_CONTENT_TYPE: Final = "skills"
#: The marker kind of one skill's element inside the skills message.
_SKILL_KIND: Final = "skill"

#: Reads the skill's name from the parsed arguments of a skill call; None if it has none.
NameReader = Callable[[Mapping[str, Any]], "str | None"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillConfig:
    """Which tool loads skills and how much of them to keep.

    ``name_field`` is the argument holding the skill's name, or a callable that reads it from
    the parsed arguments. ``max_skills=0`` turns preservation off.
    """

    tool_name: str = "skill"
    name_field: str | NameReader = "skill"
    max_skills: int = 5
    max_tokens_per_skill: int = 5_000
    total_budget: int = 25_000

    def __post_init__(self) -> None:
        if not isinstance(self.tool_name, str) or not self.tool_name.strip():
            raise ConfigError("SkillConfig.tool_name must be a non-empty string")
        if not callable(self.name_field) and not (
            isinstance(self.name_field, str) and self.name_field
        ):
            raise ConfigError("SkillConfig.name_field must be a non-empty string or a callable")
        for field in ("max_skills", "max_tokens_per_skill", "total_budget"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"SkillConfig.{field} must be an integer >= 0, got {value!r}")
        if self.max_skills and not (self.max_tokens_per_skill and self.total_budget):
            raise ConfigError(
                "SkillConfig budgets must be positive while max_skills > 0 "
                "(set max_skills=0 to turn skill preservation off)"
            )

    def skill_name(self, arguments: Mapping[str, Any]) -> str | None:
        """The skill's name from parsed call arguments, or None."""
        if callable(self.name_field):
            name = self.name_field(arguments)
        else:
            name = arguments.get(self.name_field)
        return name.strip() if isinstance(name, str) and name.strip() else None


@dataclass(frozen=True, slots=True)
class Skill:
    """One preserved skill: its name and (possibly truncated) text."""

    name: str
    content: str
    truncated: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "content": self.content, "truncated": self.truncated}


# ---------------------------------------------------------------------------------------------
# Finding skills


def _parse_arguments(raw: object) -> Mapping[str, Any] | None:
    if isinstance(raw, Mapping):
        return raw
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return None
    return value if isinstance(value, Mapping) else None


def _skill_calls(message: Mapping[str, Any], config: SkillConfig) -> dict[str, object]:
    """Call id -> raw arguments of the skill calls an assistant message makes."""
    calls: dict[str, object] = {}
    for call in message.get("tool_calls") or []:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        if isinstance(function, Mapping) and function.get("name") == config.tool_name:
            calls[str(call.get("id"))] = function.get("arguments")
    return calls


def _from_result(
    message: Mapping[str, Any], raw_arguments: object, config: SkillConfig
) -> Skill | None:
    arguments = _parse_arguments(raw_arguments)
    name: str | None = None
    if arguments is not None:
        try:
            name = config.skill_name(arguments)
        except Exception:  # a user-supplied reader must not break compaction
            _log.warning("skill name reader failed", exc_info=True)
    if name is None:
        _log.warning(
            "skipping a %r call with unusable arguments (tool_call_id=%s)",
            config.tool_name,
            message.get("tool_call_id"),
        )
        return None
    content = text_of(message)
    return Skill(name, content) if content.strip() else None


def _carried(message: Mapping[str, Any]) -> list[Skill]:
    """Skills kept by an earlier preserved-skills message, read from its marked elements."""
    skills = _legacy_carried(message)
    for marker, content in marked_elements(marked_body(message, unescape=False), _SKILL_KIND):
        name = marker.attributes.get("name", "")
        if name.strip() and content.strip():
            skills.append(Skill(name, content, marker.attributes.get("truncated") == "true"))
    return skills


def _legacy_carried(message: Mapping[str, Any]) -> list[Skill]:
    """Skills in the ``meta`` of a message saved by an older version."""
    meta = message.get("meta")
    stored = meta.get("skills") if isinstance(meta, Mapping) else None
    skills = []
    for item in stored if isinstance(stored, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            content = item.get("content")
            if isinstance(content, str) and content.strip():
                skills.append(Skill(item["name"], content, bool(item.get("truncated"))))
    return skills


def _scan(messages: Iterable[Mapping[str, Any]], config: SkillConfig) -> list[Skill]:
    """Every skill in ``messages``, oldest first, duplicates included."""
    found: list[Skill] = []
    pending: dict[str, object] = {}
    for message in messages:
        role = message.get("role")
        if content_type(message) == SKILLS_CONTENT_TYPE:
            found.extend(_carried(message))
        elif role == "assistant":
            pending.update(_skill_calls(message, config))
        elif role == "tool" and str(message.get("tool_call_id")) in pending:
            skill = _from_result(message, pending.pop(str(message.get("tool_call_id"))), config)
            if skill is not None:
                found.append(skill)
    return found


def _latest_by_name(skills: Sequence[Skill]) -> list[Skill]:
    """One skill per name, the latest version, ordered by when each was last loaded."""
    latest: dict[str, Skill] = {}
    for skill in skills:
        latest.pop(skill.name, None)  # re-insert so dict order follows the last occurrence
        latest[skill.name] = skill
    return list(latest.values())


def _cap(skill: Skill, limit: int, estimate: Estimator, prompts: PromptSet) -> Skill:
    """``skill`` cut to ``limit`` tokens, ending with the truncation marker."""
    if estimate(skill.content) <= limit:
        return skill
    marker = "\n\n" + prompts.skill_cut(skill.name)
    keep = longest_fitting_prefix(
        skill.content, len(skill.content), fits=lambda head: estimate(head + marker) <= limit
    )
    head = skill.content[:keep]
    # Prefer ending on a line break when one is close, so no instruction is cut mid-line.
    newline = head.rfind("\n")
    if newline >= keep * 0.8:
        head = head[:newline]
    return Skill(skill.name, head.rstrip() + marker, truncated=True)


def find_skills(
    messages: Iterable[Mapping[str, Any]],
    config: SkillConfig,
    *,
    estimate: Estimator,
    prompts: PromptSet = ENGLISH,
) -> list[Skill]:
    """The skills to keep, oldest first, within ``config``'s limits.

    The newest ``max_skills`` distinct skills are considered, newest first: each is cut to
    ``max_tokens_per_skill``, and one that no longer fits ``total_budget`` is skipped while
    older, smaller ones may still be taken.
    """
    if config.max_skills == 0:
        return []
    candidates = _latest_by_name(_scan(messages, config))[-config.max_skills :]
    kept: list[Skill] = []
    used = 0
    for skill in reversed(candidates):
        capped = _cap(skill, config.max_tokens_per_skill, estimate, prompts)
        cost = estimate(capped.content)
        if used + cost > config.total_budget:
            continue
        kept.append(capped)
        used += cost
    return kept[::-1]


# ---------------------------------------------------------------------------------------------
# The message


def build_skills_message(skills: Sequence[Skill], *, prompts: PromptSet) -> dict[str, Any] | None:
    """The internal user message that carries ``skills``; None when there are none.

    Marked "skills"; each skill sits under its heading in its own marked element (name and
    truncation as attributes, the text escaped), so the next compaction re-reads it exactly.
    """
    if not skills:
        return None
    sections = [escape_markers(prompts.skills_preamble)]
    for skill in skills:
        attributes = {"name": skill.name, "truncated": "true" if skill.truncated else None}
        heading = escape_markers(prompts.skill_title(skill.name))
        sections.append(f"{heading}\n{mark(_SKILL_KIND, skill.content, attributes)}")
    content = mark(SKILLS_CONTENT_TYPE, "\n\n".join(sections), raw=True)
    return {"role": "user", "content": content}


def preserve_skills(
    messages: Iterable[Mapping[str, Any]],
    config: SkillConfig,
    *,
    estimate: Estimator,
    prompts: PromptSet = ENGLISH,
) -> dict[str, Any] | None:
    """:func:`find_skills` then :func:`build_skills_message`."""
    skills = find_skills(messages, config, estimate=estimate, prompts=prompts)
    return build_skills_message(skills, prompts=prompts)
