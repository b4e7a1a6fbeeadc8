"""Reuse of the proxy's summaries: a stateless conversation is not summarized on every call.

An agent without session headers resends its whole history each call. Once the history crosses
the trigger, the proxy compacts it: the upstream gets the summary and the recent tail instead.
Next call the history is the same plus a turn, and without a cache it would be summarized
again, for every call from then on.

The cache remembers, per tenant, what a compaction replaced: the compacted messages
``replacement`` stand for the first ``k`` messages of that history (the rest were kept
verbatim). Its key is a chained hash of those ``k`` messages and of what else shapes the
summary (the server's compaction options, the request's tools). A later history that starts
with the same ``k`` messages gets ``replacement + history[k:]``; while that stays below the
trigger no summarizer is called. When it crosses the trigger again, it is compacted (the
compactor sees the earlier summary and extends it) and the new replacement is remembered for
the longer prefix.

* **Tenant-scoped**: the tenant is part of the key; one tenant's summaries never serve another.
* **Correct**: any change in the prefix (an edited message, another system prompt, other
  tools) changes the hash, so it misses.
* **Redacted**: with the server's redaction on, the redaction mode is part of the key (a
  summary made without it never serves), and a hit's messages after the prefix are redacted
  before they go upstream, as a compaction's kept tail is.
* **Bounded**: least recently used entries go first beyond ``summary_cache`` entries (or 64 MiB
  of them); 0 turns the cache off. It lives in one process (each replica has its own).

The hashing and the bookkeeping are pure; :func:`compact_stateless` drives the compactor.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from synopsis import AsyncCompactor
from synopsis.redact import redact_history

__all__ = ["SummaryCache", "common_suffix", "compact_stateless", "prefix_hashes"]

Messages = Sequence[Mapping[str, Any]]
CacheOutcome = Literal["hit", "miss"]


def _canonical(value: object) -> bytes:
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr
    ).encode("utf-8", "surrogatepass")


def prefix_hashes(messages: Messages, context: object) -> list[str]:
    """``result[i]``: the hash of ``context`` and ``messages[: i + 1]`` (one pass, chained)."""
    state = hashlib.blake2b(_canonical(context), digest_size=32).digest()
    found: list[str] = []
    for message in messages:
        state = hashlib.blake2b(state + _canonical(message), digest_size=32).digest()
        found.append(state.hex())
    return found


def common_suffix(a: Messages, b: Messages) -> int:
    """How many trailing messages ``a`` and ``b`` share."""
    count = 0
    while count < min(len(a), len(b)) and a[-1 - count] == b[-1 - count]:
        count += 1
    return count


class SummaryCache:
    """Tenant-scoped LRU of ``prefix hash -> replacement messages``: at most ``size`` entries
    and ``max_bytes`` of them (as JSON), the least recently used going first."""

    def __init__(self, size: int, *, max_bytes: int = 64 << 20) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self._bytes = 0
        self._entries: OrderedDict[tuple[str, str], tuple[tuple[dict[str, Any], ...], int]] = (
            OrderedDict()
        )

    def __len__(self) -> int:
        return len(self._entries)

    def longest(self, tenant: str, hashes: Sequence[str]) -> tuple[int, list[dict[str, Any]]]:
        """The longest cached prefix: ``(k, replacement)``; ``(0, [])`` when none is."""
        for end in range(len(hashes), 0, -1):
            key = (tenant, hashes[end - 1])
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return end, [dict(m) for m in found[0]]
        return 0, []

    def put(self, tenant: str, prefix_hash: str, replacement: Messages) -> None:
        weight = len(_canonical(list(replacement)))
        if self.size <= 0 or weight > self.max_bytes:
            return
        key = (tenant, prefix_hash)
        old = self._entries.pop(key, None)
        self._bytes += weight - (old[1] if old else 0)
        self._entries[key] = (tuple(dict(m) for m in replacement), weight)
        while len(self._entries) > self.size or self._bytes > self.max_bytes:
            self._bytes -= self._entries.popitem(last=False)[1][1]


async def compact_stateless(
    compactor: AsyncCompactor,
    cache: SummaryCache,
    tenant: str,
    messages: Messages,
    *,
    tools: Sequence[Mapping[str, Any]] | None,
    options: object,
    count: Callable[[CacheOutcome], None] = lambda outcome: None,
) -> list[dict[str, Any]] | None:
    """``messages`` as the upstream should get them when over the trigger: compacted, reusing
    a summary of the same prefix when the cache holds one; None below the trigger (send them
    as they are). ``options`` is whatever else shapes the summary (it goes into the key);
    ``count`` is told each hit and miss."""
    if not compactor.should_compact(messages, tools=tools).fired:
        return None
    hashes = prefix_hashes(messages, [options, tools])
    reused, replacement = cache.longest(tenant, hashes)
    candidate = [*replacement, *(dict(m) for m in messages[reused:])]
    if reused and not compactor.should_compact(candidate, tools=tools).fired:
        count("hit")
        # The replacement was redacted when it was made; the messages after it were not.
        clean, _ = redact_history(compactor.options.redact, candidate)
        return [dict(m) for m in clean]
    count("miss")
    result = await compactor.compact(candidate, tools=tools, force=False)
    if result.compacted:
        kept = common_suffix(result.messages, candidate)
        covered = len(candidate) - kept  # candidate[:covered] became result.messages[:-kept]
        if covered >= len(replacement):  # ... which stands for messages[:end]
            end = reused + covered - len(replacement)
            if end > 0:
                cache.put(tenant, hashes[end - 1], result.messages[: len(result.messages) - kept])
    return result.messages
