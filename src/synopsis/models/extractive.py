"""An offline, deterministic summarizer that fills the nine sections from the transcript itself.

:class:`ExtractiveModel` (and its twin :class:`AsyncExtractiveModel`) satisfies the model
protocol, so it stands in wherever an LLM summarizer goes: it is the CLI's default model and
the last fallback when every LLM fails. It reads the summarizer input
(``[persona, *context, instruction]``), quotes rather than paraphrases, and answers with a
``<summary>`` in the same nine sections the instruction asks an LLM for:

1. the first user requests; 2. frequent identifiers and terms; 3. file paths and the tools that
touched them; 4. error outputs and what followed each; 5. counts of turns, tool calls and errors;
6. an ``<all_user_messages>`` block (post-processing back-fills it with the exact texts);
7. TODO-like lines and an unanswered last request; 8. the last assistant text and tool calls;
9. the latest user request, quoted.

A previous summary (the ``<previous_summary>`` block of the incremental instruction, or an
earlier summary message in the context) is merged section by section. It never raises: odd
input gives a shorter summary, not an error. Pure: no I/O, no clock.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from synopsis._flow import cpu
from synopsis.messages import is_internal, marked_body, text_of
from synopsis.models._base import ModelResponse, ModelSettings, Usage
from synopsis.models._clip import clip as _clip
from synopsis.models._clip import clip_line as _clip_line
from synopsis.models._clip import quote as _quote
from synopsis.prompts import CHINESE, ENGLISH, USER_MESSAGES_TAG, PromptSet

__all__ = ["AsyncExtractiveModel", "ExtractiveModel", "extractive_summary"]

_CJK: Final = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_CHAR: Final = re.compile(f"[{_CJK}]")
_CJK_RUN: Final = re.compile(f"[{_CJK}]{{2,}}")
_CJK_STOP: Final = frozenset("的了是在我你他她它们这那就也和与及或把被吗呢吧啊个一不有要会能")
_PREVIOUS_OPEN: Final = "<previous_summary>"
_PREVIOUS_CLOSE: Final = "</previous_summary>"
_SUMMARY_TAG: Final = re.compile(r"</?summary>", re.IGNORECASE)
# A path starts only where a run of path characters starts (``@`` included), so each run is
# tried once; a start after every inner ``@`` made the scan quadratic.
_PATH: Final = re.compile(
    r"(?<![\w/.~@-])(?:~?/|\.{1,2}/)?(?:[\w.@-]+/)*[\w@-]+(?:\.[\w-]+)*"
    r"\.(?:py|pyi|ipynb|js|jsx|ts|tsx|mjs|cjs|go|rs|java|kt|kts|scala|rb|php|cs|c|h|cc|cpp|hpp"
    r"|m|swift|sh|bash|zsh|ps1|sql|md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg|conf|env|lock"
    r"|xml|html|css|scss|vue|svelte|proto|gradle|tf|csv|log|dockerfile)\b"
    r"|(?<![\w/.~@-])(?:[\w.@-]+/)*(?:Dockerfile|Makefile|README|LICENSE)\b"
)
_IDENT: Final = re.compile(r"`([^`\n]{2,60})`|\b([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_]\w*)*)\b")
_CODE_DEF: Final = re.compile(
    r"\b(?:def|class|func|fn|function|interface|struct|type|const|let|var)\s+([A-Za-z_]\w*)"
)
_ERROR: Final = re.compile(
    r"Traceback \(most recent call last\)|\b[A-Z]\w*(?:Error|Exception)\b|\berror\b[:\[]?"
    r"|\bfailed\b|\bfailure\b|\bFAIL\b|exit (?:code|status)[:= ]*[1-9]|\bpanic:|\bfatal:"
    r"|错误|失败|异常|报错",
)
_TODO: Final = re.compile(
    r"^\s*(?:[-*]\s*\[ \]|TODO\b|FIXME\b|(?:[-*]\s*)?(?:next|still need|remaining)\b"
    r"|(?:[-*]\s*)?(?:待办|还需要|接下来|下一步))",
    re.IGNORECASE,
)
# Common words that are never a "key technical concept".
_EN_STOP: Final = frozenset(
    """
    the and for with that this from have has are was were will would could should can not
    you your our they them then than what when where which who how why all any but into
    out over also just like make made use used using let get got its it's now here there
    some more most very been being about after before again file files code please thanks
    true false none null self return import def class
    """.split()  # noqa: SIM905 - a word list reads better as text
)
_SECTION_WEIGHTS: Final = (3, 2, 3, 3, 1, 3, 2, 3, 2)
_MIN_SECTION_CHARS: Final = 60


# ---------------------------------------------------------------------------------------------
# Reading the transcript


@dataclass(slots=True)
class _Transcript:
    """What the sections are built from; filled once by :func:`_read`."""

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


def _is_instruction(message: Mapping[str, Any]) -> bool:
    text = text_of(message) if not is_internal(message) else ""
    return message.get("role") == "user" and "<summary>" in text and USER_MESSAGES_TAG in text


def _previous_block(instruction: str) -> str:
    """The text of the first complete ``<previous_summary>`` block ("" if there is none).

    ``str.find``, not a lazy regex, which rescans the rest from every unclosed opening tag.
    """
    start = instruction.find(_PREVIOUS_OPEN)
    end = instruction.find(_PREVIOUS_CLOSE, start + len(_PREVIOUS_OPEN)) if start >= 0 else -1
    return instruction[start + len(_PREVIOUS_OPEN) : end] if end >= 0 else ""


def _strip_wrapping(text: str) -> str | None:
    """The summary inside a summary message's text, or None if ``text`` is not one."""
    for prompts in (ENGLISH, CHINESE):
        if text.startswith(prompts.summary_preamble):
            body = text[len(prompts.summary_preamble) :]
            body = body.replace(prompts.continue_instruction, "")
            pointer = prompts.transcript_line.split("{path}")[0]
            lines = [line for line in body.splitlines() if not line.startswith(pointer)]
            return "\n".join(lines).strip()
    return None


