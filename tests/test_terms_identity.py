"""The fast term extraction indexes exactly the terms the reference definition does.

``document_terms`` takes shortcuts on the write path (ASCII text skips normalization and the
CJK test; each word's term is cached). Stored terms must not change, or rankings of items
written before and after would differ: the reference below is the plain definition from the
module docstring, and every text here must give the same list, repeats and order included.
"""

from __future__ import annotations

import re
import unicodedata

import snowballstemmer
from hypothesis import given, settings
from hypothesis import strategies as st

from synopsis._scripts import CJK
from synopsis.memory.ranking import MAX_TERM_CHARS, TEXT_WEIGHT, document_terms, indexed_terms

_TOKEN = re.compile(rf"[{CJK}]+|[^\W{CJK}_]+(?:['’][^\W{CJK}_]+)*")
_CJK_START = re.compile(f"[{CJK}]")
_STEMMER = snowballstemmer.stemmer("english")


def _reference_stem(word: str) -> str:
    word = word.replace("’", "'").removesuffix("'s").replace("'", "")
    if not word.isascii() or len(word) <= 2:
        return word
    return str(_STEMMER.stemWord(word))


def reference_terms(text: str) -> list[str]:
    """NFKC, case-fold, tokenize; CJK runs -> characters + pairs; words -> stems <= 64 chars."""
    terms: list[str] = []
    for token in _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold()):
        if _CJK_START.match(token):
            terms.extend(token)
            terms.extend(token[i : i + 2] for i in range(len(token) - 1))
        else:
            stem = _reference_stem(token)
            if stem and len(stem) <= MAX_TERM_CHARS:
                terms.append(stem)
    return terms


VARIED = [
    "",
    "   ",
    "Painting PAINTS painted, and the painter's paintings!",
    "Caroline's research: adoption agencies; she's don't won't o'clock rock'n'roll",
    "It’s Mary’s book — isn’t it? ’quoted’ 'single' ''double''",
    "用户喜欢喝咖啡，每天早上都喝一杯。",
    "ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ１２３ and ｶﾀｶﾅ half-width kana",
    "ﬁnance ﬂow Ⅻ ① ㍻ ½ ™ ﬀ",  # NFKC expands ligatures, numerals, squared forms
    "Straße STRASSE ǅ ΣΊΣΥΦΟΣ İstanbul",  # casefold differs from lower outside ASCII
    "x" * 64 + " " + "y" * 65 + " " + "supercalifragilisticexpialidocious" * 3,
    "a I an to by 2 22 222 a's I'm",
    "東京タワーは서울 타워より高い mixed with English words",
    "snake_case camelCase kebab-case dotted.name e-mail@example.com http://x.y/z?q=1",
    "tabs\tand\nnewlines\r\nand\x0bvertical\x0cfeed",
    "café naïve résumé coöperate façade",  # non-ASCII words are kept unstemmed
    "123 4.56 7,890 ١٢٣ ๑๒๓",  # digits of other scripts are word characters
    "emoji 😀 and symbols ★☆ and math ∑∫",
    "ヴァイオリン ｳﾞｧｲｵﾘﾝ",  # half-width kana composes under NFKC
    "the the the THE The",
]


def test_varied_texts_match_the_reference() -> None:
    """Apostrophes, NFKC, non-ASCII case folding, CJK, long words: same terms, same order."""
    for text in VARIED:
        assert document_terms(text) == reference_terms(text), text


def test_ascii_only_text_matches_the_reference() -> None:
    """The ASCII shortcut (no normalization, lower for casefold) gives the reference terms."""
    ascii_text = "".join(chr(code) for code in range(128)) * 3
    assert document_terms(ascii_text) == reference_terms(ascii_text)


def test_indexed_terms_repeat_the_text_then_add_the_context() -> None:
    """indexed_terms is the text's reference terms TEXT_WEIGHT times, then the context's."""
    text, context = "Yes, the adoption agencies!", "What did Caroline research? 研究"
    expected = reference_terms(text) * TEXT_WEIGHT + reference_terms(context)
    assert indexed_terms(text, context) == expected


_ALPHABET = st.sampled_from(
    list("abcXYZ019 '’_-.,!?\t\n") + list("用户喜欢咖啡東京タワーカナ서울ｆｕｌＡ１ﬁ①ßİǅΣéö😀")
)


@settings(max_examples=300)
@given(st.text(alphabet=_ALPHABET, max_size=80))
def test_mixed_scripts_match_the_reference(text: str) -> None:
    """Random mixes of the tricky characters give the reference terms."""
    assert document_terms(text) == reference_terms(text)


@settings(max_examples=300)
@given(st.text(max_size=120))
def test_any_text_matches_the_reference(text: str) -> None:
    """Any Unicode text gives the reference terms."""
    assert document_terms(text) == reference_terms(text)
