"""A Chinese chat gets a Chinese summary when no language is set (issue 20, item 14); an
explicit ``prompts=`` / ``--language`` still wins."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from synopsis import CHINESE, ENGLISH, AsyncCompactor, Compactor
from synopsis.cli import main
from synopsis.compaction.language import HAN_SHARE, detect_prompts
from synopsis.messages import marked_body
from synopsis.testing import AsyncFakeModel, FakeModel


def chinese_chat(turns: int = 6) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful agent."}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"请帮我修复 parser.py 里的第{turn}个错误。"})
        answer = f"好的，第{turn}个错误已经修复，测试通过。"
        messages.append({"role": "assistant", "content": answer})
    return messages


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        (["请帮我修复这个错误"], CHINESE),
        (["修复 src/synopsis/compaction/_flow.py 的 ValueError 错误"], CHINESE),
        (["Please fix the parser, it fails on line 10."], ENGLISH),
        (["このエラーを修正してください"], ENGLISH),  # Japanese: kana beside the Han
        ([], ENGLISH),
        (["   "], ENGLISH),
    ],
)
def test_the_history_language_is_detected(texts: list[str], expected: object) -> None:
    assert detect_prompts([user(t) for t in texts]) is expected


def test_the_threshold_is_the_documented_share_of_han_characters() -> None:
    han, latin = "错" * 10, "x" * 90  # exactly HAN_SHARE of 100 non-space characters
    assert HAN_SHARE == 0.1
    assert detect_prompts([user(han + latin)]) is CHINESE
    assert detect_prompts([user(han[:-1] + latin + "x")]) is ENGLISH


def test_summaries_and_tool_output_do_not_decide() -> None:
    """Only what the user and the assistant wrote counts, not a tool's or a summary's text."""
    messages = [
        user("Please read the log."),
        {"role": "tool", "tool_call_id": "c", "content": "错误" * 500},
    ]
    assert detect_prompts(messages) is ENGLISH


def test_a_chinese_chat_gets_a_chinese_summary_by_default() -> None:
    model = FakeModel(default="1. 主要请求与意图：修复错误")
    result = Compactor(model=model, trigger_messages=4, keep_tail=2).compact(chinese_chat())
    assert model.requests[0].messages[0]["content"] == CHINESE.summarizer_system
    body = marked_body(result.messages[1])
    assert body.startswith(CHINESE.summary_preamble)
    assert CHINESE.section_heading(6) in body


def test_the_extractive_default_writes_chinese_headings() -> None:
    result = Compactor(trigger_messages=4, keep_tail=2).compact(chinese_chat())
    body = marked_body(result.messages[1])
    assert body.startswith(CHINESE.summary_preamble)
    assert "1. " + CHINESE.section_titles[0] in body
    assert ENGLISH.section_titles[0] not in body


def test_an_explicit_language_wins() -> None:
    model = FakeModel(default="Fixed the errors.")
    compactor = Compactor(model=model, trigger_messages=4, keep_tail=2, prompts="en")
    body = marked_body(compactor.compact(chinese_chat()).messages[1])
    assert model.requests[0].messages[0]["content"] == ENGLISH.summarizer_system
    assert body.startswith(ENGLISH.summary_preamble)


def test_the_async_compactor_detects_too() -> None:
    model = AsyncFakeModel(default="修复了错误。")
    compactor = AsyncCompactor(model=model, trigger_messages=4, keep_tail=2)
    result = asyncio.run(compactor.compact(chinese_chat()))
    assert model.requests[0].messages[0]["content"] == CHINESE.summarizer_system
    assert marked_body(result.messages[1]).startswith(CHINESE.summary_preamble)


def test_the_preview_speaks_the_same_language() -> None:
    compactor = Compactor(trigger_messages=4, keep_tail=2)
    history = chinese_chat()
    assert compactor.preview(history).tokens_after == compactor.compact(history).tokens_after


@pytest.mark.parametrize(("flags", "preamble"), [((), CHINESE), (("--language", "en"), ENGLISH)])
def test_the_cli_detects_unless_told(tmp_path: Path, flags: tuple[str, ...], preamble: Any) -> None:
    source, out = tmp_path / "chat.json", tmp_path / "out.json"
    source.write_text(json.dumps(chinese_chat()), encoding="utf-8")
    command = ["compact", str(source), "--trigger-messages", "4", "--keep-tail", "2", "-o"]
    result = CliRunner().invoke(main, [*command, str(out), *flags])
    assert result.exit_code == 0, result.output
    compacted = json.loads(out.read_text(encoding="utf-8"))
    summary = next(m for m in compacted if "<synopsis:summary" in str(m["content"]))
    assert marked_body(summary).startswith(preamble.summary_preamble)
