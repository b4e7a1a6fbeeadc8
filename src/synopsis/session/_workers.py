"""Daemon threads for background jobs, so that a hung model call never keeps a process alive.

Why not :class:`concurrent.futures.ThreadPoolExecutor`: CPython (3.9 and later) registers
``concurrent.futures.thread._python_exit`` with ``threading._register_atexit``; at interpreter
exit it joins every worker any executor ever started, daemon or not. One worker stuck in a
summarizer call therefore blocks exit forever, and a subclass with daemonic threads does not
help, since the workers are still listed in ``_threads_queues``. These threads are daemonic and
registered nowhere: at exit the interpreter leaves them, like any daemon thread.

A thread cannot be killed. :func:`call_within` runs one call on its own daemon thread and stops
waiting after ``timeout`` seconds; the call goes on in the background and its late result (or
error) lands in a future nobody reads.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import Any, TypeVar

from synopsis.errors import ConfigError

__all__ = ["DaemonPool", "call_within"]

T = TypeVar("T")

_Work = tuple["Future[Any]", Callable[[], Any]]


def _settle(future: Future[T], call: Callable[[], T]) -> None:
    """Run ``call`` into ``future`` (unless it was cancelled first)."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(call())
    except BaseException as exc:  # the future carries it to whoever waits
        future.set_exception(exc)


class DaemonPool:
    """At most ``max_workers`` daemon threads taking calls from one queue.

    Each call runs in a copy of the submitter's context (as an asyncio task would), so a
    trace begun by the caller goes on in the job.
    """

    def __init__(self, max_workers: int, *, name: str) -> None:
        if max_workers < 1:
            raise ConfigError("max_workers must be at least 1")
        self._max_workers = max_workers
        self._name = name
        self._queue: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._shut = False

    def submit(self, call: Callable[[], T]) -> Future[T]:
        """Queue ``call``; RuntimeError once the pool is shut down."""
        future: Future[T] = Future()
        context = contextvars.copy_context()
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot submit to a pool that was shut down")
            self._queue.put((future, lambda: context.run(call)))
            if len(self._threads) < self._max_workers:
                self._start_worker()
        return future

    def _start_worker(self) -> None:
        name = f"{self._name}-{len(self._threads)}"
        thread = threading.Thread(target=self._work, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            future, call = item
            _settle(future, call)
        self._queue.put(None)  # pass the stop signal on to the next worker

    def shutdown(self, *, cancel_pending: bool) -> None:
        """Take no more calls; let idle workers end. Never waits for a running call."""
        with self._lock:
            self._shut = True
        if cancel_pending:
            self._cancel_queued()
        self._queue.put(None)

    def _cancel_queued(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                item[0].cancel()


def call_within(
    call: Callable[[], T], timeout: float | None, *, on_timeout: Callable[[], Exception], name: str
) -> T:
    """``call()``, but stop waiting after ``timeout`` seconds (None: wait for it).

    When the time runs out, ``on_timeout()`` is raised; the call is left running on a daemon
    thread named ``name`` and whatever it returns later is dropped. An error of the call itself
    is raised as it is.
    """
    if timeout is None:
        return call()
    future: Future[T] = Future()
    context = contextvars.copy_context()
    thread = threading.Thread(
        target=_settle, args=(future, lambda: context.run(call)), name=name, daemon=True
    )
    thread.start()
    done, _ = wait([future], timeout)
    if not done:
        raise on_timeout()
    return future.result()