def _is_skills(text: str) -> bool:
    return any(text.startswith(p.skills_preamble) for p in (ENGLISH, CHINESE))


def _read(messages: Sequence[Mapping[str, Any]]) -> tuple[_Transcript, str]:
    """Split the summarizer input into a transcript and the instruction text."""
    items = [m for m in messages if isinstance(m, Mapping)]
    if items and items[0].get("role") in {"system", "developer"}:
        items = items[1:]
    instruction = ""
    if items and _is_instruction(items[-1]):
        instruction = text_of(items[-1])
        items = items[:-1]
    transcript = _Transcript()
    transcript.previous = _previous_block(instruction).strip()
    names: dict[str, str] = {}
    for message in items:
        _add(transcript, message, names)
    return transcript, instruction


def _add(transcript: _Transcript, message: Mapping[str, Any], names: dict[str, str]) -> None:
    role = message.get("role")
    text = "" if role == "tool" and is_internal(message) else text_of(message)  # a cleared stub
    if role == "user":
        wrapped = _strip_wrapping(marked_body(message))
        if wrapped is not None:
            transcript.previous = _SUMMARY_TAG.sub("", wrapped)
        elif not is_internal(message) and not _is_skills(text) and text.strip():
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
                transcript.stream.append(("call", f"{name}({_brief_args(args)})"))
    elif role == "tool":
        name = names.get(str(message.get("tool_call_id")), str(message.get("name") or "tool"))
        transcript.results.append((name, text))
        transcript.stream.append(("tool", text))


def _brief_args(arguments: object, limit: int = 160) -> str:
    """Tool-call arguments as ``key=value`` pairs, clipped."""
    parsed: object = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return _clip_line(arguments, limit)
    if isinstance(parsed, Mapping):
        pairs = ", ".join(f"{k}={_clip_line(str(v), 60)}" for k, v in parsed.items())
        return _clip_line(pairs, limit)
    return _clip_line(str(parsed), limit)


# ---------------------------------------------------------------------------------------------
# Small text helpers (clipping on word boundaries is in synopsis.models._clip)


