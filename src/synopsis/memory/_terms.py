"""Search terms for keyword recall that work for Chinese, Japanese, Korean and English alike.

A plain tokenizer keeps a run of Chinese characters as one token ("用户喜欢喝咖啡"), so a query
for "咖啡" finds nothing. We index, and query with, the same terms on every backend:

* text is NFKC-normalized and case-folded;
* a run of CJK characters becomes its single characters plus its overlapping character pairs
  (用户喜欢 -> 用 户 喜 欢 用户 户喜 喜欢), so one- and two-character queries match inside
  long sentences;
* other words are split on non-word characters and stemmed with the Snowball English stemmer
  ("painting" and "paints" both give "paint").

A query uses the pairs of its CJK runs (the single character only when a run is one character
long), which keeps multi-character queries precise. Pure functions; no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Final

import snowballstemmer

__all__ = ["document_terms", "query_terms"]

# CJK Unified Ideographs (+ extension A, compatibility), Hiragana, Katakana, Hangul syllables.
_CJK: Final = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN: Final = re.compile(rf"[{_CJK}]+|[^\W{_CJK}_]+(?:['’][^\W{_CJK}_]+)*")
_CJK_RUN: Final = re.compile(rf"[{_CJK}]")
MAX_TERM_CHARS: Final = 64
MAX_QUERY_TERMS: Final = 64
_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    word = word.replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    word = word.replace("'", "")
    if not word.isascii() or len(word) <= 2:
        return word
    return str(_stemmer.stemWord(word))


def _normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(_normalize(text))


def _is_cjk(token: str) -> bool:
    return _CJK_RUN.match(token) is not None


def _pairs(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


def document_terms(text: str) -> list[str]:
    """The terms to index for ``text`` (with repeats, so term frequency is kept)."""
    terms: list[str] = []
    for token in _tokens(text):
        if _is_cjk(token):
            terms.extend(token)
            terms.extend(_pairs(token))
        else:
            stem = _stem(token)
            if stem and len(stem) <= MAX_TERM_CHARS:
                terms.append(stem)
    return terms


def query_terms(query: str) -> list[str]:
    """The distinct terms to look up for ``query``, in order of first appearance.

    At most ``MAX_QUERY_TERMS`` terms are kept, so a megabyte-long query costs no more than a
    long sentence.
    """
    seen: dict[str, None] = {}
    for token in _tokens(query):
        if _is_cjk(token):
            candidates = [token] if len(token) == 1 else _pairs(token)
        else:
            stem = _stem(token)
            candidates = [stem] if stem and len(stem) <= MAX_TERM_CHARS else []
        for term in candidates:
            seen.setdefault(term, None)
            if len(seen) >= MAX_QUERY_TERMS:
                return list(seen)
    return list(seen)
