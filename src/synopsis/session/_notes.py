"""Recalled notes (layer 2 of a hybrid context): rank older messages, fuse them with store hits.

Pure: the store's hits come in as values. Ranking is :mod:`synopsis.memory.ranking`'s BM25,
the formula the memory stores use, so a note ranks the same whether it came from the store or
from this session's history; the two lists are merged by reciprocal rank fusion.
:func:`notes_message` is the message that carries the chosen notes, marked as internal in its
text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from synopsis.memory import Namespace, SearchHit
from synopsis.memory.ranking import (
    bm25_scores,
    fused_order,
    indexed_terms,
    neighbour_contexts,
    query_terms,
)
from synopsis.messages import is_internal, mark, text_of

__all__ = [
    "NOTES_KIND",
    "Recalled",
    "dedupe_recalled",
    "fuse_ranked",
    "hits_to_recalled",
    "latest_user_text",
    "notes_message",
    "rank_history",
    "recall_query",
    "select_notes",
]


#: The marker kind of the recalled-notes message.
NOTES_KIND: Final = "memory"


@dataclass(frozen=True, slots=True, kw_only=True)
class Recalled:
    """One recalled note: a memory from the store or an older message of this session."""

    text: str
    source: Literal["memory", "history"]
    label: str
    score: float


def latest_user_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The text of the newest user message a person wrote, if any."""
    for message in reversed(messages):
        if message.get("role") == "user" and not is_internal(message):
            text = text_of(message).strip()
            if text:
                return text
    return None


def recall_query(messages: Sequence[Mapping[str, Any]], query: str | None) -> str | None:
    """What to recall by: ``query`` when it has text, else the newest user message."""
    return query if query and query.strip() else latest_user_text(messages)


def rank_history(
    older: Sequence[Mapping[str, Any]], query: str, *, limit: int, offset: int = 0
) -> list[Recalled]:
    """BM25-rank user and assistant messages of ``older`` against ``query``; best first.

    Each message is indexed with the messages around it as its context
    (:func:`~synopsis.memory.ranking.neighbour_contexts`), as a store item put with that
    context would be, so an answer is found by the words of the question before it.
    Ties go to the newer message. ``offset`` is the index of ``older[0]`` in the history
    (it only shows in the labels).
    """
    docs = [
        (offset + i, m)
        for i, m in enumerate(older)
        if m.get("role") in {"user", "assistant"} and not is_internal(m) and text_of(m).strip()
    ]
    terms = query_terms(query)
    if not docs or not terms or limit <= 0:
        return []
    texts = [text_of(m) for _, m in docs]
    contexts = neighbour_contexts(texts)
    counts = [Counter(indexed_terms(t, c)) for t, c in zip(texts, contexts, strict=True)]
    scores = bm25_scores(terms, counts, [c.total() for c in counts])
    ranked = sorted(range(len(docs)), key=lambda i: (-scores[i], -docs[i][0]))
    return [
        Recalled(
            text=text_of(docs[i][1]),
            source="history",
            score=scores[i],
            label=f"earlier in this session, message {docs[i][0]}, {docs[i][1]['role']}",
        )
        for i in ranked[:limit]
        if scores[i] > 0
    ]


def hits_to_recalled(hits: Sequence[SearchHit], *, exclude_prefix: Namespace) -> list[Recalled]:
    """Store hits outside ``exclude_prefix``, keeping only the newest summary per session."""
    newest: dict[Namespace, int] = {}
    for hit in hits:
        if hit.item.kind == "summary":
            version = _version_of(hit)
            newest[hit.item.namespace] = max(newest.get(hit.item.namespace, version), version)
    result: list[Recalled] = []
    for hit in hits:
        item = hit.item
        if item.namespace[: len(exclude_prefix)] == exclude_prefix:
            continue
        if item.kind == "summary" and _version_of(hit) < newest[item.namespace]:
            continue
        label = f"{item.kind}, {'/'.join(item.namespace)}"
        result.append(
            Recalled(text=item.text, source="memory", label=label, score=hit.score or 0.0)
        )
    return result


def _version_of(hit: SearchHit) -> int:
    raw = hit.item.tags.get("version", "0")
    return int(raw) if raw.isdigit() else 0


def fuse_ranked(*rankings: Sequence[Recalled], limit: int) -> list[Recalled]:
    """Reciprocal rank fusion of several best-first lists; earlier lists win ties.

    Every note stays a separate entry, even when two lists hold equal notes
    (:func:`dedupe_recalled` merges repeats).
    """
    positions = [[(which, rank) for rank in range(len(r))] for which, r in enumerate(rankings)]
    return [rankings[which][rank] for which, rank in fused_order(positions)[: max(limit, 0)]]


def dedupe_recalled(notes: Sequence[Recalled], *, against: Sequence[str]) -> list[Recalled]:
    """Drop notes whose text repeats an earlier note or any of ``against`` (whitespace-blind)."""
    seen = {_squash(text) for text in against}
    kept: list[Recalled] = []
    for note in notes:
        squashed = _squash(note.text)
        if squashed and squashed not in seen:
            seen.add(squashed)
            kept.append(note)
    return kept


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


def select_notes(
    memories: Sequence[Recalled],
    history: Sequence[Recalled],
    *,
    against: Sequence[str],
    limit: int,
) -> list[Recalled]:
    """Layer 2: fuse recalled memories and older messages, minus what the request repeats."""
    fused = fuse_ranked(
        dedupe_recalled(memories, against=against),
        dedupe_recalled(history, against=against),
        limit=limit * 2,
    )
    return dedupe_recalled(fused, against=against)[:limit]


def notes_message(section: str) -> dict[str, Any]:
    """The internal system message that carries the rendered recalled notes.

    Marked in its text, not by a private key, so the request it is part of goes to any
    provider as it is, and a later step still knows it for injected context, not user words.
    """
    return {"role": "system", "content": mark(NOTES_KIND, section)}