def _count(number: int, noun: str, plural: str | None = None) -> str:
    """``1 user message``, ``2 user messages``."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def _is_chinese(text: str) -> bool:
    sample = text[:4000]
    cjk = len(_CJK_CHAR.findall(sample))
    return cjk > 0 and cjk * 4 >= len(sample.replace(" ", "")) * 1


# ---------------------------------------------------------------------------------------------
# Sections


def _primary(t: _Transcript) -> list[str]:
    lines = [_quote(t.users[0], 700)] if t.users else []
    lines.extend(_quote(text, 300) for text in t.users[1:3])
    return lines


def _concepts(t: _Transcript) -> list[str]:
    texts = [*t.users, *t.assistants, *(a for _, a in t.calls), *(r[:2000] for _, r in t.results)]
    counts: Counter[str] = Counter()
    cjk: Counter[str] = Counter()
    for text in texts:
        counts.update(_technical_terms(text))
        cjk.update(_cjk_terms(text))
    for term, n in _maximal(cjk).items():
        counts[term] += n
    ranked = sorted(counts.items(), key=lambda item: (-item[1], -len(item[0])))
    chosen = [t for t, n in ranked if n >= 3 or _looks_technical(t) or _CJK_CHAR.match(t)]
    return [f"- {term}" for term in _drop_contained(chosen[:60])[:15]]


def _maximal(counts: Counter[str]) -> dict[str, int]:
    """Repeated Chinese chunks, minus those that only occur inside a longer repeated one."""
    repeated = {term: n for term, n in counts.items() if n >= 2}
    # The count of the most frequent longer chunk around each substring, not a pairwise test.
    around: dict[str, int] = {}
    for other, m in repeated.items():
        for size in range(1, len(other)):
            for start in range(len(other) - size + 1):
                inner = other[start : start + size]
                around[inner] = max(around.get(inner, 0), m)
    return {term: n for term, n in repeated.items() if around.get(term, 0) * 4 < n * 3}


def _looks_technical(term: str) -> bool:
    return (
        "_" in term
        or "." in term
        or any(c.isdigit() for c in term)
        or any(c.isupper() for c in term[1:])
        or (term.isupper() and len(term) >= 3)
        or term.startswith("`")
    )


def _technical_terms(text: str) -> list[str]:
    terms = []
    paths = " ".join(m.group(0) for m in _PATH.finditer(text))
    for match in _IDENT.finditer(text):
        quoted, word = match.group(1), match.group(2)
        term = quoted.strip() if quoted else word
        if not term or len(term) < 3 or term.lower() in _EN_STOP or term in paths:
            continue
        if quoted or _looks_technical(term) or len(term) >= 5:
            terms.append(term)
    return terms


def _cjk_terms(text: str) -> list[str]:
    """Two- to four-character chunks of Chinese runs, without function characters at the edges."""
    terms = []
    for run in _CJK_RUN.findall(text):
        for size in (2, 3, 4):
            for start in range(len(run) - size + 1):
                chunk = run[start : start + size]
                if chunk[0] not in _CJK_STOP and chunk[-1] not in _CJK_STOP:
                    terms.append(chunk)
    return terms


def _drop_contained(terms: list[str]) -> list[str]:
    """Drop a term when a higher-ranked one contains it (``用户`` under ``用户消息``)."""
    kept: list[str] = []
    for term in terms:
        if not any(term in other or other in term for other in kept):
            kept.append(term)
    return kept


def _files(t: _Transcript) -> list[str]:
    touched: dict[str, list[str]] = {}
    for name, arguments in t.calls:
        for path in _PATH.findall(arguments):
            tools = touched.setdefault(path, [])
            if name not in tools:
                tools.append(name)
    for text in [*t.users, *t.assistants, *(r[:4000] for _, r in t.results)]:
        for path in _PATH.findall(text):
            touched.setdefault(path, [])
    lines = [
        f"- {path}" + (f" ({', '.join(tools)})" if tools else "")
        for path, tools in list(touched.items())[-25:]
    ]
    defs = Counter(
        m for text in [*t.assistants, *(a for _, a in t.calls)] for m in _CODE_DEF.findall(text)
    )
    if defs:
        lines.append("- " + ", ".join(f"`{name}`" for name, _ in defs.most_common(12)))
    return lines


_EXCEPTION_LINE: Final = re.compile(r"^\s*[\w.]*(?:Error|Exception)\b")


def _error_line(text: str) -> str:
    """The most telling line of an error output."""
    # In a traceback the exception line at the end says what went wrong, not the header.
    exceptions = [line for line in text.splitlines() if _EXCEPTION_LINE.match(line)]
    if exceptions:
        return _clip_line(exceptions[-1], 240)
    lines = [line for line in text.splitlines() if _ERROR.search(line)]
    return _clip_line(lines[0] if lines else text, 240)


def _errors(t: _Transcript, keep: int = 12) -> list[str]:
    """The last ``keep`` error outputs, each with the assistant text or call that followed it."""
    lines: list[str] = []
    followed = ""  # newest first, so this is the first reply after the entry at hand
    for role, text in reversed(t.stream):
        if role in {"assistant", "call"}:
            followed = text
        elif role in {"tool", "user"} and _ERROR.search(text):
            entry = f"- {_error_line(text)}"
            if followed:
                entry += f"\n  → {_clip_line(followed, 200)}"
            lines.append(entry)
            if len(lines) == keep:
                break
    return lines[::-1]


def _problem_solving(t: _Transcript, zh: bool) -> list[str]:
    tools = Counter(name for name, _ in t.calls)
    used = ", ".join(f"{name}×{n}" for name, n in tools.most_common(8))
    errors = sum(1 for role, text in t.stream if role == "tool" and _ERROR.search(text))
    if zh:
        line = (
            f"- 用户消息 {len(t.users)} 条，助手回复 {len(t.assistants)} 条，"
            f"工具调用 {len(t.calls)} 次"
        )
        return [line + (f"（{used}）" if used else ""), f"- 含错误的工具结果 {errors} 个"]
    replies = _count(len(t.assistants), "assistant reply", "assistant replies")
    line = (
        f"- {_count(len(t.users), 'user message')}, {replies}, {_count(len(t.calls), 'tool call')}"
    )
    return [line + (f" ({used})" if used else ""), f"- {_count(errors, 'tool result')} with errors"]


def _user_block(t: _Transcript) -> list[str]:
    items = [f"- {_clip_line(text, 300)}" for text in t.users[-30:]]
    return [f"<{USER_MESSAGES_TAG}>", *items, f"</{USER_MESSAGES_TAG}>"]


_INLINE_TODO: Final = re.compile(r"\b(?:TODO|FIXME)\b")


def _todos(text: str) -> list[str]:
    found = []
    for line in text.splitlines():
        inline = _INLINE_TODO.search(line)
        if _TODO.match(line):
            found.append(line.strip())
        elif inline:
            found.append(line[inline.start() :].strip())
    return found


def _pending(t: _Transcript, zh: bool) -> list[str]:
    found: list[str] = []
    for role, text in t.stream[-40:]:
        if role in {"user", "assistant"}:
            found.extend(_todos(text))
    lines = [f"- {_clip_line(item.lstrip('-* '), 200)}" for item in dict.fromkeys(found)][-10:]
    if t.users and not t.answered:
        label = "尚未答复的最新请求：" if zh else "Latest request, not yet answered:"
        lines.append(f"- {label} {_clip_line(t.users[-1], 300)}")
    return lines


def _current(t: _Transcript) -> list[str]:
    lines = [_quote(t.assistants[-1], 900)] if t.assistants else []
    lines.extend(f"- {name}({_brief_args(args)})" for name, args in t.calls[-5:])
    if t.results:
        name, text = t.results[-1]
        lines.append(f"- {name} → {_clip_line(text, 300)}")
    return lines


def _next_step(t: _Transcript, zh: bool) -> list[str]:
    if not t.users:
        return []
    label = "继续处理用户最新的请求：" if zh else "Continue with the user's latest request:"
    return [label, _quote(t.users[-1], 600)]


def _sections(t: _Transcript, zh: bool) -> list[list[str]]:
    return [
        _primary(t),
        _concepts(t),
        _files(t),
        _errors(t),
        _problem_solving(t, zh),
        _user_block(t),
        _pending(t, zh),
        _current(t),
        _next_step(t, zh),
    ]


# ---------------------------------------------------------------------------------------------
# Merging with a previous summary


def _previous_sections(previous: str) -> list[str]:
    """The bodies of sections 1-9 of an earlier summary (empty strings where missing)."""
    bodies = [""] * 9
    marks = list(re.finditer(r"^[ \t#*]*([1-9])[.、:：)][^\n]*$", previous, re.MULTILINE))
    expected = 1
    starts: list[tuple[int, re.Match[str]]] = []
    for mark in marks:  # take headings in order 1..9, skipping numbered list items
        if int(mark.group(1)) == expected:
            starts.append((expected, mark))
            expected += 1
    for position, (number, mark) in enumerate(starts):
        end = starts[position + 1][1].start() if position + 1 < len(starts) else len(previous)
        bodies[number - 1] = previous[mark.end() : end].strip()
    if not starts and previous.strip():
        bodies[4] = previous.strip()  # unstructured: keep it under problem solving
    return bodies


def _merge(old: str, new: list[str], number: int) -> list[str]:
    """Section ``number``: what the earlier summary said, combined with the new lines."""
    if not old:
        return new
    if number == 6:  # post-processing rebuilds the block from both summaries' messages
        return new if len(new) > 2 else [old]
    if number == 5:
        return [old, *new]
    if number in {1, 2, 3, 4}:
        old_lines = old.splitlines()
        return [*old_lines, *(line for line in new if line not in old_lines)]
    return new or [old]  # 7-9 describe the present: the newer view wins


# ---------------------------------------------------------------------------------------------
# Rendering within a size limit


def _render(prompts: PromptSet, bodies: Sequence[str]) -> str:
    parts = [f"{prompts.section_heading(n)}\n{body}".rstrip() for n, body in enumerate(bodies, 1)]
    return "<summary>\n" + "\n\n".join(parts) + "\n</summary>"


def _fit(bodies: list[str], limit: int, prompts: PromptSet) -> list[str]:
    """Shrink the sections until the rendered summary has at most ``limit`` characters."""
    overhead = len(_render(prompts, [""] * 9))
    room = max(limit - overhead, 9 * _MIN_SECTION_CHARS)
    total_weight = sum(_SECTION_WEIGHTS)
    if sum(len(b) for b in bodies) <= room:
        return bodies
    shares = [max(_MIN_SECTION_CHARS, room * w // total_weight) for w in _SECTION_WEIGHTS]
    fitted = []
    for number, (body, share) in enumerate(zip(bodies, shares, strict=True), 1):
        if len(body) <= share:
            fitted.append(body)
        elif number == 6:
            fitted.append(_shrink_block(body, share))
        else:
            fitted.append(_clip(body, share))
    return fitted


def _shrink_block(body: str, limit: int) -> str:
    """Keep the block's tags and its newest items that fit."""
    lines = body.splitlines()
    items = [line for line in lines[1:-1] if line.strip()]
    kept: list[str] = []
    size = len(lines[0]) + len(lines[-1]) + 2 if lines else 0
    for item in reversed(items):
        if size + len(item) + 1 > limit:
            break
        kept.append(item)
        size += len(item) + 1
    return "\n".join([f"<{USER_MESSAGES_TAG}>", *kept[::-1], f"</{USER_MESSAGES_TAG}>"])


