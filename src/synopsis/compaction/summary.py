"""Turning a summarizer's answer into the summary message that replaces the history.

Steps, each a pure function: :func:`validate_summary_response` (reject empty answers and tool
calls), :func:`extract_summary` (keep the ``<summary>`` part, drop the ``<analysis>``
scratchpad), :func:`fill_user_messages` (overwrite the model's recollection of what the user
said with the real messages, within a token budget) and :func:`build_summary_message` (wrap it
in the preamble and continue instruction, inside the summary marker that makes it internal).
:func:`finalize_summary` runs the last three in order.

Pure: no I/O, no clock. Token budgets use the ``estimate`` callable the caller passes in.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from synopsis.messages import (
    content_type,
    is_real_user_message,
    mark,
    marked_body,
    media_parts,
    text_of,
)
from synopsis.prompts import CHINESE, ENGLISH, USER_MESSAGES_TAG, PromptSet
from synopsis.summarizer import extract_summary
from synopsis.tokens import Estimator

__all__ = [
    "DEFAULT_USER_MESSAGES_BUDGET",
    "NOTICE_KIND",
    "QUOTING_KINDS",
    "SUMMARY_KIND",
    "build_summary_message",
    "collect_user_messages",
    "fill_user_messages",
    "finalize_summary",
    "longest_fitting_prefix",
    "parse_user_messages_block",
    "spaced_sections",
    "trim_middle",
    "user_messages_block",
]


DEFAULT_USER_MESSAGES_BUDGET: Final = 30_000
#: The marker kinds of a summary message and of the truncation fallback's notice.
SUMMARY_KIND: Final = "summary"
NOTICE_KIND: Final = "notice"
#: Kinds of internal messages whose ``<all_user_messages>`` block quotes what the user said:
#: the next compaction carries the quotes forward.
QUOTING_KINDS: Final = frozenset({SUMMARY_KIND, NOTICE_KIND})
_FLAGS: Final = re.IGNORECASE | re.DOTALL
_OPEN_TAG: Final = f"<{USER_MESSAGES_TAG}>"
_CLOSE_TAG: Final = f"</{USER_MESSAGES_TAG}>"
# Non-greedy and "tempered": the body may not contain another opening tag, so a tag the model
# merely names earlier (in prose) can never make a match that swallows the text in between.
_USER_BLOCK: Final = re.compile(
    rf"<{USER_MESSAGES_TAG}>((?:(?!<{USER_MESSAGES_TAG}>).)*?)</{USER_MESSAGES_TAG}>", _FLAGS
)
_TAG_IN_TEXT: Final = re.compile(rf"<(/?){USER_MESSAGES_TAG}>", re.IGNORECASE)
_ESCAPED_TAG: Final = re.compile(rf"&lt;(/?){USER_MESSAGES_TAG}&gt;", re.IGNORECASE)
# Possessive ``*+``: the blanks before and after ``#``/``**`` are never given back, so a long run
# of blanks is crossed once instead of being split every way between adjacent ``[ \t]*``.
_HEADING: Final = r"^[ \t]*+(?:#{{1,6}}[ \t]*+)?(?:\*\*)?[ \t]*+{n}[.、:：)][^\n]*$"
_ITEM_PREFIX: Final = "- "
_CONTINUATION: Final = "  "


# ---------------------------------------------------------------------------------------------
# Trimming to a token budget


def longest_fitting_prefix(text: str, limit: int, *, fits: Callable[[str], bool]) -> int:
    """The largest ``n <= limit`` for which ``fits(text[:n])`` holds (0 if none).

    A binary search: ``fits`` is assumed monotone (a longer prefix never costs fewer tokens).
    """
    low, high = 0, min(limit, len(text))
    while low < high:
        middle = (low + high + 1) // 2
        if fits(text[:middle]):
            low = middle
        else:
            high = middle - 1
    return low


def trim_middle(text: str, budget: int, *, estimate: Estimator, prompts: PromptSet) -> str | None:
    """``text`` cut to ``budget`` tokens as head + truncation marker + tail; None if hopeless.

    Keeps as much as fits, half from the start (what was asked) and half from the end (often
    the actual question after a paste). None when the budget cannot hold even one character
    of the text besides the marker.
    """
    if not text or budget <= 0:
        return None
    if estimate(text) <= budget:
        return text

    def candidate(keep: int) -> str:
        head, tail = (keep + 1) // 2, keep // 2
        marker = prompts.truncation(len(text) - keep)
        return f"{text[:head]}{marker}{text[len(text) - tail :]}"

    keep = longest_fitting_prefix(
        text, len(text) - 1, fits=lambda prefix: estimate(candidate(len(prefix))) <= budget
    )
    return candidate(keep) if keep > 0 else None


# ---------------------------------------------------------------------------------------------
# The user-messages block


def _select(
    user_messages: Sequence[str], budget: int, estimate: Estimator, prompts: PromptSet
) -> tuple[list[str], bool]:
    """Newest first within ``budget``; returns (chosen oldest first, whether any was lost)."""
    texts = [t for t in user_messages if t.strip()]
    chosen: list[str] = []
    remaining = budget
    for position in range(len(texts) - 1, -1, -1):
        text = texts[position]
        cost = estimate(text)
        if cost <= remaining:
            chosen.append(text)
            remaining -= cost
            continue
        trimmed = trim_middle(text, remaining, estimate=estimate, prompts=prompts)
        if trimmed is not None:
            chosen.append(trimmed)
        return chosen[::-1], True
    return chosen[::-1], False


def _escape(text: str) -> str:
    return _TAG_IN_TEXT.sub(lambda m: f"&lt;{m.group(1)}{USER_MESSAGES_TAG}&gt;", text)


def _unescape(text: str) -> str:
    return _ESCAPED_TAG.sub(lambda m: f"<{m.group(1)}{USER_MESSAGES_TAG}>", text)


def _format_item(text: str) -> str:
    lines = _escape(text).split("\n")
    return "\n".join([_ITEM_PREFIX + lines[0], *(_CONTINUATION + line for line in lines[1:])])


def _render_block(chosen: Sequence[str], omitted: bool, prompts: PromptSet) -> str:
    lines = [_OPEN_TAG]
    if omitted:
        lines.append(prompts.omitted_note)
    lines.extend(_format_item(text) for text in chosen)
    lines.append(_CLOSE_TAG)
    return "\n".join(lines)


def fill_user_messages(
    summary_text: str,
    user_messages: Sequence[str],
    *,
    budget_tokens: int = DEFAULT_USER_MESSAGES_BUDGET,
    estimate: Estimator,
    prompts: PromptSet,
) -> str:
    """Replace the model's ``<all_user_messages>`` block with the real user messages.

    Messages are chosen newest first while they fit ``budget_tokens`` (every one is costed,
    however few there are); the first that does not fit is trimmed to the remaining budget
    and older ones are dropped, with a note saying so. They are printed oldest first, one
    item per message. Only the last complete block is replaced; if the model wrote none, a
    block is put under the section-6 heading (added if missing). With no user messages at
    all, the model's block is emptied (whatever it holds was not said by the user) and a text
    without a block is returned unchanged.
    """
    matches = list(_USER_BLOCK.finditer(summary_text))
    if not any(t.strip() for t in user_messages):
        if not matches:
            return summary_text
        chosen: Sequence[str] = []
        omitted = False
    else:
        chosen, omitted = _select(user_messages, budget_tokens, estimate, prompts)
    block = _render_block(chosen, omitted, prompts)
    if matches:
        last = matches[-1]
        return summary_text[: last.start()] + block + summary_text[last.end() :]
    return _insert_block(summary_text, block, prompts)


def user_messages_block(
    user_messages: Sequence[str], *, budget_tokens: int, estimate: Estimator, prompts: PromptSet
) -> str:
    """The ``<all_user_messages>`` block alone, chosen as :func:`fill_user_messages` does;
    empty when there is no user message."""
    if not any(t.strip() for t in user_messages):
        return ""
    chosen, omitted = _select(user_messages, budget_tokens, estimate, prompts)
    return _render_block(chosen, omitted, prompts)


def _heading(number: int, text: str, prompts: PromptSet, start: int = 0) -> re.Match[str] | None:
    """The first heading line of section ``number`` at or after ``start``.

    A numbered line alone is not enough (section 3 may well hold a numbered list): the line
    must also carry the section's title in this prompt set's language or a built-in one.
    """
    titles = {p.section_titles[number - 1].casefold() for p in (prompts, ENGLISH, CHINESE)}
    pattern = re.compile(_HEADING.format(n=number), re.MULTILINE)
    for match in pattern.finditer(text, start):
        line = match.group(0).casefold()
        if any(title in line for title in titles):
            return match
    return None


def spaced_sections(text: str, prompts: PromptSet) -> str:
    """``text`` with its numbered sections joined by exactly one blank line.

    Models (and templates) run sections together or leave several blank lines between them;
    each section is stripped of blank lines around it and of trailing spaces, then they are
    joined by one blank line (what comes before the first heading too). Blank lines inside a
    section stay, and a line within the ``<all_user_messages>`` block is never a heading.
    """
    quoted = [match.span() for match in _USER_BLOCK.finditer(text)]
    starts: list[int] = []
    position = 0
    for number in range(1, len(prompts.section_titles) + 1):
        match = _heading(number, text, prompts, position)
        while match is not None and any(a <= match.start() < b for a, b in quoted):
            match = _heading(number, text, prompts, match.end())
        if match is not None:
            starts.append(match.start())
            position = match.end()
    if not starts:
        return text
    lead = text[: starts[0]].strip("\n").rstrip()
    sections = [text[a:b].strip("\n").rstrip() for a, b in itertools.pairwise([*starts, len(text)])]
    return "\n\n".join([lead, *sections] if lead else sections)


def _insert_block(text: str, block: str, prompts: PromptSet) -> str:
    """Put ``block`` where section 6 belongs, replacing the model's own section-6 body."""
    six = _heading(6, text, prompts)
    if six is not None:
        following = [_heading(n, text, prompts, six.end()) for n in (7, 8, 9)]
        ends = [m.start() for m in following if m is not None]
        end = min(ends) if ends else len(text)
        tail = text[end:]
        return text[: six.end()] + "\n" + block + ("\n\n" + tail if tail else "\n")
    section = prompts.section_heading(6) + "\n" + block
    seven = _heading(7, text, prompts)
    if seven is not None:
        return text[: seven.start()] + section + "\n\n" + text[seven.start() :]
    return (text.rstrip() + "\n\n" + section) if text.strip() else section


