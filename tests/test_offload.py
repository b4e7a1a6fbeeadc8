"""The async drivers run a flow's own work in the worker pool a service sets (``offloading``),
and inline without one: planning, redaction and token counting of a large history never hold
the event loop of ``synopsis serve`` (issue 19, finding 1)."""

from __future__ import annotations

import asyncio

from synopsis import AsyncCompactor, AsyncSummarizer
from synopsis._flow import cpu, offloading
from synopsis.server.limits import worker_pool
from synopsis.testing import AsyncFakeModel
from synopsis.tokens import TokenCounter


def _on_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _compaction_counts_where(*, offload: bool) -> set[bool]:
    where: set[bool] = set()

    def estimate(text: str) -> int:
        where.add(_on_a_loop())
        return len(text) // 4 + 1

    model = AsyncFakeModel(default="<summary>1. Primary request: plan the trip.</summary>")
    compactor = AsyncCompactor(
        summarizer=AsyncSummarizer(model=model),
        counter=TokenCounter(estimator=estimate),
        redact=True,
        keep_tail=2,
    )
    history = [
        {"role": ("user", "assistant")[i % 2], "content": f"turn {i}: mail a@b.co"}
        for i in range(12)
    ]

    async def run() -> None:
        if offload:
            with offloading(worker_pool(2)):
                result = await compactor.compact(history)
        else:
            result = await compactor.compact(history)
        assert result.compacted

    asyncio.run(run())
    return where


def test_a_compaction_counts_tokens_in_the_pool_when_one_is_set() -> None:
    assert _compaction_counts_where(offload=True) == {False}


def test_without_a_pool_the_work_runs_inline() -> None:
    assert _compaction_counts_where(offload=False) == {True}


def test_cpu_runs_in_the_pool_and_returns_its_value() -> None:
    async def run() -> tuple[bool, bool]:
        inline = await cpu(_on_a_loop)
        with offloading(worker_pool(1)):
            pooled = await cpu(_on_a_loop)
        return inline, pooled

    assert asyncio.run(run()) == (True, False)
