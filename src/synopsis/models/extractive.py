"""An offline, deterministic summarizer that fills the nine sections from the transcript itself.

:class:`ExtractiveModel` (and its twin :class:`AsyncExtractiveModel`) satisfies the model
protocol, so it stands in wherever an LLM summarizer goes: it is the library's and the CLI's
default model and the last fallback when every LLM fails. It reads the summarizer input
(``[persona, *context, instruction]``), quotes rather than paraphrases, and answers with a
``<summary>`` in the same nine sections the instruction asks an LLM for:

1. the first user requests; 2. key terms (identifiers; Chinese phrases between function
characters, never overlapping windows); 3. file paths and the tools that touched them; 4. error
outputs and what followed each; 5. counts of turns, tool calls and errors, then the **facts**:
whole sentences from both speakers and from tool output that carry names, numbers, dates,
places, decisions, errors and fixes, each tagged with the session date it was said under (or
its position when the history has no dates), no sentence twice, chosen by how much they say
for what they cost until the summary's budget is spent, printed oldest first; 6. an
``<all_user_messages>`` block (post-processing back-fills it with the exact texts); 7. TODO-like
lines and an unanswered last request; 8. the last assistant text and tool calls; 9. the latest
user request, quoted.

A previous summary (the ``<previous_summary>`` block of the incremental instruction, or an
earlier summary message in the context) is merged section by section; its facts compete with
the new ones for the budget. It never raises: odd input gives a shorter summary, not an error.
Pure: no I/O, no clock. Linear in the input (sorting the candidate sentences aside).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from synopsis._flow import cpu
from synopsis.models._base import ModelResponse, ModelSettings, Usage
from synopsis.models._clip import clip as _clip
from synopsis.models._clip import clip_line as _clip_line
from synopsis.models._clip import quote as _quote
from synopsis.models._facts import (
    CJK_CHAR,
    EN_STOP,
    ERROR,
    choose_facts,
    cjk_phrases,
    collect_sentences,
    date_line,
    fact_text,
    group_by_tag,
    ungroup,
)
from synopsis.models._transcript import Transcript, brief_args, read_transcript
from synopsis.prompts import CHINESE, ENGLISH, USER_MESSAGES_TAG, PromptSet
from synopsis.tokens import default_estimate

__all__ = ["AsyncExtractiveModel", "ExtractiveModel", "extractive_summary", "fact_digest"]

_MAX_PHRASE: Final = 16
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
#: A definition starts its line (after indentation or ``export``/``async``): prose such as
#: "the type of paint" or "let them know" is no code.
_CODE_DEF: Final = re.compile(
    r"^[ \t]*(?:export[ \t]+)?(?:async[ \t]+)?"
    r"(?:def|class|func|fn|function|interface|struct|type|const|let|var)[ \t]+([A-Za-z_]\w*)",
    re.MULTILINE,
)
_TODO: Final = re.compile(
    r"^\s*(?:[-*]\s*\[ \]|TODO\b|FIXME\b|(?:[-*]\s*)?(?:next|still need|remaining)\b"
    r"|(?:[-*]\s*)?(?:待办|还需要|接下来|下一步))",
    re.IGNORECASE,
)
#: Code in a sentence: a call, a snake_case name, an arrow, an assignment, a path with a
#: line number (a grep hit, a traceback frame). A digest keeps prose facts only: sections 3,
#: 4 and 8 of a summary cover code, errors and tool calls.
_CODE_LIKE: Final = re.compile(
    r"\w\(|\b[A-Za-z]\w*_\w+|->|=>|[^=!<>]=[^=]|::|\.\w+:\d+"
    r'|\.\w+", line \d+|^\s*(?:def|class)\b'
)
_MIN_SECTION_CHARS: Final = 60
#: Facts printed under one heading per session date (or position), not a tag on each line.
_GROUP_FACTS: Final = True
#: The share of the summary's budget the sections other than the facts may take at most.
_FIXED_SHARE: Final = 0.4
#: What each section other than the facts may take at most, in characters.
_SECTION_CAPS: Final = (700, 300, 700, 900, 200, 600, 500, 800, 300)


# ---------------------------------------------------------------------------------------------
# Small text helpers (clipping on word boundaries is in synopsis.models._clip)


def _count(number: int, noun: str, plural: str | None = None) -> str:
    """``1 user message``, ``2 user messages``."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def _is_chinese(text: str) -> bool:
    sample = text[:4000]
    cjk = len(CJK_CHAR.findall(sample))
    return cjk > 0 and cjk * 4 >= len(sample.replace(" ", "")) * 1


