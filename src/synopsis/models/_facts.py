"""Facts for the extractive summary: the sentences of a transcript worth quoting word for word.

:func:`collect_sentences` splits each message into whole sentences (the speaker named at the
start of a line kept, code and one-word lines left out), tagged with the session date in force
(a message that opens with ``[... 20 July, 2023]`` or a line that is little more than a date) or
their position; :func:`choose_facts` ranks them by what they say (rare words, names, numbers,
dates, time words, decisions, errors) per token and takes the best that fit a budget, never the
same sentence twice, printed oldest first. Pure and linear, sorting aside.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from synopsis.tokens import default_estimate

__all__ = [
    "CJK_CHAR",
    "CJK_RUN",
    "CJK_SPLIT",
    "EN_STOP",
    "ERROR",
    "Dated",
    "Sentence",
    "carried_date",
    "choose_facts",
    "cjk_phrases",
    "collect_sentences",
    "date_line",
    "fact_text",
    "group_by_tag",
    "ungroup",
]

CJK: Final = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK_CHAR: Final = re.compile(f"[{CJK}]")
CJK_RUN: Final = re.compile(f"[{CJK}]{{2,}}")
CJK_STOP: Final = "的了是在我你他她它们这那就也和与及或把被吗呢吧啊个一不有要会能"
CJK_SPLIT: Final = re.compile(f"[{CJK_STOP}]+")
ERROR: Final = re.compile(
    r"Traceback \(most recent call last\)|\b[A-Z]\w*(?:Error|Exception)\b|\berror\b[:\[]?"
    r"|\bfailed\b|\bfailure\b|\bFAIL\b|exit (?:code|status)[:= ]*[1-9]|\bpanic:|\bfatal:"
    r"|错误|失败|异常|报错",
)
# Common words that are never a "key technical concept".
EN_STOP: Final = frozenset(
    """
    the and for with that this from have has are was were will would could should can not
    you your our they them then than what when where which who how why all any but into
    out over also just like make made use used using let get got its it's now here there
    some more most very been being about after before again file files code please thanks
    true false none null self return import def class
    """.split()  # noqa: SIM905 - a word list reads better as text
)


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of the transcript as it was said, with who said it and when."""

    text: str
    who: str  # the speaker named at the start of its line, or the role (a tool's name)
    when: str  # the session date in force, or "" when the history has none
    position: int  # the message it is from, 1-based

    def line(self, dated: bool) -> str:
        tag = f"({self.when}) " if self.when else ("" if dated else f"(#{self.position}) ")
        return f"- {tag}{self.who}: {self.text}"


class Dated(Protocol):
    """Where the sentences go, and the session date in force while reading."""

    sentences: list[Sentence]
    date: str
    dated: bool
    position: int


def cjk_phrases(text: str) -> list[str]:
    """The Chinese phrases of ``text``: each run of Chinese cut at function characters (的, 了,
    是 ...), pieces of at least two characters. A partition, never overlapping windows."""
    return [p for run in CJK_RUN.findall(text) for p in CJK_SPLIT.split(run) if len(p) >= 2]


