"""The tenacity internals ``synopsis.models.retry`` drives, pinned by name.

The retry flow does not call ``Retrying.__call__``: it runs tenacity's sans-I/O core by hand
(``Retrying.begin``, ``Retrying.iter`` on a ``RetryCallState``, ``DoAttempt`` / ``DoSleep``,
``set_result`` / ``set_exception``, ``prepare_for_next_attempt``), so the model calls and the
sleeps stay steps of a flow. These are not all documented API; ``pyproject.toml`` pins
``tenacity<10``, and an upgrade that changes any of them fails here, one test per behaviour.
"""

from __future__ import annotations

from typing import Any

import pytest
from tenacity import (
    DoAttempt,
    DoSleep,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
)


class Flaky(Exception):
    pass


class Fatal(Exception):
    pass


def _started(attempts: int = 3, wait: Any = None) -> tuple[Retrying, RetryCallState]:
    """A retrying run begun the way ``models/retry.py`` begins one."""
    retrying = Retrying(
        stop=stop_after_attempt(attempts),
        wait=wait or (lambda state: 0.25 * state.attempt_number),
        retry=retry_if_exception(lambda error: isinstance(error, Flaky)),
        reraise=True,
    )
    retrying.begin()
    return retrying, RetryCallState(retrying, fn=None, args=(), kwargs={})


def _failed(state: RetryCallState, error: BaseException) -> None:
    state.set_exception((type(error), error, error.__traceback__))


def test_a_fresh_run_asks_for_an_attempt() -> None:
    retrying, state = _started()
    assert isinstance(retrying.iter(state), DoAttempt)
    assert state.attempt_number == 1


def test_a_result_ends_the_run_with_that_result() -> None:
    retrying, state = _started()
    retrying.iter(state)
    state.set_result("summary")
    assert retrying.iter(state) == "summary"


def test_a_retryable_failure_asks_for_a_sleep_the_wait_chose() -> None:
    """``DoSleep`` is a float: the seconds the ``wait`` callable returned for this state."""
    retrying, state = _started()
    retrying.iter(state)
    _failed(state, Flaky("rate limited"))
    action = retrying.iter(state)
    assert isinstance(action, DoSleep) and float(action) == 0.25


def test_the_wait_callable_sees_the_failed_outcome() -> None:
    seen: list[BaseException | None] = []

    def wait(state: RetryCallState) -> float:
        seen.append(state.outcome.exception() if state.outcome is not None else None)
        return 0.0

    retrying, state = _started(wait=wait)
    retrying.iter(state)
    error = Flaky("once")
    _failed(state, error)
    retrying.iter(state)
    assert seen == [error]


def test_preparing_the_next_attempt_counts_it_and_clears_the_outcome() -> None:
    retrying, state = _started()
    retrying.iter(state)
    _failed(state, Flaky("once"))
    retrying.iter(state)
    state.prepare_for_next_attempt()
    assert state.attempt_number == 2 and state.outcome is None
    assert isinstance(retrying.iter(state), DoAttempt)


def test_the_last_attempt_reraises_its_own_error() -> None:
    """With ``reraise=True`` the final failure itself comes out of ``iter`` (not RetryError)."""
    retrying, state = _started(attempts=2)
    for number in (1, 2):
        assert isinstance(retrying.iter(state), DoAttempt)
        _failed(state, Flaky(f"attempt {number}"))
        if number == 1:
            assert isinstance(retrying.iter(state), DoSleep)
            state.prepare_for_next_attempt()
    with pytest.raises(Flaky, match="attempt 2"):
        retrying.iter(state)


def test_an_error_the_predicate_refuses_is_raised_at_once() -> None:
    retrying, state = _started()
    retrying.iter(state)
    _failed(state, Fatal("bad request"))
    with pytest.raises(Fatal, match="bad request"):
        retrying.iter(state)
    assert state.attempt_number == 1
