"""The indexed terms do not depend on which Snowball implementation stems them.

``snowballstemmer`` hands out PyStemmer's C stemmer when it is installed (a dependency, for
ingest speed: issue 21, item 5) and its own pure-Python one otherwise. Every backend's
ranking reads the stored terms, so the two must stem every word alike, or a store written with
one would not be found by the other.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import snowballstemmer
from snowballstemmer.english_stemmer import EnglishStemmer

from synopsis.memory.ranking import document_terms

ROOT = Path(__file__).resolve().parents[1]


def _vocabulary() -> list[str]:
    words: set[str] = set()
    for path in [*ROOT.glob("docs/**/*.md"), *ROOT.glob("src/**/*.py")]:
        words |= set(re.findall(r"[a-z']+", path.read_text(errors="ignore").lower()))
    rng = random.Random(5)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words |= {"".join(rng.choice(letters) for _ in range(rng.randint(1, 14))) for _ in range(5000)}
    suffixes = ("", "s", "es", "ed", "ing", "ly", "ness", "ational", "ies", "'s", "ement")
    stems = ("generous", "agree", "pony", "dye", "lie", "commun", "sky", "kayak", "lake")
    words |= {stem + suffix for stem in stems for suffix in suffixes}
    return sorted(words)


def test_the_c_stemmer_is_the_one_in_use_and_stems_like_the_python_one() -> None:
    in_use = snowballstemmer.stemmer("english")
    assert type(in_use).__module__ == "Stemmer"  # PyStemmer, the dependency
    python = EnglishStemmer()
    words = _vocabulary()
    assert len(words) > 5000
    assert [in_use.stemWord(w) for w in words] == [python.stemWord(w) for w in words]


def test_document_terms_match_a_pure_python_stemming() -> None:
    python = EnglishStemmer()
    text = "The kayakers agreed generously; ponies were dying by the lakes"
    expected = [python.stemWord(w) for w in re.findall(r"[a-z]+", text.lower())]
    assert [t for t in document_terms(text) if t.isalpha()] == expected
