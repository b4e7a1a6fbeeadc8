"""Options values taken as keyword arguments: one value built once, or the keywords that build it.

Both workflows with many options (:class:`~synopsis.compaction.options.CompactionOptions`,
:class:`~synopsis.session.options.SessionOptions`) accept either a ready value (``options=``)
or the same options as keyword arguments (typed with ``Unpack[...Keywords]``); these helpers
say the same thing about a mistake in either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from synopsis.errors import ConfigError

__all__ = ["chosen_options", "keyword_values"]

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
