"""Side-store session memory: background summaries, a dual write, context building, recall.

:mod:`.options` holds every option in one value, :mod:`.context` assembles the request (pure),
:mod:`._state` tracks the jobs of this process and :mod:`.memory` holds the sync and async
drivers.
"""

from synopsis.session.memory import AsyncSessionMemory, ScheduleResult, SessionMemory
from synopsis.session.options import SessionOptions

__all__ = ["AsyncSessionMemory", "ScheduleResult", "SessionMemory", "SessionOptions"]
