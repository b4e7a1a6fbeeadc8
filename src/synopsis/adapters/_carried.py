"""Compacting a framework's history without losing what the framework keeps on its messages.

An adapter converts the framework's history with ``keep_extras=True``, so every message carries
what the standard mapping cannot say (item ids, statuses, timestamps, run ids) under
``CARRY_KEY``. The compactor must not see that data: the summarizer sends the messages it reads
to a provider as they are, and no provider accepts our private key. So the adapter compacts the
plain messages (:func:`split_carried`) and, on the way back, gives each message the compactor
kept its original's carried data again (:func:`reattach`), so a kept message converts back to
the very object the framework had. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from synopsis.convert import CARRY_KEY
from synopsis.messages import without_meta

__all__ = ["reattach", "split_carried"]

#: Keys the compactor may drop from a kept message (``usage`` measured the old, longer prompt).
_DROPPED_ON_KEEP = frozenset({"usage"})


def split_carried(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[Any]]:
    """The messages without their carried data, and that data (None where there is none)."""
    plain = [{k: v for k, v in message.items() if k != CARRY_KEY} for message in messages]
    return plain, [message.get(CARRY_KEY) for message in messages]


def reattach(
    compacted: Sequence[Mapping[str, Any]],
    plain: Sequence[Mapping[str, Any]],
    carried: Sequence[Any],
) -> list[dict[str, Any]]:
    """``compacted`` with each kept message's carried data restored.

    A kept message equals its original (``usage`` and a legacy ``meta`` aside), and kept
    messages keep their order, so they are matched to ``plain`` as a subsequence, from the
    end: the verbatim tail first, then anything kept before the summary (system messages,
    messages a truncation kept).
    Messages the compactor wrote (summary, skills, notice) match nothing and stay as they are.
    Linear in the history, plus one scan per written message.
    """
    result = [dict(message) for message in compacted]
    position = len(plain)
    for index in range(len(result) - 1, -1, -1):
        found = _last_equal(plain, result[index], before=position)
        if found is None:
            continue
        position = found
        if carried[found] is not None:
            result[index][CARRY_KEY] = carried[found]
    return result


def _last_equal(
    messages: Sequence[Mapping[str, Any]], wanted: Mapping[str, Any], *, before: int
) -> int | None:
    for index in range(before - 1, -1, -1):
        if _same(messages[index], wanted):
            return index
    return None


def _same(original: Mapping[str, Any], kept: Mapping[str, Any]) -> bool:
    if "meta" in original:  # a legacy marker: the compactor moves it into the text
        original = without_meta(original)
    keys = original.keys() - _DROPPED_ON_KEEP
    if keys != kept.keys() - _DROPPED_ON_KEEP:
        return False
    return all(original[key] == kept[key] for key in keys)
