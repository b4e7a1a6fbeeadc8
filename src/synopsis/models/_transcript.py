"""Reading the extractive summarizer's input: the transcript its sections are built from.

:func:`read_transcript` splits a summarizer input (``[persona, *context, instruction]``) into a
:class:`Transcript` (what each role said, the tool calls and results in order, the candidate
fact sentences with their session dates, the previous summary if any) and the instruction
text. A cleared tool result (a stub) and internal messages add no text; a summary message or
the skills message is read as what it is, not as something the user said. Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from synopsis.messages import is_internal, marked_body, text_of
from synopsis.models._clip import clip_line
from synopsis.models._facts import Sentence, carried_date, collect_sentences
from synopsis.prompts import CHINESE, ENGLISH, USER_MESSAGES_TAG

__all__ = ["Transcript", "brief_args", "read_transcript", "strip_wrapping"]

_PREVIOUS_OPEN: Final = "<previous_summary>"
_PREVIOUS_CLOSE: Final = "</previous_summary>"
_SUMMARY_TAG: Final = re.compile(r"</?summary>", re.IGNORECASE)


@dataclass(slots=True)
class Transcript:
    """What the sections are built from; filled once by :func:`read_transcript`."""

    users: list[str] = field(default_factory=list)
    assistants: list[str] = field(default_factory=list)
    # (tool name, arguments text) in call order
    calls: list[tuple[str, str]] = field(default_factory=list)
    # (tool name, result text) in result order
    results: list[tuple[str, str]] = field(default_factory=list)
    # chronological (role, text) stream, for errors and "what followed"
    stream: list[tuple[str, str]] = field(default_factory=list)
    previous: str = ""
    answered: bool = False
    # candidate fact sentences, in order, and the session date in force while reading
    sentences: list[Sentence] = field(default_factory=list)
    date: str = ""
    dated: bool = False
    position: int = 0


def is_instruction(message: Mapping[str, Any]) -> bool:
    text = text_of(message) if not is_internal(message) else ""
    return message.get("role") == "user" and "<summary>" in text and USER_MESSAGES_TAG in text


def previous_block(instruction: str) -> str:
    """The text of the first complete ``<previous_summary>`` block ("" if there is none).

    ``str.find``, not a lazy regex, which rescans the rest from every unclosed opening tag.
    """
    start = instruction.find(_PREVIOUS_OPEN)
    end = instruction.find(_PREVIOUS_CLOSE, start + len(_PREVIOUS_OPEN)) if start >= 0 else -1
    return instruction[start + len(_PREVIOUS_OPEN) : end] if end >= 0 else ""


def strip_wrapping(text: str) -> str | None:
    """The summary inside a summary message's text, or None if ``text`` is not one."""
    for prompts in (ENGLISH, CHINESE):
        if text.startswith(prompts.summary_preamble):
            body = text[len(prompts.summary_preamble) :]
            body = body.replace(prompts.continue_instruction, "")
            pointer = prompts.transcript_line.split("{path}")[0]
            lines = [line for line in body.splitlines() if not line.startswith(pointer)]
            return "\n".join(lines).strip()
    return None


def is_skills(text: str) -> bool:
    return any(text.startswith(p.skills_preamble) for p in (ENGLISH, CHINESE))


def read_transcript(messages: Sequence[Mapping[str, Any]]) -> tuple[Transcript, str]:
    """Split the summarizer input into a transcript and the instruction text."""
    items = [m for m in messages if isinstance(m, Mapping)]
    if items and items[0].get("role") in {"system", "developer"}:
        items = items[1:]
    instruction = ""
    if items and is_instruction(items[-1]):
        instruction = text_of(items[-1])
        items = items[:-1]
    transcript = Transcript()
    transcript.previous = previous_block(instruction).strip()
    _carry_date(transcript)
    names: dict[str, str] = {}
    for message in items:
        _add(transcript, message, names)
    return transcript, instruction


def _carry_date(transcript: Transcript) -> None:
    """Facts said before the first session header of this part are dated by the session the
    previous summary ended in (unless this part already set a date)."""
    if not transcript.date and (date := carried_date(transcript.previous)):
        transcript.date, transcript.dated = date, True


def _add(transcript: Transcript, message: Mapping[str, Any], names: dict[str, str]) -> None:
    role = message.get("role")
    text = "" if role == "tool" and is_internal(message) else text_of(message)  # a cleared stub
    transcript.position += 1
    if role in {"user", "assistant", "tool"} and text.strip() and not is_internal(message):
        if role == "tool":
            who = names.get(str(message.get("tool_call_id")), str(message.get("name") or "tool"))
        else:
            who = str(role)
        if not (role == "user" and (is_skills(text) or strip_wrapping(text) is not None)):
            collect_sentences(transcript, text, who)
    if role == "user":
        wrapped = strip_wrapping(marked_body(message))
        if wrapped is not None:
            transcript.previous = _SUMMARY_TAG.sub("", wrapped)
            _carry_date(transcript)
        elif not is_internal(message) and not is_skills(text) and text.strip():
            transcript.users.append(text.strip())
            transcript.stream.append(("user", text))
            transcript.answered = False
    elif role == "assistant":
        if text.strip():
            transcript.assistants.append(text.strip())
            transcript.stream.append(("assistant", text))
            transcript.answered = True
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                name, args = str(function.get("name") or "?"), function.get("arguments")
                names[str(call.get("id"))] = name
                transcript.calls.append((name, args if isinstance(args, str) else str(args)))
                transcript.stream.append(("call", f"{name}({brief_args(args)})"))
    elif role == "tool":
        name = names.get(str(message.get("tool_call_id")), str(message.get("name") or "tool"))
        transcript.results.append((name, text))
        transcript.stream.append(("tool", text))


def brief_args(arguments: object, limit: int = 160) -> str:
    """Tool-call arguments as ``key=value`` pairs, clipped."""
    parsed: object = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return clip_line(arguments, limit)
    if isinstance(parsed, Mapping):
        pairs = ", ".join(f"{k}={clip_line(str(v), 60)}" for k, v in parsed.items())
        return clip_line(pairs, limit)
    return clip_line(str(parsed), limit)
