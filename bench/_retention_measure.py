"""Whether a LoCoMo question is still answerable from a final context: the strict and loose checks.

*Loose* (the old proxy, kept as a second column): every content word of the gold answer occurs
anywhere in the context. It is fooled by coincidence: "November 2023" matches a session-date
header, "two" matches any "two", "problem" matches a template heading.

*Strict* (the headline): the question's evidence is in the context and carries the answer.

1. An evidence utterance (LoCoMo names the turns, by dia_id, that answer each question) counts
   as *present* when, compared word by word (case and punctuation aside), the whole utterance
   occurs in one line of the context, or one of its sentences (at least 4 words) or clauses
   (at least 5 words, cut at punctuation) does that carries an answer word (an
   *answer-bearing sentence*; for an utterance that carries no answer word, one holding two
   of the question's content words), so a summary that quotes the part that matters counts.
   A unit shorter than 6 words ("Alright, see you tomorrow!") counts only in a line the
   context dates to the evidence's own session (see 2.).
2. An answer word is *carried* when the evidence itself holds it: in an evidence utterance,
   or in the date of an evidence session (temporal questions). Each carried word must be
   found in a context line that holds a present evidence unit, or in the session date the
   context gives that line: the nearest date mention at or before it (a session header, a
   ``[date]`` tag) when it is the date of the evidence's own session.
3. An answer word the evidence does not hold ("likely", "7" worked out from "yesterday",
   "Indiana" from "Fort Wayne") can only be inferred, so then *every* evidence utterance must
   be present, and the word itself is not looked for: finding it elsewhere in the context
   would be a coincidence, and the hand audit found such questions answerable without it.

So strict implies loose for every question whose answer words the evidence holds; for an
inferred answer, strict may hold where loose does not (the no-compaction ceiling is then
100 % strict, against about 81 % loose).

Lines matter: a tool output holding a session log has one utterance per line, and a summary one
fact per line, so "the same line" is what a reader would read together.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from synopsis.messages import text_of

# Words that carry no content in a question or an answer (our own short list).
STOPWORDS = frozenset(
    """
    a an and are as at be been but by did do does for from had has have he her his how i
    if in into is it its me my of on or our she so than that the their them then there
    they this to was we were what when where which who whom why will with would you your
    """.split()  # noqa: SIM905 - a word list reads better as text
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_CLAUSE_END = re.compile(r"(?<=[.!?;,:])\s+")
MIN_SENTENCE_WORDS = 4
MIN_CLAUSE_WORDS = 5
MIN_UNDATED_WORDS = 6


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


def content_words(text: str) -> frozenset[str]:
    return frozenset(w for w in words(text) if w not in STOPWORDS)


def _joined(text: str) -> str:
    """The text as its words, space-separated and padded, for word-boundary substring tests."""
    return f" {' '.join(words(text))} "


def date_forms(date: str) -> tuple[str, ...]:
    """How a session date may be written in a context: as the data gives it ("1:56 pm on
    8 May, 2023") or its date part alone ("8 May, 2023", "8 May 2023" compare equal)."""
    forms = [date]
    if " on " in date:
        forms.append(date.split(" on ", 1)[1])
    return tuple(_joined(form) for form in forms if words(form))


@dataclass(frozen=True, slots=True)
class Evidence:
    dia_id: str
    session: int
    text: str  # what was said, without the speaker's name ("text [shares a photo of ...]")


@dataclass(frozen=True, slots=True)
class Probe:
    """A question as the checks need it."""

    ident: str  # "<sample_id>#<index in qa>"
    text: str
    answer: frozenset[str]  # the gold answer's content words
    evidence: tuple[Evidence, ...]
    category: int
    gold: str = ""  # the gold answer as the data gives it (shown by the audit)


@dataclass(frozen=True, slots=True)
class Verdict:
    strict: bool
    loose: bool
    present: tuple[str, ...]  # dia_ids of the evidence found in the context
    missing_words: tuple[str, ...]  # carried answer words no present evidence line covers
    reason: str


class Context:
    """A final context, prepared once for every question asked of it."""

    def __init__(self, lines: Sequence[str], dates: Mapping[int, str]) -> None:
        self.lines = [_joined(line) for line in lines]
        self.all_words = frozenset(w for line in self.lines for w in line.split())
        forms = {session: date_forms(date) for session, date in dates.items() if date}
        # The session date in force at each line: the last date mentioned at or before it.
        self.date_at: list[int | None] = []
        current: int | None = None
        for line in self.lines:
            found = [
                (line.rfind(form), session)
                for session, session_forms in forms.items()
                for form in session_forms
                if form in line
            ]
            if found:
                current = max(found)[1]
            self.date_at.append(current)

    @classmethod
    def of_messages(
        cls, messages: Iterable[Mapping[str, Any]], dates: Mapping[int, str]
    ) -> Context:
        return cls(context_lines(messages), dates)

    def lines_with(self, unit: str) -> list[int]:
        return [i for i, line in enumerate(self.lines) if unit in line]


def context_lines(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """The lines of text a context shows: each message's text, then its tool calls."""
    lines: list[str] = []
    for message in messages:
        lines += text_of(message).splitlines()
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            lines.append(f"{function.get('name', '')}({function.get('arguments', '')})")
    return lines


def _units(evidence: Evidence, probe: Probe, carried: frozenset[str]) -> list[str]:
    """The word strings whose presence counts as this evidence being in the context."""
    units = [_joined(evidence.text)]
    if "\n" in evidence.text.strip():  # said over lines (a photo's caption on the next one):
        units.append(_joined(evidence.text.strip().splitlines()[0]))  # its first line counts
    own = content_words(evidence.text)
    question = content_words(probe.text)
    parts = [(p, MIN_SENTENCE_WORDS) for p in _SENTENCE_END.split(evidence.text)]
    parts += [(p, MIN_CLAUSE_WORDS) for p in _CLAUSE_END.split(evidence.text)]
    for sentence, least in parts:
        sentence_words = set(words(sentence))
        if len(words(sentence)) < least:
            continue
        if own & carried:
            useful = bool(sentence_words & carried)
        else:
            useful = len(sentence_words & question) >= 2
        if useful:
            units.append(_joined(sentence))
    return units


def judge(probe: Probe, context: Context, dates: Mapping[int, str]) -> Verdict:
    loose = probe.answer <= context.all_words
    session_words = {s: frozenset(words(d)) for s, d in dates.items()}
    held = frozenset(w for e in probe.evidence for w in words(e.text))
    held |= frozenset(w for e in probe.evidence for w in session_words.get(e.session, ()))
    carried = probe.answer & held
    inferred = probe.answer - held
    covered: set[str] = set()
    present: list[str] = []
    for evidence in probe.evidence:
        hits = sorted(
            {
                i
                for unit in _units(evidence, probe, carried)
                for i in context.lines_with(unit)
                # A short unit ("Alright, see you tomorrow!") is said in many sessions: it
                # counts only where the context dates it to its own.
                if len(unit.split()) >= MIN_UNDATED_WORDS or context.date_at[i] == evidence.session
            }
        )
        if not hits:
            continue
        present.append(evidence.dia_id)
        for i in hits:
            covered |= set(context.lines[i].split())
            if context.date_at[i] == evidence.session:
                covered |= session_words.get(evidence.session, frozenset())
    covered &= context.all_words  # a date's words count only as the context writes them
    missing = tuple(sorted(carried - covered))
    all_present = len(present) == len(probe.evidence)
    if not present:
        strict, reason = False, "no evidence utterance in the context"
    elif missing:
        strict, reason = False, f"evidence present but not with {', '.join(missing)}"
    elif inferred and not all_present:
        strict, reason = False, f"answer inferred ({', '.join(sorted(inferred))}), evidence partial"
    elif inferred:
        strict, reason = (
            True,
            f"all evidence present, answer inferred ({', '.join(sorted(inferred))})",
        )
    else:
        strict, reason = True, "evidence present with the answer"
    return Verdict(strict, loose, tuple(present), missing, reason)