# ---------------------------------------------------------------------------------------------
# Entry points


def extractive_summary(
    messages: Sequence[Mapping[str, Any]],
    *,
    max_chars: int = 16_000,
    prompts: PromptSet | None = None,
) -> str:
    """A ``<summary>`` of the summarizer input ``messages``, built without any model.

    ``prompts`` picks the section titles; by default the language of the instruction (or of
    the users' messages) decides. Never raises.
    """
    try:
        return _summarize(messages, max_chars=max_chars, prompts=prompts)
    except Exception:  # the model of last resort must answer whatever it is given
        return _render(prompts or ENGLISH, [""] * 9)


def _summarize(
    messages: Sequence[Mapping[str, Any]], *, max_chars: int, prompts: PromptSet | None
) -> str:
    transcript, instruction = _read(messages)
    if prompts is None:
        sample = instruction or " ".join(transcript.users[-10:])
        prompts = CHINESE if _is_chinese(sample) else ENGLISH
    zh = prompts.language == "zh"
    new = _sections(transcript, zh)
    old = _previous_sections(transcript.previous) if transcript.previous else [""] * 9
    bodies = ["\n".join(_merge(o, n, k)) for k, (o, n) in enumerate(zip(old, new, strict=True), 1)]
    return _render(prompts, _fit(bodies, max_chars, prompts))


