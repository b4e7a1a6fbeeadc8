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
import synopsis.validation
from synopsis import Compactor, KeepTail, TokenCounter
from synopsis.tokens import default_estimate


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


@pytest.mark.parametrize("n", [600, 3_000])
def test_a_compaction_reads_each_message_a_bounded_number_of_times(
    n: int, counted: dict[str, int]
) -> None:
    estimated = 0

    def estimate(text: str) -> int:
        nonlocal estimated
        estimated += 1
        return default_estimate(text)

    compactor = Compactor(
        model="extractive",
        keep_tail=KeepTail(messages=20),
        counter=TokenCounter(estimator=estimate),
        clear_tool_outputs=None,
    )
    messages = history(n)
    result = compactor.compact(messages)
    assert result.compacted and len(result.messages) < 40
    size = len(messages)
    assert counted["validated"] == size, counted
    assert estimated <= 3 * size + 100, estimated
    assert counted["parsed"] <= 8 * size + 100, counted
