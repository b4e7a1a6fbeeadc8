"""The Unicode ranges of the CJK scripts: one definition for tokenizing, counting and detecting.

Each constant is the inside of a regular-expression character class (``f"[{HAN}]"``), so
callers combine them freely (``f"[^\\W{CJK}_]"``). The ranges are the blocks synopsis treats
specially; rarer blocks (extensions B and later, radicals, bopomofo) count as other letters.
Pure constants; no I/O.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["CJK", "CJK_PUNCT", "HAN", "HANGUL", "HAN_CHAR", "KANA", "is_cjk"]

#: Chinese characters: CJK Unified Ideographs, Extension A, Compatibility Ideographs.
HAN: Final = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
#: Japanese Hiragana and Katakana.
KANA: Final = "\u3040-\u30ff"
#: Korean Hangul syllables.
HANGUL: Final = "\uac00-\ud7af"
#: Every CJK letter: kana, Han and Hangul (the scripts written without spaces between words).
CJK: Final = KANA + HAN + HANGUL
#: CJK symbols and punctuation (、。「」) and the half/full-width forms (，！ＡＢ).
CJK_PUNCT: Final = "\u3000-\u303f\uff00-\uffef"

#: One Chinese character.
HAN_CHAR: Final = re.compile(f"[{HAN}]")
_CJK_CHAR: Final = re.compile(f"[{CJK}]")


def is_cjk(text: str) -> bool:
    """Whether ``text`` starts with a CJK letter (kana, Han or Hangul)."""
    return _CJK_CHAR.match(text) is not None