_MONTHS: Final = (
    "January|February|March|April|May|June|July|August|September|October|November|December"
    "|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
_DATE: Final = re.compile(
    rf"\b(?:\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})\.?,?\s+\d{{4}}"
    rf"|(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
    r"|\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{4})\b|\d{4}年\d{1,2}月(?:\d{1,2}[日号])?",
    re.IGNORECASE,
)
#: A message that opens with a bracketed stamp (``[8:56 pm on 20 July, 2023] ...``).
_STAMP: Final = re.compile(r"^\s*\[([^\]\n]{4,60})\]\s*")
_WHEN: Final = re.compile(
    r"\b(?:yesterday|today|tomorrow|tonight|ago|last|next|weekend|week|month|year|since|until"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday|morning|evening|birthday"
    rf"|{_MONTHS.lower()})\b|昨天|今天|明天|上周|下周|上个月|下个月|去年|明年|周末",
    re.IGNORECASE,
)
_DECISION: Final = re.compile(
    r"\b(?:decided|decide|chose|choose|agreed|plan|planned|planning|switched|moved|started"
    r"|finished|fixed|changed|bought|adopted|joined|visited|married|born|won|lost|signed"
    r"|graduated|because|instead|deadline|budget|price|cost|password|version)\b"
    r"|决定|计划|打算|改为|改成|修复|完成|因为|预算|截止",
    re.IGNORECASE,
)
#: Sentence ends: ``.!?`` before a space and a capital (so ``3.5`` and ``e.g. x`` hold), CJK
#: ends, and line breaks.
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z])|(?<=[。！？；])|\n+")
_DATE_LABELS: Final = ("Session date at the end: ", "结束时的会话日期：")
_DATE_LINE: Final = re.compile(rf"^- (?:{_DATE_LABELS[0]}|{_DATE_LABELS[1]})(.+)$", re.MULTILINE)
_FACT_DATE: Final = re.compile(
    r"^(?:- \(([^)#\n][^)\n]{3,40})\) |\(([^)#\n][^)\n]{3,40})\)$)", re.MULTILINE
)
#: A fact line's tag (``- (20 July, 2023) who: text`` or ``- (#12) who: text``).
_TAG: Final = re.compile(r"^- (\([^)\n]{2,42}\)) ")
#: A heading line of facts printed under their common tag (``(20 July, 2023)``).
_TAG_HEADING: Final = re.compile(r"^\([^)\n]{2,42}\)$")
#: Words of small talk: a sentence made of them (and no name, number or date) says how the
#: speaker feels about what was said, not a fact to remember.
_PHATIC: Final = frozenset(
    """
    awesome amazing great cool love loved lovely glad thanks thank wow nice sounds sound happy
    sorry hope totally really super proud beautiful stunning gorgeous inspiring incredible
    wonderful fantastic good hear agree absolutely definitely exactly true feel feels felt
    appreciate means mean right sure yeah yes hey haha fun best stuff things thing much
    always keep keeping going take care wish luck support supportive awesome vibe vibes
    """.split()  # noqa: SIM905 - a word list reads better as text
)
#: What someone did or has: "I / we / my ... <past tense>", the events a memory is asked about.
_EVENT: Final = re.compile(
    r"\b(?:I|we|my|our)\b[^.!?]{0,40}?\b(?:\w{3,}ed|went|got|made|took|saw|bought|had|met"
    r"|gave|found|began|ran|won|wrote|read|built|left|came|did|became|sold|flew|drove|grew)\b",
    re.IGNORECASE,
)
_CLOCK: Final = re.compile(r"^(?:\d.*|am|pm|on|at)$", re.IGNORECASE)
_SPEAKER: Final = re.compile(r"^([A-Z][\w'.-]{0,30}(?: [A-Z][\w'.-]{0,30}){0,2}):\s+(?=\S)")
_WORD: Final = re.compile(r"[A-Za-z][A-Za-z'-]*|\d[\d.,:]*")
_CODE_CHARS: Final = frozenset("{}()[];=<>\\|`$#")
_NOT_NAMES: Final = frozenset({"I", "I'm", "I've", "I'll", "I'd", "OK", "Ok"})
_MAX_SENTENCE_CHARS: Final = 400
_MIN_COST: Final = 8  # tokens: a fragment is never "cheap" enough to crowd out real facts
#: Candidate sentences read at most (the newest win): bounds the work on a huge input.
_MAX_SENTENCES: Final = 50_000


