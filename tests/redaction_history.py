"""A chat history with planted secrets and personal data, and ways to look for them anywhere.

:func:`planted_history` lays every template of the labelled redaction corpus
(:mod:`tests.redaction_corpus`) out as an agent session: English and Chinese chat turns as
user messages, ``env`` dumps, stack traces, config files and logs as tool results, curl
commands as tool-call arguments. It returns the history, every planted value and every
near-miss. :func:`strings` yields every string inside any value (JSON in a string decoded
too, objects walked, SQLite connections read), so a check for a value cannot be fooled by
JSON escaping; :func:`leaks` lists the planted values found.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from synopsis.models._base import ModelResponse, ModelSettings
from tests.redaction_corpus import Sample, build_corpus

__all__ = [
    "ECHO_PREFIX",
    "SAME_EMAIL",
    "AsyncEchoModel",
    "EchoModel",
    "Planted",
    "echo_summary",
    "leaks",
    "planted_history",
    "strings",
]

#: One address planted at the start and at the end of the history: in ``hash`` mode the
#: summary and the kept tail must name it by the same token.
SAME_EMAIL: Final = "dana.lee@acme-corp.io"
ECHO_PREFIX: Final = "Echoed for the test:"


@dataclass(frozen=True, slots=True)
class Planted:
    """A history and what was planted in it, message by message."""

    messages: list[dict[str, Any]]
    values: tuple[str, ...]
    near_misses: tuple[str, ...]
    #: Each near-miss with the index of the message that holds it.
    near_at: tuple[tuple[str, int], ...]


def _turns(index: int, sample: Sample) -> list[dict[str, Any]]:
    call_id = f"call_{index}"
    if sample.genre.startswith("chat"):
        return [
            {"role": "user", "content": sample.text},
            {"role": "assistant", "content": f"Understood, looking into it ({index})."},
        ]
    if sample.genre == "curl":
        arguments = json.dumps({"command": sample.text}, ensure_ascii=False)
        result = f"HTTP/1.1 200 OK ({index})"
    else:
        arguments = json.dumps({"path": f"/srv/app/{sample.genre}_{index}.txt"})
        result = sample.text
    call = {"id": call_id, "type": "function", "function": {"name": "run", "arguments": arguments}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def planted_history(*, seed: int = 7, size: int = 52) -> Planted:
    """Every corpus template once (52 of them), as a session of about 110 messages."""
    samples = build_corpus(seed, size=size)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Be brief."},
        {"role": "user", "content": f"Hi, I am Dana ({SAME_EMAIL}); the deploy is broken."},
    ]
    near_at: list[tuple[str, int]] = []
    for index, sample in enumerate(samples):
        holder = len(messages) + (
            0 if sample.genre.startswith("chat") or sample.genre == "curl" else 1
        )
        near_at += [(near, holder) for near in sample.near_misses]
        messages += _turns(index, sample)
    messages += [
        {"role": "user", "content": f"Send the report to {SAME_EMAIL} when done."},
        {"role": "assistant", "content": "Will do."},
    ]
    values = {value.value for sample in samples for value in sample.planted} | {SAME_EMAIL}
    near = tuple(dict.fromkeys(n for n, _ in near_at))
    return Planted(messages, tuple(sorted(values)), near, tuple(near_at))


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content)
    calls = message.get("tool_calls") or []
    arguments = [str(call["function"]["arguments"]) for call in calls]
    return "\n".join([str(content or ""), *arguments])


def echo_summary(messages: list[dict[str, Any]]) -> str:
    """A summarizer's worst case: it copies every word it was sent into its summary."""
    body = "\n".join(_text(message) for message in messages[1:-1])
    return f"<analysis>copy</analysis><summary>{ECHO_PREFIX}\n{body}</summary>"


@dataclass
class EchoModel:
    """Records every request and answers with a summary that copies all of it."""

    requests: list[list[dict[str, Any]]] = field(default_factory=list)
    name: str = "echo"

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        self.requests.append([dict(m) for m in messages])
        reply = {"role": "assistant", "content": echo_summary(self.requests[-1])}
        return ModelResponse(message=reply, model=self.name)


class AsyncEchoModel(EchoModel):
    async def complete(  # type: ignore[override]
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        return EchoModel.complete(self, messages, settings=settings)


def strings(value: Any, seen: set[int] | None = None) -> Iterator[str]:
    """Every string in ``value``: nested containers, dataclasses, objects' attributes, the
    JSON inside a string, the text of every table of a SQLite connection."""
    seen = set() if seen is None else seen
    if isinstance(value, str):
        yield value
        yield from _decoded(value, seen)
        return
    if isinstance(value, bytes):
        yield value.decode("utf-8", "replace")
        return
    if id(value) in seen or value is None or isinstance(value, int | float | bool):
        return
    seen.add(id(value))
    if isinstance(value, sqlite3.Connection):
        yield from _sqlite_rows(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from strings(key, seen)
            yield from strings(item, seen)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from strings(item, seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from strings(getattr(value, field.name, None), seen)
    elif hasattr(value, "__dict__") and type(value).__module__.startswith(("synopsis", "tests")):
        yield from strings(vars(value), seen)


def _decoded(text: str, seen: set[int]) -> Iterator[str]:
    if text[:1] not in "[{":
        return
    try:
        data = json.loads(text)
    except ValueError:
        return
    yield from strings(data, seen)


def _sqlite_rows(conn: sqlite3.Connection) -> Iterator[str]:
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for table in tables:
        for row in conn.execute(f'SELECT * FROM "{table}"'):
            yield from strings(list(row))


def leaks(values: Iterable[str], where: Iterable[str]) -> list[str]:
    """The ``values`` found in any of the strings ``where``."""
    texts = "\x00".join(where)
    return [value for value in values if value in texts]
