"""Every option of session memory in one frozen value, validated once, with the only defaults.

:class:`SessionOptions` is what both drivers (:class:`~synopsis.session.memory.SessionMemory`
and its async twin) and the pure helpers they run share, as
:class:`~synopsis.compaction.options.CompactionOptions` is for compaction: a bad value is a
:class:`~synopsis.errors.ConfigError` naming the option when the value is built. The drivers
also take the same options as keyword arguments (:class:`SessionKeywords`, where ``redact``
may be True for the default redactor); :meth:`SessionOptions.from_keywords` normalizes them.
The store, the summarizer and (sync only) ``max_workers`` belong to a driver, not to the
options, so one value can configure many memories.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypedDict, Unpack, get_args

from synopsis._options import keyword_values
from synopsis.errors import ConfigError
from synopsis.events import SessionEventHandler
from synopsis.memory import SearchMode
from synopsis.redact import Redactor, redactor_from
from synopsis.session._bounds import MIN_SUMMARY_CHARS
from synopsis.tokens import Estimator, default_estimate

__all__ = [
    "DEFAULT_CLOSE_TIMEOUT",
    "DEFAULT_MAX_SUMMARY_CHARS",
    "DEFAULT_SUMMARIZE_TIMEOUT",
    "MIN_SUMMARY_TOKENS",
    "SessionKeywords",
    "SessionOptions",
    "check_timeout",
]

#: Seconds a job waits for the summarizer by default.
DEFAULT_SUMMARIZE_TIMEOUT: Final = 120.0
#: Characters a stored summary keeps by default.
DEFAULT_MAX_SUMMARY_CHARS: Final = 20_000
#: How long ``close()`` waits for running jobs by default.
DEFAULT_CLOSE_TIMEOUT: Final = 30.0
#: The smallest ``max_summary_tokens`` accepted: room for the marker and some text.
MIN_SUMMARY_TOKENS: Final = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionOptions:
    """How session memory summarizes, builds a request and recalls.

    ``summarize_every``: a summary is due once the session grew by this many messages past
    the latest one. ``window_messages`` / ``window_tokens``: the recent window a request keeps
    (None: no limit). ``context_budget_tokens``: the whole request's budget (None: none).
    ``hybrid``: also recall notes (other sessions' memories, older turns of this one), at most
    ``recall_limit``, searched by ``recall_mode``. ``on_event``: the event handlers. ``clock``:
    the time source of cooldowns and claims. ``failure_cooldown``: seconds a session waits
    after a failed job. ``estimate``: the token estimate of text (None: the default one).
    ``summarize_timeout`` / ``close_timeout``: seconds a job waits for the summarizer and
    ``close()`` for the jobs (None: no limit). ``max_summary_chars`` / ``max_summary_tokens``:
    the bounds of a stored and of an injected summary. ``redact``: a
    :class:`~synopsis.redact.Redactor` for what a job sends and stores (None: off).
    ``tracer_provider`` / ``trace_tenant``: OpenTelemetry spans (see
    :mod:`synopsis.session._tracing`). ``owner``: the name this memory's claims carry in the
    store (None: random per memory).
    """

    summarize_every: int = 20
    window_messages: int | None = 40
    window_tokens: int | None = None
    context_budget_tokens: int | None = None
    hybrid: bool = False
    recall_limit: int = 5
    recall_mode: SearchMode = "keyword"
    on_event: Sequence[SessionEventHandler] = ()
    clock: Callable[[], float] = time.time
    failure_cooldown: float = 60.0
    estimate: Estimator | None = None
    summarize_timeout: float | None = DEFAULT_SUMMARIZE_TIMEOUT
    close_timeout: float | None = DEFAULT_CLOSE_TIMEOUT
    max_summary_chars: int | None = DEFAULT_MAX_SUMMARY_CHARS
    max_summary_tokens: int | None = None
    redact: Redactor | None = None
    tracer_provider: Any = None
    trace_tenant: bool = False
    owner: str | None = None

    def __post_init__(self) -> None:
        if self.summarize_every < 1:
            raise ConfigError("summarize_every must be at least 1")
        for name, least in (
            ("window_messages", 1),
            ("window_tokens", 1),
            ("context_budget_tokens", 1),
            ("max_summary_chars", MIN_SUMMARY_CHARS),
            ("max_summary_tokens", MIN_SUMMARY_TOKENS),
        ):
            value = getattr(self, name)
            if value is not None and value < least:
                raise ConfigError(f"{name} must be at least {least}, or None for no limit")
        check_timeout("summarize_timeout", self.summarize_timeout)
        if self.recall_limit < 0:
            raise ConfigError("recall_limit must be 0 or more")
        if self.recall_mode not in get_args(SearchMode):
            raise ConfigError(f"recall_mode must be one of {', '.join(get_args(SearchMode))}")
        object.__setattr__(self, "redact", redactor_from(self.redact))
        check_timeout("close_timeout", self.close_timeout)
        object.__setattr__(self, "on_event", tuple(self.on_event))

    @property
    def estimator(self) -> Estimator:
        """The token estimate of text in use: ``estimate``, or the default one."""
        return self.estimate or default_estimate

    @classmethod
    def from_keywords(cls, **keywords: Unpack[SessionKeywords]) -> SessionOptions:
        """The options from the drivers' keyword arguments; left out means the default.
        ``redact`` may also be True (a default :class:`~synopsis.redact.Redactor`) or False."""
        return cls(**keyword_values(keywords, SessionKeywords.__optional_keys__))


class SessionKeywords(TypedDict, total=False):
    """The drivers' keyword arguments: the fields of :class:`SessionOptions`."""

    summarize_every: int
    window_messages: int | None
    window_tokens: int | None
    context_budget_tokens: int | None
    hybrid: bool
    recall_limit: int
    recall_mode: SearchMode
    on_event: Sequence[SessionEventHandler]
    clock: Callable[[], float]
    failure_cooldown: float
    estimate: Estimator | None
    summarize_timeout: float | None
    close_timeout: float | None
    max_summary_chars: int | None
    max_summary_tokens: int | None
    redact: Redactor | bool | None
    tracer_provider: Any
    trace_tenant: bool
    owner: str | None


def check_timeout(name: str, seconds: float | None) -> None:
    """A time limit is a positive number of seconds, or None for none."""
    if seconds is not None and not seconds > 0:
        raise ConfigError(f"{name} must be a positive number of seconds, or None for no limit")
