"""The flow drivers: one generator of steps, carried out the same way sync and async."""

from __future__ import annotations

import pytest

from synopsis._flow import Flow, adrive, drive


def doubling(values: list[int]) -> Flow[int, int]:
    """Yields each value, sums the results; a ValueError from a step counts as 0."""
    total = 0
    for value in values:
        try:
            total += yield value
        except ValueError:
            total += 0
    return total


def perform(step: int) -> int:
    if step < 0:
        raise ValueError(step)
    return step * 2


async def aperform(step: int) -> int:
    return perform(step)


def test_drive_sends_results_and_returns_the_flow_value() -> None:
    assert drive(doubling([1, 2, 3]), perform) == 12


def test_a_failing_step_is_thrown_into_the_flow() -> None:
    assert drive(doubling([1, -5, 3]), perform) == 8


async def test_async_driver_gives_the_same_results() -> None:
    assert await adrive(doubling([1, -5, 3]), aperform) == drive(doubling([1, -5, 3]), perform)


def test_an_error_the_flow_does_not_handle_reaches_the_caller() -> None:
    def strict() -> Flow[int, int]:
        return (yield -1)

    with pytest.raises(ValueError, match="-1"):
        drive(strict(), perform)


def test_a_flow_without_steps_returns_at_once() -> None:
    def empty() -> Flow[int, str]:
        return "done"
        yield 0  # pragma: no cover - makes this a generator

    assert drive(empty(), perform) == "done"


async def test_a_cancelled_async_driver_closes_the_flow() -> None:
    """Cancellation (a BaseException) still runs the flow's ``finally`` blocks at once."""
    import asyncio

    released: list[bool] = []

    def guarded() -> Flow[int, int]:
        try:
            return (yield 1)
        finally:
            released.append(True)

    async def never(step: int) -> int:
        await asyncio.sleep(3600)
        return step

    task = asyncio.ensure_future(adrive(guarded(), never))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert released == [True]
