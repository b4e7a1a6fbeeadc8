"""Workflows written once: a pure generator of steps, carried out by a sync or async driver.

A *flow* is a generator that yields steps (frozen values saying what to do: call a model,
sleep, write to a store, emit an event) and is sent each step's result, or has the step's
exception thrown into it. It does no I/O itself, so the decisions of a workflow live in one
place; :func:`drive` and :func:`adrive` only carry the steps out, with a ``perform`` callable
the caller supplies. This is httpx's ``auth_flow`` idea, and the pattern the PostgreSQL store
already uses for its SQL plans.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping
from contextlib import closing, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["Emit", "Flow", "Offload", "StoreCall", "adrive", "cpu", "drive", "offloading"]

S = TypeVar("S")
T = TypeVar("T")
E = TypeVar("E")

#: A workflow: yields steps of type ``S``, is sent their results, returns ``T``.
Flow = Generator[S, Any, T]


@dataclass(frozen=True, slots=True)
class Emit(Generic[E]):
    """The step every workflow shares: deliver ``event`` to the workflow's event handlers now
    (a failing handler is logged, never raised into the flow); the flow is sent None."""

    event: E


@dataclass(frozen=True, slots=True)
class StoreCall:
    """The store step of the workflows over a store (the session jobs, the LangGraph and
    Agents SDK adapters): call ``store.<method>(*args, **kwargs)``; the flow is sent the
    result."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def on(self, store: Any) -> Any:
        """Make the call on ``store`` (an awaitable for an async store)."""
        return getattr(store, self.method)(*self.args, **self.kwargs)


#: Runs a CPU-bound callable somewhere else (a worker thread) and awaits its result.
Offload = Callable[[Callable[[], Any]], Awaitable[Any]]
_OFFLOAD: ContextVar[Offload | None] = ContextVar("synopsis_offload", default=None)


@contextmanager
def offloading(offload: Offload) -> Iterator[None]:
    """Within this block (and the tasks started in it), :func:`adrive` advances flows through
    ``offload`` and :func:`cpu` runs its callable there: a service passes a bounded worker
    pool, so a large history's planning, redaction and token counting never hold its event
    loop. Without it, both run inline, as a library user's code expects."""
    token = _OFFLOAD.set(offload)
    try:
        yield
    finally:
        _OFFLOAD.reset(token)


async def cpu(run: Callable[[], T]) -> T:
    """``run()``, in the worker pool set by :func:`offloading` if there is one."""
    offload = _OFFLOAD.get()
    if offload is None:
        return run()
    return await offload(run)  # type: ignore[no-any-return]


class _Cursor:
    """Where a flow stands: what to send it next (a step's result, or its exception)."""

    def __init__(self, flow: Flow[Any, Any]) -> None:
        self.flow = flow
        self.value: Any = None
        self.error: Exception | None = None

    def advance(self) -> tuple[bool, Any]:
        """``(False, next step)``, or ``(True, the flow's result)`` once it has returned."""
        try:
            error, self.error = self.error, None
            step = self.flow.send(self.value) if error is None else self.flow.throw(error)
        except StopIteration as stop:
            return True, stop.value
        self.value = None
        return False, step


def drive(flow: Flow[S, T], perform: Callable[[S], Any]) -> T:
    """Run ``flow`` to its end, performing each step synchronously."""
    with closing(flow):  # a cancelled driver still runs the flow's finally blocks
        cursor = _Cursor(flow)
        while True:
            done, item = cursor.advance()
            if done:
                return item  # type: ignore[no-any-return]
            try:
                cursor.value = perform(item)
            except Exception as exc:  # handed to the flow, which decides what it means
                cursor.error = exc


async def adrive(flow: Flow[S, T], perform: Callable[[S], Awaitable[Any]]) -> T:
    """Run ``flow`` to its end, awaiting each step; the twin of :func:`drive`."""
    with closing(flow):
        cursor = _Cursor(flow)
        while True:
            done, item = await cpu(cursor.advance)
            if done:
                return item  # type: ignore[no-any-return]
            try:
                cursor.value = await perform(item)
            except Exception as exc:
                cursor.error = exc