def collect_sentences(t: Dated, text: str, who: str) -> None:
    """Add the sentences of one message, noting a session date the message opens with."""
    stamp = _STAMP.match(text)
    if stamp and _DATE.search(stamp.group(1)):
        t.date, t.dated = _short_date(stamp.group(1)), True
        text = text[stamp.end() :]
    else:
        first = text.lstrip().split("\n", 1)[0]
        found = _DATE.search(first) if len(first) <= 80 else None
        # A line that is little more than a date opens a session ("Session 3 took place on
        # ..."); a date inside a sentence is what the sentence says, not when. The header
        # itself is no fact: every fact under it carries its date.
        if found and _is_header(first, found):
            t.date, t.dated = found.group(0), True
            text = text.lstrip().partition("\n")[2]
    for line in text.splitlines():
        if not line.strip() or line.startswith(("    ", "\t")):
            continue  # indented lines are code or data, which sections 3 and 8 cover
        speaker = _SPEAKER.match(line)
        name = speaker.group(1) if speaker else who
        body = line[speaker.end() :] if speaker else line
        for sentence in _SENTENCE_END.split(body):
            sentence = sentence.strip(" -*>\t")
            if _worth_reading(sentence) and not sentence.startswith("Traceback ("):
                t.sentences.append(Sentence(sentence, name, t.date, t.position))
    if len(t.sentences) > 2 * _MAX_SENTENCES:
        del t.sentences[: len(t.sentences) - _MAX_SENTENCES]


def _is_header(line: str, found: re.Match[str]) -> bool:
    """Whether a line dated by ``found`` is a session header, not a sentence: at most five
    other words, numbers and times of day aside, and no name among them ("Session 3 took place
    on 1:14 pm on 25 May, 2023."; "Invoice 48213 from Halvorsen Ltd is due on 14 June 2024."
    and "Deployed by Marguerite Okafor on 2024-03-17." are sentences)."""
    others = _WORD.findall(line[: found.start()] + " " + line[found.end() :])
    words = [w for w in others if not _CLOCK.match(w)]
    named = any(w[0].isupper() for w in words[1:])  # a capital past the first word: a name
    return len(words) <= 5 and not named


def date_line(date: str, zh: bool) -> str:
    """The summary line that says which session date was in force where the summary ends, so
    an update of the summary dates the facts before its first session header."""
    return f"- {_DATE_LABELS[zh]}{date}"


def carried_date(previous: str) -> str:
    """The session date in force at the end of an earlier summary ("" if it gives none): its
    :func:`date_line`, else the date of its last dated fact."""
    marked = _DATE_LINE.findall(previous)
    if marked:
        return str(marked[-1]).strip()
    tags = _FACT_DATE.findall(previous)
    return str(tags[-1][0] or tags[-1][1]) if tags else ""


def _short_date(stamp: str) -> str:
    """The date part of a stamp (``8:56 pm on 20 July, 2023`` -> ``20 July, 2023``)."""
    found = _DATE.search(stamp)
    return found.group(0) if found else stamp.strip()


def _worth_reading(sentence: str) -> bool:
    if len(sentence) > _MAX_SENTENCE_CHARS:
        return False
    if CJK_CHAR.search(sentence):
        return len(CJK_CHAR.findall(sentence)) >= 6
    if len(sentence.split()) < 4:
        return False
    code = sum(1 for c in sentence if c in _CODE_CHARS)
    return code * 12 <= len(sentence)


def _key(text: str) -> str:
    """What makes two sentences the same: their words, case and punctuation aside."""
    return " ".join(w.lower() for w in _WORD.findall(text)) or "".join(CJK_CHAR.findall(text))


def _content_words(text: str) -> set[str]:
    words = {w.lower() for w in _WORD.findall(text) if len(w) >= 3}
    words -= EN_STOP
    words.update(cjk_phrases(text))
    return words


def _value(text: str, content: set[str], idf: Mapping[str, float]) -> float:
    """How much a sentence says: rare words, names, numbers, dates, decisions and errors."""
    words = _WORD.findall(text)
    names = sum(1 for i, w in enumerate(words) if i and w[0].isupper() and w not in _NOT_NAMES)
    numbers = sum(1 for w in words if w[0].isdigit())
    value = sum(idf.get(w, 0.0) for w in content)
    value += 2.0 * min(names, 3) + 2.0 * min(numbers, 2)
    value += 3.0 * bool(_DATE.search(text)) + 1.5 * bool(_WHEN.search(text))
    value += 1.0 * bool(_DECISION.search(text)) + 1.0 * bool(ERROR.search(text))
    event = _EVENT.search(text) is not None
    value += 1.5 * event
    if not names and not numbers and content:
        phatic = sum(1 for w in content if w in _PHATIC)
        if 4 * phatic >= len(content):  # a quarter of its words small talk: a reaction
            value *= 0.5
        elif not event and not _WHEN.search(text):  # nothing concrete: an opinion, no fact
            value *= 0.8
    return value * (0.5 if text.rstrip().endswith(("?", "？")) else 1.0)


