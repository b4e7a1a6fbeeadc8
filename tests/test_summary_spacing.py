"""Sections of a summary are joined by exactly one blank line (Eino's case, issue 20 item 13),
whatever spacing the summarizer's answer used, and in the extractive model's own output."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, given, settings

from synopsis import Compactor
from synopsis.compaction.summary import spaced_sections
from synopsis.messages import marked_body
from synopsis.prompts import prompt_set
from synopsis.testing import FakeModel
from tests.strategies import histories

CRAMPED = (
    "Here it is.\n\n\n1. Primary Request and Intent:\nfix the parser   \n"
    "2. Key Technical Concepts:\n- tokens\n\n\n\n3. Files and Code Sections:\n- parser.py\n\n\n"
    "4. Errors and fixes:\n- none\n5. Problem Solving:\nfirst\n\nsecond\n\n"
    "6. All user messages:\n<all_user_messages>\n- x\n</all_user_messages>\n7. Pending Tasks:"
    "\n\n\n8. Current Work:\nparser\n9. Optional Next Step:\ntest\n\n\n"
)
HEADING = re.compile(r"^\d\. [^\n]*:$", re.MULTILINE)


def conversation(turns: int = 6) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"fix bug {i}"}
        if i % 2 == 0
        else {"role": "assistant", "content": f"fixed bug {i - 1}"}
        for i in range(2 * turns)
    ]


def blank_lines_before_headings(text: str) -> list[int]:
    """How many blank lines precede each section heading after the first."""
    counts = []
    for match in list(HEADING.finditer(text))[1:]:
        before = text[: match.start()]
        counts.append(len(before) - len(before.rstrip("\n")) - 1)
    return counts


def test_a_cramped_or_loose_answer_is_rendered_with_one_blank_line_between_sections() -> None:
    compactor = Compactor(model=FakeModel(default=CRAMPED), trigger_messages=4, keep_tail=2)
    body = marked_body(compactor.compact(conversation()).messages[0])
    assert blank_lines_before_headings(body) == [1] * 8
    assert "\n\n\n" not in body and "parser   " not in body
    assert "5. Problem Solving:\nfirst\n\nsecond\n\n6. All user messages:" in body
    assert body.count("\n\n1. Primary Request") == 1  # the text before section 1 too


def test_a_heading_quoted_inside_the_user_messages_block_is_not_a_section() -> None:
    text = (
        "1. Primary request and intent:\nx\n6. All user messages:\n<all_user_messages>\n"
        "- see below\n\n\n  7. Pending tasks: quoted by the user\n</all_user_messages>\n"
        "7. Pending tasks:\n- y"
    )
    spaced = spaced_sections(text, prompt_set("en"))
    assert "- see below\n\n\n  7. Pending tasks: quoted" in spaced
    assert "</all_user_messages>\n\n7. Pending tasks:\n- y" in spaced


def test_chinese_headings_are_spaced_too() -> None:
    text = "1. 主要请求与意图：\n修复\n\n\n\n2. 关键技术概念：\n- 分词"
    titles = prompt_set("zh").section_titles
    assert titles[0] in text and titles[1] in text
    assert spaced_sections(text, prompt_set("zh")) == (
        "1. 主要请求与意图：\n修复\n\n2. 关键技术概念：\n- 分词"
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(max_turns=10))
def test_the_extractive_summary_has_one_blank_line_between_sections(
    history: list[dict[str, Any]],
) -> None:
    result = Compactor(model="extractive", trigger_messages=2, keep_tail=1).compact(history)
    summaries = [m for m in result.messages if "<synopsis:summary" in str(m.get("content"))]
    for message in summaries:
        assert set(blank_lines_before_headings(marked_body(message))) <= {1}
