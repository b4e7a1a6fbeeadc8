"""Options values taken as keyword arguments: one value built once, or the keywords that build it.

Both workflows with many options (:class:`~synopsis.compaction.options.CompactionOptions`,
:class:`~synopsis.session.options.SessionOptions`) accept either a ready value (``options=``)
or the same options as keyword arguments (typed with ``Unpack[...Keywords]``); these helpers
say the same thing about a mistake in either.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from synopsis.errors import ConfigError

__all__ = ["check_twin", "chosen_options", "keyword_values"]

OptionsT = TypeVar("OptionsT")


def keyword_values(keywords: Mapping[str, Any], accepted: frozenset[str]) -> dict[str, Any]:
    """``keywords`` as a new dict; a name outside ``accepted`` is a TypeError, as in a call."""
    unknown = sorted(set(keywords) - accepted)
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
    return dict(keywords)


def chosen_options(
    kind: type[OptionsT],
    options: OptionsT | None,
    keywords: Mapping[str, Any],
    build: Callable[..., OptionsT],
) -> OptionsT:
    """``options`` as given, or ``build(**keywords)``; both at once is a ConfigError."""
    if options is None:
        return build(**keywords)
    if keywords:
        raise ConfigError(
            f"pass either options= or keyword options ({', '.join(sorted(keywords))}), not both"
        )
    if not isinstance(options, kind):
        raise ConfigError(f"options must be a {kind.__name__}, got {type(options).__name__}")
    return options


def check_twin(value: object, *, role: str, method: str, async_: bool, owner: str) -> None:
    """Refuse, at construction, a sync collaborator given to an async driver or the reverse.

    ``value.<method>`` must be a coroutine function exactly when ``async_``; otherwise every
    call would fail later, far from the mistake (an awaited ``SummaryResult``, an un-awaited
    coroutine). None (no collaborator) passes.
    """
    if value is None:
        return
    found = getattr(value, method, None)
    if not callable(found):
        raise ConfigError(f"{owner} needs a {role} with a {method}() method, got {value!r}")
    call = getattr(found, "__call__", None)  # noqa: B004 - callable objects too
    is_async = inspect.iscoroutinefunction(found) or inspect.iscoroutinefunction(call)
    if is_async != async_:
        wanted, got = ("an async", "a sync") if async_ else ("a sync", "an async")
        twin = "async" if async_ else "sync"
        raise ConfigError(
            f"{owner} needs {wanted} {role}, got {got} one ({type(value).__name__}, whose "
            f"{method}() is {'not ' if async_ else ''}a coroutine function): give its {twin} twin"
        )
