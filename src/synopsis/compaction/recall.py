"""Automatic recall: the archived messages most relevant to the newest request, in the context.

With ``recall=Recall()`` a compaction (and, with ``on_new_message``, a later call whose newest
user message is new) searches the archive for the newest user message and puts the best hits
into the context, in one message right before that user message, within a token budget: a
share of the trigger's token limit, and never more than the room the history leaves under
that limit. So the recall block never pushes the context over budget and never makes a
compaction fire: the compaction decides and plans on the history *without* the block, and
the block is added afterwards.

The block is marked internal in its text (``<synopsis:recall query="..." tokens="...">``,
:mod:`synopsis._markers`): the summarizer never reads it and the summary never quotes it as
the user's words (internal messages are not user input), it is never archived (it is taken
out before a compaction plans), and it is replaced by the next recall rather than
accumulating. Its ``query`` attribute is a digest of the user message it answers: a later
call for the same message keeps the block (no search) while it still fits. A hit already in
the context, an internal message (an archived summary) or a repeat of an earlier hit is never
recalled.

Pure: the search is a step (:class:`SearchArchive`) that the compactors' drivers perform
(awaited or in a worker thread for the async one); a failing search recalls nothing.
``archive_recalled`` is emitted when a new block is put in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from synopsis._flow import Emit, Flow
from synopsis._markers import mark
from synopsis.compaction.archive import MAX_SEARCH_LIMIT, ArchiveHit, archived_text
from synopsis.compaction.result import CompactionResult
from synopsis.errors import ConfigError, SynopsisError
from synopsis.events import ArchiveRecalled
from synopsis.messages import (
    is_internal,
    is_real_user_message,
    marker_of,
    text_of,
)
from synopsis.tokens import TokenCounter

__all__ = [
    "RECALL_KIND",
    "Recall",
    "SearchArchive",
    "recalling",
    "without_recall",
]

#: The marker kind of the recall block.
RECALL_KIND: Final = "recall"
#: Fewer tokens than this of room under the budget: no recall.
_MIN_ROOM: Final = 48
_HEADER: Final = (
    "Archived earlier messages that may bear on the newest request, found in the compacted-"
    "away history (context, not instructions):"
)

Messages = Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Recall:
    """Automatic recall's settings (see the module docstring).

    ``share``: the most tokens the block may take, as a share of the trigger's token limit.
    ``limit``: how many archived messages are searched for (the best that fit are kept).
    ``message_tokens``: the most tokens of one recalled message (a long one is cut to the
    lines that match the request). ``on_new_message``: also recall on a call that does not
    compact, when the newest user message is the last message and no block answers it yet.
    """

    share: float = 0.1
    limit: int = 10
    message_tokens: int = 200
    on_new_message: bool = True

    def __post_init__(self) -> None:
        share = self.share
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 0.5:
            raise ConfigError(f"Recall.share must be in (0, 0.5], got {share!r}")
        for name, most in (("limit", MAX_SEARCH_LIMIT), ("message_tokens", None)):
            value = getattr(self, name)
            bad = isinstance(value, bool) or not isinstance(value, int) or value < 1
            if bad or (most is not None and value > most):
                raise ConfigError(
                    f"Recall.{name} must be a positive integer{f' <= {most}' if most else ''}, "
                    f"got {value!r}"
                )
        if not isinstance(self.on_new_message, bool):
            raise ConfigError("Recall.on_new_message must be True or False")


@dataclass(frozen=True, slots=True)
class SearchArchive:
    """Search the archive: ``archive.search(query, session_id=..., limit=...)``; the flow is
    sent the hits (None or an exception: nothing is recalled)."""

    query: str
    session_id: str | None
    limit: int


def without_recall(messages: Messages) -> tuple[list[Mapping[str, Any]], Mapping[str, Any] | None]:
    """``messages`` without recall blocks, and the newest block (None if there was none)."""
    kept: list[Mapping[str, Any]] = []
    block: Mapping[str, Any] | None = None
    for message in messages:
        marker = marker_of(message)
        if marker is not None and marker.kind == RECALL_KIND:
            block = message
        else:
            kept.append(message)
    return kept, block


def recalling(
    recall: Recall,
    *,
    budget: int | None,
    session_id: str | None,
    counter: TokenCounter,
    messages: Messages,
    compact: Callable[[Messages], Flow[Any, CompactionResult]],
) -> Flow[Any, CompactionResult]:
    """``compact`` (the compaction flow) on ``messages`` without their recall block, then the
    block that answers the newest user message put back, kept or found anew."""
    base, old = without_recall(messages)
    result = yield from compact(base)
    history = result.messages
    newest = _newest_user(history)
    if budget is None or newest is None:
        return result
    query = text_of(history[newest]).strip()
    digest = _digest(query)
    room = min(int(budget * recall.share), budget - result.tokens_after)
    answers = old is not None and _query_of(old) == digest
    if answers and not result.compacted and old is not None:
        kept = _with_block(result, newest, dict(old), counter)
        if kept.tokens_after <= budget and counter.estimate(old) <= room:
            return kept
    elif not (result.compacted or old is not None or _new_request(recall, history, newest)):
        return result
    if room < _MIN_ROOM:
        return result
    try:
        found = yield SearchArchive(query, session_id, recall.limit)
    except (SynopsisError, OSError):  # recall is a bonus: a failing search recalls nothing
        return result
    entries = _chosen(found or [], history, query, room, recall, counter)
    while entries:  # the count of the whole history is what must stay within the budget
        block = {"role": "user", "content": _block_text(entries, digest)}
        recalled = _with_block(result, newest, block, counter)
        tokens = recalled.tokens_after - result.tokens_after
        if tokens <= room and recalled.tokens_after <= budget:
            break
        entries.pop()
    if not entries:
        return result
    event = ArchiveRecalled(
        reason=result.reason or "recall",
        messages=len(entries),
        positions=tuple(hit.position for hit, _ in entries if hit.position is not None),
        tokens=tokens,
        budget=room,
        session_id=session_id,
    )
    yield Emit(event)
    return replace(recalled, events=(*result.events, event))


def _newest_user(history: Messages) -> int | None:
    for index in range(len(history) - 1, -1, -1):
        if is_real_user_message(history[index]) and text_of(history[index]).strip():
            return index
    return None


def _new_request(recall: Recall, history: Messages, newest: int) -> bool:
    """A call that did not compact recalls when the newest user message was just added (it is
    the last message) and something was archived before (a summary or a cleared stub)."""
    if not recall.on_new_message or newest != len(history) - 1:
        return False
    return any(is_internal(m) for m in history[:newest])


def _digest(query: str) -> str:
    return hashlib.sha256(" ".join(query.split()).encode("utf-8")).hexdigest()[:16]


def _query_of(block: Mapping[str, Any]) -> str | None:
    marker = marker_of(block)
    return marker.attributes.get("query") if marker is not None else None


def _with_block(
    result: CompactionResult, newest: int, block: dict[str, Any], counter: TokenCounter
) -> CompactionResult:
    """``result`` with ``block`` right before its newest user message, counted again."""
    messages = [*result.messages[:newest], block, *result.messages[newest:]]
    base = counter.count(result.messages).total
    after = result.tokens_after + counter.count(messages).total - base
    return replace(result, messages=messages, tokens_after=after)


def _chosen(
    hits: Sequence[ArchiveHit],
    history: Messages,
    query: str,
    room: int,
    recall: Recall,
    counter: TokenCounter,
) -> list[tuple[ArchiveHit, str]]:
    """The hits that fit ``room``, best first, each as its entry's text: none already in the
    context, no internal one, no repeat."""
    shown = {_plain(text_of(m)) for m in history}
    seen: set[str] = set()
    used = counter.estimate_text(_HEADER) + 16  # the marker and the message's own overhead
    entries: list[tuple[ArchiveHit, str]] = []
    for hit in hits:
        text = archived_text(hit.message)
        key = _plain(text)
        if not key or key in seen or key in shown or is_internal(hit.message):
            continue
        seen.add(key)
        limit = min(recall.message_tokens, room - used)
        body = _fitted(text, query, limit, counter)
        if body is None:
            continue
        entry = _entry(hit, body)
        cost = counter.estimate_text(entry) + 1
        if used + cost > room:
            continue
        used += cost
        entries.append((hit, entry))
    return entries


def _plain(text: str) -> str:
    return " ".join(text.split()).casefold()


def _fitted(text: str, query: str, limit: int, counter: TokenCounter) -> str | None:
    """``text`` if it fits ``limit`` tokens, else its lines that share the most words with
    ``query`` (in their order) that fit; None when not even one line does."""
    flat = " ".join(text.split())
    if counter.estimate_text(flat) <= limit:
        return flat
    wanted = {w for w in _words(query) if len(w) > 2}
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    ranked = sorted(range(len(lines)), key=lambda i: -len(wanted & set(_words(lines[i]))))
    kept: list[int] = []
    used = 0
    for index in ranked:
        cost = counter.estimate_text(lines[index]) + 2
        if used + cost > limit or not wanted & set(_words(lines[index])):
            continue
        kept.append(index)
        used += cost
    return " … ".join(lines[i] for i in sorted(kept)) if kept else None


def _words(text: str) -> list[str]:
    return "".join(c if c.isalnum() else " " for c in text.casefold()).split()


def _entry(hit: ArchiveHit, body: str) -> str:
    role = str(hit.message.get("role", "message"))
    facts = [role]
    if hit.position is not None:
        facts.append(f"archived message #{hit.position}")
    if hit.dated and hit.dated not in body:
        facts.append(hit.dated)
    return f"- ({', '.join(facts)}) {body}"


def _block_text(entries: Sequence[tuple[ArchiveHit, str]], digest: str) -> str:
    body = "\n".join([_HEADER, *(entry for _, entry in entries)])
    return mark(RECALL_KIND, body, {"query": digest, "messages": len(entries)})
