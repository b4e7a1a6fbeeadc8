"""Redaction does work linear in its findings, however two detectors' findings interleave.

Operation counts, not timings: ``_Claims.steps`` counts the spans each merge walks over. The
old structure inserted every finding into the middle of two lists, O(findings²) when a later
detector's findings fell between an earlier one's (``"a@b.co 8.8.8.8 " * 66667`` took 5.6 s
at 1 MB, 20x its 100 KB time).
"""

from __future__ import annotations

import itertools
from typing import ClassVar

import pytest

from synopsis.redact import Redactor, _redactor
from tests.redaction_corpus import KINDS, lone_value


class _CountingClaims(_redactor._Claims):
    made: ClassVar[list[_redactor._Claims]] = []

    def __init__(self) -> None:
        super().__init__()
        _CountingClaims.made.append(self)


def _steps(redactor: Redactor, text: str, monkeypatch: pytest.MonkeyPatch) -> int:
    _CountingClaims.made = []
    monkeypatch.setattr(_redactor, "_Claims", _CountingClaims)
    redactor.redact_text(text)
    return sum(claims.steps for claims in _CountingClaims.made)


def _lone_kinds() -> list[str]:
    """The kinds whose lone value the default redactor reads as that kind."""
    redactor = Redactor()
    return [k for k in KINDS if [f.kind for f in redactor.find(lone_value(k))] == [k]]


def test_every_kind_has_a_lone_value() -> None:
    assert len(_lone_kinds()) >= len(KINDS) - 2


@pytest.mark.parametrize("pair", list(itertools.combinations(_lone_kinds(), 2)), ids="+".join)
def test_interleaved_findings_cost_linear_steps(
    pair: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = (lone_value(kind) for kind in pair)
    unit = f"{first} ; {second}\n"
    redactor = Redactor()
    small = _steps(redactor, unit * 20, monkeypatch)
    large = _steps(redactor, unit * 200, monkeypatch)
    assert len(redactor.find(unit * 200)) == 400
    assert large <= 11 * small


def test_one_detector_reporting_out_of_order_keeps_the_first_found() -> None:
    claims = _redactor._Claims()
    claims.claim_all("a", [(10, 20), (30, 40)])
    claims.claim_all("b", [(35, 50), (0, 5), (4, 12), (50, 60)])
    assert claims.in_order() == [(0, 5, "b"), (10, 20, "a"), (30, 40, "a"), (50, 60, "b")]


def test_interleaved_redaction_keeps_every_value_out() -> None:
    text = "a@b.co 8.8.8.8 " * 5000
    result = Redactor().redact_text(text)
    assert "a@b.co" not in result.text and "8.8.8.8" not in result.text
    assert len(result.findings) == 10000