# ---------------------------------------------------------------------------------------------
# Sections


def _primary(t: Transcript) -> list[str]:
    lines = [_quote(t.users[0], 700)] if t.users else []
    lines.extend(_quote(text, 300) for text in t.users[1:3])
    return lines


def _concepts(t: Transcript) -> list[str]:
    texts = [*t.users, *t.assistants, *(a for _, a in t.calls), *(r[:2000] for _, r in t.results)]
    counts: Counter[str] = Counter()
    cjk: Counter[str] = Counter()
    for text in texts:
        counts.update(_technical_terms(text))
        cjk.update(_cjk_terms(text))
    counts.update(_maximal(cjk))
    ranked = sorted(counts.items(), key=lambda item: (-item[1], -len(item[0])))
    chosen = [t for t, n in ranked if n >= 3 or _looks_technical(t) or CJK_CHAR.match(t)]
    return [f"- {term}" for term in _drop_contained(chosen[:60])[:15]]


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
        if not term or len(term) < 3 or term.lower() in EN_STOP or term in paths:
            continue
        if quoted or _looks_technical(term) or len(term) >= 5:
            terms.append(term)
    return terms


def _cjk_terms(text: str) -> set[str]:
    """Candidate Chinese terms of one text: the pieces (two to eight characters) of its
    phrases. Which of them are words is decided by repetition (:func:`_maximal`)."""
    terms: set[str] = set()
    for phrase in cjk_phrases(text):
        phrase = phrase[:_MAX_PHRASE]
        for size in range(2, min(len(phrase), 8) + 1):
            terms.update(phrase[i : i + size] for i in range(len(phrase) - size + 1))
    return terms


def _maximal(counts: Counter[str]) -> dict[str, int]:
    """Chinese terms repeated across messages, minus those that only occur inside a longer
    repeated one: what repeats as a whole is a word or a phrase, its pieces are not."""
    repeated = {term: n for term, n in counts.items() if n >= 2}
    around: dict[str, int] = {}
    for other, m in repeated.items():
        for size in range(2, len(other)):
            for start in range(len(other) - size + 1):
                inner = other[start : start + size]
                around[inner] = max(around.get(inner, 0), m)
    return {term: n for term, n in repeated.items() if around.get(term, 0) * 4 < n * 3}


def _overlaps(a: str, b: str) -> bool:
    """Whether the end of one is the start of the other (``上午游览`` / ``午游览断``)."""
    shorter = min(len(a), len(b))
    return any(a[-k:] == b[:k] or b[-k:] == a[:k] for k in range(1, shorter))


def _drop_contained(terms: list[str]) -> list[str]:
    """Drop a term when a higher-ranked one contains it (``用户`` under ``用户消息``) or, in
    Chinese, overlaps it."""
    kept: list[str] = []
    for term in terms:
        cjk = CJK_CHAR.match(term) is not None
        if not any(
            term in other or other in term or (cjk and _overlaps(term, other)) for other in kept
        ):
            kept.append(term)
    return kept


def _files(t: Transcript) -> list[str]:
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
    lines = [line for line in text.splitlines() if ERROR.search(line)]
    return _clip_line(lines[0] if lines else text, 240)


def _errors(t: Transcript, keep: int = 12) -> list[str]:
    """The last ``keep`` error outputs, each with the assistant text or call that followed it."""
    lines: list[str] = []
    followed = ""  # newest first, so this is the first reply after the entry at hand
    for role, text in reversed(t.stream):
        if role in {"assistant", "call"}:
            followed = text
        elif role in {"tool", "user"} and ERROR.search(text):
            entry = f"- {_error_line(text)}"
            if followed:
                entry += f"\n  → {_clip_line(followed, 200)}"
            lines.append(entry)
            if len(lines) == keep:
                break
    return lines[::-1]


def _facts_label(zh: bool) -> str:
    return "事实（按时间先后）：" if zh else "Facts, oldest first:"


