"""Side-store session memory: background summaries, a dual write, context building, recall.

:mod:`.options` holds every option in one value, :mod:`.context` assembles the request (pure),
:mod:`._state` tracks the jobs of this process and :mod:`.memory` holds the sync and async
drivers.
"""

import typing as _typing

from synopsis._lazy import exports as _exports

if _typing.TYPE_CHECKING:
    from synopsis.session.memory import AsyncSessionMemory, ScheduleResult, SessionMemory
    from synopsis.session.options import SessionOptions


__all__ = ["AsyncSessionMemory", "ScheduleResult", "SessionMemory", "SessionOptions"]

_EXPORTS = {
    "synopsis.session.memory": (
        "AsyncSessionMemory",
        "ScheduleResult",
        "SessionMemory",
    ),
    "synopsis.session.options": ("SessionOptions",),
}

# Each name is imported the first time it is read (PEP 562; see synopsis._lazy).
__getattr__, __dir__ = _exports(__name__, _EXPORTS)
