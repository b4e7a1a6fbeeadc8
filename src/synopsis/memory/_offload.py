"""Keeping embedding-model calls off the event loop in the async stores."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["off_loop"]

P = ParamSpec("P")
T = TypeVar("T")


async def off_loop(embeds: bool, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``fn`` on a worker thread when it will call the embedder, else right here.

    An embedding model takes milliseconds to seconds of CPU; run on the event loop it would
    stall every other task. Calls that embed nothing skip the thread hop.
    """
    if embeds:
        return await asyncio.to_thread(fn, *args, **kwargs)
    return fn(*args, **kwargs)