def _problem_solving(t: Transcript, zh: bool) -> list[str]:
    tools = Counter(name for name, _ in t.calls)
    used = ", ".join(f"{name}×{n}" for name, n in tools.most_common(8))
    errors = sum(1 for role, text in t.stream if role == "tool" and ERROR.search(text))
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


def _user_block(t: Transcript) -> list[str]:
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


def _pending(t: Transcript, zh: bool) -> list[str]:
    found: list[str] = []
    for role, text in t.stream[-40:]:
        if role in {"user", "assistant"}:
            found.extend(_todos(text))
    lines = [f"- {_clip_line(item.lstrip('-* '), 200)}" for item in dict.fromkeys(found)][-10:]
    if t.users and not t.answered:
        label = "尚未答复的最新请求：" if zh else "Latest request, not yet answered:"
        lines.append(f"- {label} {_clip_line(t.users[-1], 300)}")
    return lines


def _current(t: Transcript) -> list[str]:
    lines = [_quote(t.assistants[-1], 900)] if t.assistants else []
    lines.extend(f"- {name}({brief_args(args)})" for name, args in t.calls[-5:])
    if t.results:
        name, text = t.results[-1]
        lines.append(f"- {name} → {_clip_line(text, 300)}")
    return lines


def _next_step(t: Transcript, zh: bool) -> list[str]:
    if not t.users:
        return []
    label = "继续处理用户最新的请求：" if zh else "Continue with the user's latest request:"
    # Clipped: the user's words are quoted whole in section 6, and the newest request stays
    # in the context as its own message.
    return [label, _quote(t.users[-1], 300)]


def _sections(t: Transcript, zh: bool) -> list[list[str]]:
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
    if number == 5:  # the counts describe the new part; the facts are merged apart
        return new
    if number in {1, 2, 3, 4}:
        old_lines = old.splitlines()
        return [*old_lines, *(line for line in new if line not in old_lines)]
    return new or [old]  # 7-9 describe the present: the newer view wins


def _old_facts(body: str) -> list[str]:
    """The fact lines of an earlier summary's section 5 (after its facts label)."""
    lines = body.splitlines()
    for index, line in enumerate(lines):
        if line.strip() in {_facts_label(False), _facts_label(True)}:
            return ungroup(lines[index + 1 :])
    return []


# ---------------------------------------------------------------------------------------------
# Rendering within a size limit


def _render(prompts: PromptSet, bodies: Sequence[str]) -> str:
    parts = [f"{prompts.section_heading(n)}\n{body}".rstrip() for n, body in enumerate(bodies, 1)]
    return "<summary>\n" + "\n\n".join(parts) + "\n</summary>"


def _fit(bodies: list[str], room: int) -> list[str]:
    """Each section within its cap (scaled down to ``room`` characters in all)."""
    scale = min(1.0, room / sum(_SECTION_CAPS))
    fitted = []
    for number, body in enumerate(bodies, 1):
        cap = max(_MIN_SECTION_CHARS, int(_SECTION_CAPS[number - 1] * scale))
        if len(body) <= cap:
            fitted.append(body)
        elif number == 6:
            fitted.append(_shrink_block(body, cap))
        else:
            fitted.append(_clip(body, cap))
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
    max_tokens: int | None = None,
    prompts: PromptSet | None = None,
) -> str:
    """A ``<summary>`` of the summarizer input ``messages``, built without any model, of at
    most ``max_chars`` characters and (estimated) ``max_tokens`` tokens.

    ``prompts`` picks the section titles; by default the language of the instruction (or of
    the users' messages) decides. Never raises.
    """
    try:
        return _summarize(messages, max_chars=max_chars, max_tokens=max_tokens, prompts=prompts)
    except Exception:  # the model of last resort must answer whatever it is given
        return _render(prompts or ENGLISH, [""] * 9)