def parse_user_messages_block(text: str) -> list[str]:
    """The user messages quoted in the last ``<all_user_messages>`` block of ``text``.

    Reads what :func:`fill_user_messages` wrote: items start with ``"- "``, continuation
    lines are indented; notes and blank lines outside items are ignored.
    """
    matches = _USER_BLOCK.findall(text)
    if not matches:
        return []
    items: list[list[str]] = []
    for line in str(matches[-1]).split("\n"):
        if line.startswith(_ITEM_PREFIX):
            items.append([line[len(_ITEM_PREFIX) :]])
        elif items and line.startswith(_CONTINUATION):
            items[-1].append(line[len(_CONTINUATION) :])
        elif items and not line.strip():
            # an indented blank line whose spaces an editor stripped
            items[-1].append("")
    texts = ["\n".join(parts).rstrip("\n") for parts in items]
    return [_unescape(t) for t in texts if t.strip()]


# ---------------------------------------------------------------------------------------------
# Collecting user messages


def _media_placeholder(message: Mapping[str, Any]) -> str:
    kinds: list[str] = []
    for part in media_parts(message):
        kind = str(part.get("type", ""))
        label = next((k for k in ("image", "audio", "video") if k in kind), "file")
        if label not in kinds:
            kinds.append(label)
    return " ".join(f"[{kind}]" for kind in kinds)


