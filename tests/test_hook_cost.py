"""The before-model hook below the trigger does per message only what ``list()`` does: no
abstract-base-class check and no function call per plain dict. Counted, never timed (the
timing is ``bench/bench_hook.py``)."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

import pytest

import synopsis.compaction._flow
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
    monkeypatch.setattr(synopsis.compaction._flow, "without_meta", counting_without_meta)
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
