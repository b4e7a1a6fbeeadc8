"""The before-model hook below the trigger does per message only what ``list()`` does: no
abstract-base-class check and no function call per plain dict. Counted, never timed (the
timing is ``bench/bench_hook.py``)."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

import pytest

import synopsis.compaction.result
from synopsis import Compactor
from synopsis.messages import without_meta

N = 5_000


def history(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(n - 1):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"turn {i}"})
    return messages


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the hook runs ``isinstance`` against an ABC, and ``without_meta``."""
    counts = {"abc": 0, "without_meta": 0}
    check: Callable[..., bool] = abc.ABCMeta.__instancecheck__

    def counting_check(cls: abc.ABCMeta, instance: object) -> bool:
        counts["abc"] += 1
        return check(cls, instance)

    def counting_without_meta(message: Any) -> dict[str, Any]:
        counts["without_meta"] += 1
        return without_meta(message)

    monkeypatch.setattr(abc.ABCMeta, "__instancecheck__", counting_check)
    monkeypatch.setattr(synopsis.compaction.result, "without_meta", counting_without_meta)
    return counts


def test_below_the_trigger_no_per_message_work_beyond_a_copy(counted: dict[str, int]) -> None:
    messages = history(N)
    compactor = Compactor(model="extractive", trigger_tokens=10**9)
    compactor(messages)  # the first call counts the whole history; later ones only the new
    messages.append({"role": "user", "content": "one more"})
    counted.update(abc=0, without_meta=0)
    result = compactor(messages)
    assert result == messages and result is not messages
    assert counted["abc"] < 50 and counted["without_meta"] < 50, counted


def test_a_legacy_meta_marker_still_moves_into_the_text() -> None:
    """The fast path is for plain dicts without ``meta``; anything else goes through
    ``without_meta`` as before."""
    legacy = {"role": "user", "content": "old", "meta": {"synopsis": {"kind": "summary"}}}
    result = Compactor(model="extractive", trigger_tokens=10**9)([legacy])
    assert result == [without_meta(legacy)] and "meta" not in result[0]


class CountingHistory(list[dict[str, Any]]):
    """A history that counts what is read of it: elements fetched by index or slice, and
    passes over it (iterations started). C-level list internals are not seen, so the count is
    of the per-message Python work the hook does."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        super().__init__(messages)
        self.read = 0
        self.passes = 0

    def __getitem__(self, key: Any) -> Any:
        item = super().__getitem__(key)
        self.read += len(item) if isinstance(key, slice) else 1
        return item

    def __iter__(self) -> Any:
        self.passes += 1
        return super().__iter__()


def with_usage(n: int) -> list[dict[str, Any]]:
    """``history(n)`` whose assistant messages carry the provider's usage (the baseline)."""
    messages = history(n)
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            message["usage"] = {
                "prompt_tokens": 4 * i,
                "completion_tokens": 3,
                "total_tokens": 4 * i + 3,
            }
    return messages


@pytest.mark.parametrize("n", [2_000, 20_000])
def test_with_a_baseline_the_hook_reads_only_what_follows_it(n: int) -> None:
    """Below the trigger, with a usage baseline, the hook reads the messages from the baseline
    on plus a constant, and makes one copy (one pass) for its new list: the same at 2,000 and
    20,000 messages. (On a7a6f03 it read every message twice: a type check and a copy each.)"""
    compactor = Compactor(model="extractive", trigger_tokens=10**9)
    plain = with_usage(n)
    compactor(plain)  # the first call reads the whole history once
    grown = CountingHistory(plain)
    new = [{"role": "user", "content": "one more"}, {"role": "user", "content": "and another"}]
    grown.extend(new)
    result = compactor(grown)
    assert result == grown and result is not grown
    after_baseline = 1 + len(new)  # the last assistant message (the baseline), then the new ones
    assert grown.passes <= 1, grown.passes  # the copy
    assert grown.read <= 2 * after_baseline + 10, grown.read


def test_a_meta_key_after_the_baseline_still_moves_into_the_text() -> None:
    """The one-copy result is only for plain dicts; a message with ``meta`` appended to a
    counted history is still made sendable."""
    compactor = Compactor(model="extractive", trigger_tokens=10**9)
    messages = with_usage(100)
    compactor(messages)
    legacy = {"role": "user", "content": "old", "meta": {"synopsis": {"kind": "summary"}}}
    result = compactor([*messages, legacy])
    assert result[-1] == without_meta(legacy) and "meta" not in result[-1]
    assert compactor([*messages, legacy, {"role": "user", "content": "x"}])[-2] == result[-1]


def test_a_foreign_object_after_the_baseline_is_refused_with_the_converter_hint() -> None:
    from synopsis.errors import InvalidMessage

    compactor = Compactor(model="extractive", trigger_tokens=10**9)
    messages = with_usage(100)
    compactor(messages)
    with pytest.raises(InvalidMessage, match="message 100: expected an object, got object"):
        compactor([*messages, object()])  # type: ignore[list-item]