def _user_text(message: Mapping[str, Any]) -> str:
    text = text_of(message).strip("\n")
    if text.strip():
        return text
    return _media_placeholder(message)


def collect_user_messages(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """Texts of the messages a person wrote, oldest first, for :func:`fill_user_messages`.

    Tool results and internal messages (summaries, skills, reminders) are excluded, but the
    user messages quoted in an earlier summary's block are carried forward in their place, so
    a second compaction keeps them. A media-only message becomes a placeholder such as
    ``[image]``. When the same text occurs more than once, only its latest occurrence stays.
    """
    texts: list[str] = []
    for message in messages:
        if content_type(message) in QUOTING_KINDS:
            texts.extend(parse_user_messages_block(marked_body(message)))
        elif is_real_user_message(message):
            text = _user_text(message)
            if text:
                texts.append(text)
    seen: set[str] = set()
    kept: list[str] = []
    for text in reversed(texts):
        if text not in seen:
            seen.add(text)
            kept.append(text)
    return kept[::-1]


# ---------------------------------------------------------------------------------------------
# The summary message


def build_summary_message(
    summary_text: str,
    *,
    prompts: PromptSet,
    transcript_path: str | None = None,
    extra_meta: Mapping[str, Any] | None = None,
    history_tool: str | None = None,
) -> dict[str, Any]:
    """The user-role message that stands in for the replaced history.

    Its text is wrapped in the summary marker, so the next compaction recognizes it from the
    text alone (after any framework's conversion) as internal: folded in as the previous
    summary, never re-quoted as something the user said. ``extra_meta`` becomes marker
    attributes, such as the summary's version (``content_type`` is always "summary").
    """
    pointer = prompts.transcript(transcript_path, history_tool) if transcript_path else ""
    parts = [prompts.summary_preamble, summary_text, pointer, prompts.continue_instruction]
    parts = [part.strip() for part in parts]
    attributes = {k: v for k, v in (extra_meta or {}).items() if k != "content_type"}
    body = "\n\n".join(p for p in parts if p)
    return {"role": "user", "content": mark(SUMMARY_KIND, body, attributes)}


def finalize_summary(
    response_text: str,
    *,
    context_messages: Iterable[Mapping[str, Any]],
    prompts: PromptSet,
    estimate: Estimator,
    user_budget_tokens: int = DEFAULT_USER_MESSAGES_BUDGET,
    transcript_path: str | None = None,
    extra_meta: Mapping[str, Any] | None = None,
    history_tool: str | None = None,
) -> dict[str, Any]:
    """Extract, back-fill the real user messages of ``context_messages``, and wrap."""
    summary = fill_user_messages(
        extract_summary(response_text),
        collect_user_messages(context_messages),
        budget_tokens=user_budget_tokens,
        estimate=estimate,
        prompts=prompts,
    )
    return build_summary_message(
        spaced_sections(summary, prompts),
        prompts=prompts,
        transcript_path=transcript_path,
        extra_meta=extra_meta,
        history_tool=history_tool,
    )
