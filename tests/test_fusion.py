"""Hybrid fusion: standardized keyword and vector scores, mixed with a fixed weight."""

from __future__ import annotations

import pytest

from synopsis.memory.ranking import HYBRID_VECTOR_WEIGHT, convex_fusion, min_max, z_scores


def test_min_max_scales_best_to_one_and_worst_to_zero() -> None:
    assert min_max([("a", 10.0), ("b", 5.0), ("c", 0.0)]) == {"a": 1.0, "b": 0.5, "c": 0.0}


def test_min_max_of_equal_scores_is_all_ones_and_of_nothing_is_empty() -> None:
    assert min_max([("a", 0.3), ("b", 0.3)]) == {"a": 1.0, "b": 1.0}
    assert min_max([]) == {}


def test_z_scores_center_and_scale() -> None:
    z = z_scores([("a", 3.0), ("b", 1.0)])
    assert z == {"a": pytest.approx(1.0), "b": pytest.approx(-1.0)}
    assert z_scores([("a", 0.3), ("b", 0.3)]) == {"a": 0.0, "b": 0.0}
    assert z_scores([]) == {}


def test_fusion_weighs_the_vector_side_by_the_weight() -> None:
    """Each side standardized; an id missing from a side gets that side's lowest z-score."""
    fused = convex_fusion([("kw", 3.0), ("both", 1.0)], [("both", 0.9), ("vec", 0.1)], weight=0.7)
    assert fused["kw"] == pytest.approx(0.3 * 1.0 + 0.7 * -1.0)  # best keyword, no vector
    assert fused["both"] == pytest.approx(0.3 * -1.0 + 0.7 * 1.0)  # worst keyword, best vector
    assert fused["vec"] == pytest.approx(0.3 * -1.0 + 0.7 * -1.0)  # worst vector, no keyword
    assert list(fused) == ["kw", "both", "vec"]


def test_score_gaps_matter_not_only_ranks() -> None:
    """A near-tie on one side does not outweigh a wide gap on the other (RRF would tie them)."""
    keyword = [("a", 10.0), ("b", 9.9), ("c", 0.0)]
    vector = [("b", 0.90), ("a", 0.20), ("c", 0.10)]
    fused = convex_fusion(keyword, vector, weight=0.5)
    assert max(fused, key=fused.__getitem__) == "b"


def test_default_weight_and_bad_weight() -> None:
    assert HYBRID_VECTOR_WEIGHT == 0.6
    assert convex_fusion([("a", 1.0)], []) == {"a": 0.0}
    with pytest.raises(ValueError, match="weight"):
        convex_fusion([], [], weight=1.5)
