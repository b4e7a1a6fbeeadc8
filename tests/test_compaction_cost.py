"""One compaction reads the history a bounded number of times: counted, never timed (the
timing is ``bench/bench_compaction.py``). Each message is validated once, estimated about
once (counting, then clipping the summarizer's input) and its marker parsed a few times, so
the work grows with the history, not with the history times the number of steps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import synopsis._markers
import synopsis.messages
import synopsis.tokens
import synopsis.validation
from synopsis import Compactor, KeepTail


def history(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(n):
        if i % 3 == 0:
            messages.append({"role": "user", "content": f"Please fix module_{i}.py and rerun it"})
        elif i % 3 == 1:
            call = {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": "run", "arguments": "{}"},
            }
            messages.append({"role": "assistant", "content": "Running it.", "tool_calls": [call]})
        else:
            messages.append({"role": "tool", "tool_call_id": f"c{i - 1}", "content": f"ok {i}"})
    return messages


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many messages are validated and how many texts have their marker parsed."""
    counts = {"validated": 0, "parsed": 0}

    def counting(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return function(*args, **kwargs)

        return wrapper

    validate_one = synopsis.validation._validate_one
    monkeypatch.setattr(synopsis.validation, "_validate_one", counting("validated", validate_one))
    parse = synopsis._markers.parse_marked
    monkeypatch.setattr(synopsis.messages, "parse_marked", counting("parsed", parse))
    return counts


class CountingPattern:
    """The default estimator's first pattern, counting the texts it is run on (one per
    estimate)."""

    def __init__(self, pattern: Any) -> None:
        self.pattern, self.calls = pattern, 0

    def findall(self, text: str) -> list[str]:
        self.calls += 1
        return list(self.pattern.findall(text))


@pytest.mark.parametrize("n", [600, 3_000])
def test_a_compaction_reads_each_message_a_bounded_number_of_times(
    n: int, counted: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each message is estimated about once: when the history is counted. The summarizer does
    not estimate a message again to see whether it needs clipping when its length alone says
    it does not (a7a6f03 estimated every message twice more: 2.3 estimates per message). The
    extractive summarizer's fact picker sizes its candidate sentences once more (~0.7 per
    message), so the bound is twice the history, still linear."""
    words = CountingPattern(synopsis.tokens._WORD)
    monkeypatch.setattr(synopsis.tokens, "_WORD", words)
    compactor = Compactor(
        model="extractive", keep_tail=KeepTail(messages=20), clear_tool_outputs=None
    )
    messages = history(n)
    result = compactor.compact(messages)
    assert result.compacted and len(result.messages) < 40
    size = len(messages)
    assert counted["validated"] == size, counted
    assert words.calls <= 2 * size + 100, words.calls
    assert counted["parsed"] <= 8 * size + 100, counted