def _response(text: str, name: str) -> ModelResponse:
    size = max(1, len(text.encode()) // 4)
    return ModelResponse(
        message={"role": "assistant", "content": text},
        model=name,
        usage=Usage(prompt_tokens=0, completion_tokens=size, total_tokens=size),
    )


def _limit(max_chars: int, settings: ModelSettings | None) -> int:
    # A token cap from the caller bounds the output too; 2 characters per token is on the safe
    # side for English and generous for Chinese.
    if settings is not None and settings.max_tokens:
        return max(600, min(max_chars, settings.max_tokens * 2))
    return max_chars


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtractiveModel:
    """A summarizer model that needs no LLM: deterministic, offline, instant.

    ``max_chars`` bounds the answer (``settings.max_tokens`` may lower it further);
    ``prompts`` fixes the section language instead of detecting it.
    """

    name: str = "extractive"
    max_chars: int = 16_000
    prompts: PromptSet | None = None
    context_window: int | None = None

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        """Summarize ``messages`` (a summarizer input) into a ``<summary>`` answer."""
        limit = _limit(self.max_chars, settings)
        return _response(
            extractive_summary(messages, max_chars=limit, prompts=self.prompts), self.name
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AsyncExtractiveModel:
    """The async twin of :class:`ExtractiveModel`."""

    name: str = "extractive"
    max_chars: int = 16_000
    prompts: PromptSet | None = None
    context_window: int | None = None

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        """Summarize ``messages`` (a summarizer input) into a ``<summary>`` answer (in the
        worker pool of :func:`~synopsis._flow.offloading` when a service set one)."""
        limit = _limit(self.max_chars, settings)
        text = await cpu(
            functools.partial(extractive_summary, messages, max_chars=limit, prompts=self.prompts)
        )
        return _response(text, self.name)
