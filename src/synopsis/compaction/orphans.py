"""Orphan tool results: a tool result whose call is not in the history before it.

Frameworks produce them (a trimmer that cut an assistant's tool call but not its result, a
history loaded from a log that starts mid-turn), and no provider accepts one. A compaction
must not kill the agent's turn over it:

- inside the part being summarized an orphan is harmless: the summarizer reads it as a note
  (:func:`as_notes`), so its content can still reach the summary, and no provider sees a
  result without its call;
- in the history a compaction sends (the kept tail), an orphan is dropped
  (:func:`drop_orphans`) and reported by an
  :class:`~synopsis.events.OrphanToolResultsDropped` event; the caller's history keeps it.

:func:`synopsis.validate_messages` still reports an orphan as an error (the strict check);
the compactors validate with ``orphans="allow"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from synopsis.validation import orphan_results

__all__ = ["as_notes", "drop_orphans", "input_positions"]

Messages = Sequence[Mapping[str, Any]]


def as_notes(messages: Messages) -> tuple[Mapping[str, Any], ...]:
    """``messages`` with each orphan tool result turned into a user note quoting it."""
    found = set(orphan_results(messages))
    if not found:
        return tuple(messages)
    return tuple(_note(m) if i in found else m for i, m in enumerate(messages))


def _note(message: Mapping[str, Any]) -> dict[str, Any]:
    call_id = message.get("tool_call_id")
    name = f" of {message['name']}" if isinstance(message.get("name"), str) else ""
    head = f"[Tool result{name} for call {call_id} (its call is not in the history)]"
    content = message.get("content")
    if isinstance(content, list):
        return {"role": "user", "content": [{"type": "text", "text": head}, *content]}
    body = content if isinstance(content, str) else ""
    return {"role": "user", "content": f"{head}\n{body}" if body else head}


def drop_orphans(
    messages: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], tuple[dict[str, Any], ...]]:
    """``messages`` without their orphan tool results, and the results dropped."""
    found = set(orphan_results(messages))
    if not found:
        return messages, ()
    kept = [m for i, m in enumerate(messages) if i not in found]
    return kept, tuple(messages[i] for i in sorted(found))


def input_positions(original: Messages, dropped: Sequence[Mapping[str, Any]]) -> tuple[int, ...]:
    """Where the ``dropped`` results stood in ``original``: its orphans with the same call
    ids, in order (the sent copies need not be the same objects)."""
    wanted = [m.get("tool_call_id") for m in dropped]
    positions: list[int] = []
    for index in orphan_results(original):
        call_id = original[index].get("tool_call_id")
        if call_id in wanted:
            wanted.remove(call_id)
            positions.append(index)
    return tuple(positions)