def choose_facts(
    lines: Sequence[str], texts: Sequence[str], *, tokens: int, chars: int, grouped: bool = False
) -> list[str]:
    """The ``lines`` (rendered facts, oldest first) that say the most within ``tokens``
    (estimated) and ``chars``, no sentence twice, in their order. ``texts[i]`` is the
    sentence of ``lines[i]``. ``grouped``: the lines will be printed by :func:`group_by_tag`,
    so a line costs what it does without its tag and the first line of a tag pays for the
    tag's heading; the ranking is by the cost with the tag, as when each line carries it, so
    grouping changes how many facts fit, not which come first."""
    if tokens <= 0 or chars <= 0 or not lines:
        return []
    contents = [_content_words(text) for text in texts]
    documents = Counter(w for content in contents for w in content)
    total = len(texts)
    idf = {w: math.log((total + 1) / (n + 0.5)) for w, n in documents.items() if n < total}
    split = [_split_tag(line) if grouped else ("", line) for line in lines]
    costs = [default_estimate(bare) + 1 for _, bare in split]
    # Each line sized once: a tag's cost is estimated once per distinct tag.
    tag_costs = {tag: default_estimate(tag) for tag, _ in split if tag}
    ranking = [cost + tag_costs.get(tag, 0) for cost, (tag, _) in zip(costs, split, strict=True)]
    ranked = sorted(
        range(len(lines)),
        key=lambda i: (-_value(texts[i], contents[i], idf) / max(ranking[i], _MIN_COST), i),
    )
    chosen: list[int] = []
    seen: set[str] = set()
    headed: set[str] = set()
    left, room = tokens, chars
    for index in ranked:
        tag, bare = split[index]
        key = _key(texts[index])
        heading = tag_costs[tag] + 1 if tag and tag not in headed else 0
        size = len(bare) + 1 + (len(tag) + 1 if heading else 0)
        if costs[index] + heading > left or size > room or key in seen:
            continue
        seen.add(key)
        headed.add(tag)
        chosen.append(index)
        left -= costs[index] + heading
        room -= size
        if left < _MIN_COST:
            break
    return [lines[i] for i in sorted(chosen)]


def _split_tag(line: str) -> tuple[str, str]:
    """A fact line's tag (with its parentheses, "" if none) and the line without it."""
    found = _TAG.match(line)
    return (found.group(1), "- " + line[found.end() :]) if found else ("", line)


def group_by_tag(lines: Sequence[str]) -> list[str]:
    """Fact lines printed under their tags: each run of lines with the same tag (a session
    date, a position) gets the tag once, as a heading line, and its lines lose it."""
    printed: list[str] = []
    current = ""
    for line in lines:
        tag, bare = _split_tag(line)
        if tag and tag != current:
            printed.append(tag)
        current = tag or current
        printed.append(bare if tag else line)
    return printed


def ungroup(lines: Sequence[str]) -> list[str]:
    """The fact lines of :func:`group_by_tag`'s output, each with its tag again (lines that
    already carry one, from an older summary, are kept as they are)."""
    facts: list[str] = []
    current = ""
    for line in lines:
        stripped = line.strip()
        if _TAG_HEADING.match(stripped):
            current = stripped
        elif line.startswith("- "):
            tagged = _TAG.match(line) is not None or not current
            facts.append(line if tagged else f"- {current} {line[2:]}")
    return facts


def fact_text(line: str) -> str:
    """The sentence of a rendered fact line (``- (date) who: text``)."""
    body = line[2:] if line.startswith("- ") else line
    if body.startswith("(") and ") " in body:
        body = body[body.index(") ") + 2 :]
    who, colon, rest = body.partition(": ")
    return rest if colon and len(who) <= 40 else body