def fact_digest(text: str, *, tokens: int, who: str = "tool") -> tuple[str, list[str]]:
    """What a cleared tool output keeps of its ``text``: the session date it opens with ("" if
    none) and its sentences that say the most within ``tokens`` (estimated), each rendered
    ``- who: sentence`` (the speaker named at the start of its line, else ``who``), in their
    order, none twice. Only prose counts (no calls, snake_case names, assignments or
    ``path:line``), and only in an output that is mostly prose (a log of what was said, a
    document, a page; not code, a test run or a listing, whose stub stays bare). The
    summary's own fact selection, so tier 1 and the summary agree on what a fact is. Pure;
    never raises."""
    if tokens <= 0 or not text.strip():
        return "", []
    try:
        transcript = Transcript()
        transcript.position = 1
        collect_sentences(transcript, text, who)
        prose = [s for s in transcript.sentences if not _CODE_LIKE.search(s.text)]
        if len(prose) * 2 < sum(1 for line in text.splitlines() if line.strip()):
            return transcript.date, []
        lines = [f"- {s.who}: {s.text}" for s in prose]
        texts = [s.text for s in prose]
        return transcript.date, choose_facts(lines, texts, tokens=tokens, chars=4 * tokens)
    except Exception:  # a digest is a bonus: odd input gives none, never an error
        return "", []


def _summarize(
    messages: Sequence[Mapping[str, Any]],
    *,
    max_chars: int,
    max_tokens: int | None,
    prompts: PromptSet | None,
) -> str:
    transcript, instruction = read_transcript(messages)
    if prompts is None:
        sample = instruction or " ".join(transcript.users[-10:])
        prompts = CHINESE if _is_chinese(sample) else ENGLISH
    zh = prompts.language == "zh"
    new = _sections(transcript, zh)
    old = _previous_sections(transcript.previous) if transcript.previous else [""] * 9
    bodies = ["\n".join(_merge(o, n, k)) for k, (o, n) in enumerate(zip(old, new, strict=True), 1)]
    tokens = max_tokens if max_tokens is not None else max_chars
    room = int(min(max_chars, 4 * tokens) * _FIXED_SHARE)
    bodies = _fit(bodies, room)
    if transcript.date:  # after fitting: the next update needs it whole
        bodies[4] = f"{bodies[4]}\n{date_line(transcript.date, zh)}".strip()
    label = _facts_label(zh)
    bodies[4] = f"{bodies[4]}\n{label}".strip()
    fixed = _render(prompts, bodies)
    lines = [*_old_facts(old[4]), *(s.line(transcript.dated) for s in transcript.sentences)]
    facts = choose_facts(
        lines,
        [fact_text(line) for line in lines],
        tokens=tokens - default_estimate(fixed),
        chars=max_chars - len(fixed),
        grouped=_GROUP_FACTS,
    )
    if not facts:
        bodies[4] = bodies[4][: -len(label)].rstrip()
    else:
        bodies[4] = "\n".join([bodies[4], *(group_by_tag(facts) if _GROUP_FACTS else facts)])
    text = _render(prompts, bodies)
    if len(text) > max_chars:  # only when the sections alone were over (a tiny max_chars)
        text = _render(prompts, _fit(bodies, max_chars - len(_render(prompts, [""] * 9))))
    return text


def _response(text: str, name: str) -> ModelResponse:
    size = default_estimate(text)
    return ModelResponse(
        message={"role": "assistant", "content": text},
        model=name,
        usage=Usage(prompt_tokens=0, completion_tokens=size, total_tokens=size),
    )


#: The fewest tokens an answer is given, whatever ``max_tokens`` says: the nine headings alone
#: take about 60.
_MIN_TOKENS: Final = 300


def _answer(model: ExtractiveModel | AsyncExtractiveModel, messages: Any, settings: Any) -> Any:
    """The answer within ``max_chars`` and ``settings.max_tokens`` (estimated tokens)."""
    tokens = settings.max_tokens if settings is not None and settings.max_tokens else None
    text = extractive_summary(
        messages,
        max_chars=model.max_chars,
        max_tokens=None if tokens is None else max(_MIN_TOKENS, tokens),
        prompts=model.prompts,
    )
    return _response(text, model.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtractiveModel:
    """A summarizer model that needs no LLM: deterministic, offline, instant.

    ``max_chars`` bounds the answer, and ``settings.max_tokens`` (the summarizer's answer
    budget) bounds its estimated tokens; ``prompts`` fixes the section language instead of
    detecting it.
    """

    name: str = "extractive"
    max_chars: int = 16_000
    prompts: PromptSet | None = None
    context_window: int | None = None

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        """Summarize ``messages`` (a summarizer input) into a ``<summary>`` answer."""
        response: ModelResponse = _answer(self, messages, settings)
        return response


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
        response: ModelResponse = await cpu(functools.partial(_answer, self, messages, settings))
        return response
