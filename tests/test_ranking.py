"""The ranking's summary of its bootstrap (``leaderboard/ranking.py``: ``rank_profile``) and
the N-avg's per-criterion mean, on values small enough to rank by hand."""

from __future__ import annotations

import numpy as np
import pytest

from capaudit.leaderboard.columns import Column
from capaudit.leaderboard.ranking import rank_profile

ONE = [Column("x", "descriptiveness", True, "x")]
NAMES = ["A", "B", "C"]


def _reps(n: int, n_swapped: int) -> np.ndarray:
    """``n`` replicates [n, 3 sets, 1 column]: A > B > C, except in the last ``n_swapped``,
    where B > A; C is always last."""
    reps = np.tile(np.array([[2.0], [1.0], [0.0]]), (n, 1, 1))
    reps[n - n_swapped:, 0, 0], reps[n - n_swapped:, 1, 0] = 1.0, 2.0
    return reps


def test_rank_interval_is_the_2_5th_to_97_5th_percentile_of_the_ranks():
    values = np.array([[2.0], [1.0], [0.0]])
    out = rank_profile(values, _reps(100, 4), ONE, {"descriptiveness": 1}, NAMES)
    assert out["rank"] == [1, 2, 3]
    # A is 2nd in 4 of 100 replicates: more than the 2.5% above the interval, so the
    # interval reaches rank 2 (a 90% interval, the 95th percentile, would stop at 1);
    # B is 1st in 4%: more than the 2.5% below; C is last in every replicate
    assert out["rank_interval"] == [[1, 2], [1, 2], [3, 3]]
    assert out["first_share"] == [0.96, 0.04, 0.0]
    # flips of adjacent sets in the point order: A/B in 4 of 100, B/C never
    assert out["flips"] == [{"above": "A", "below": "B", "share": 0.04},
                            {"above": "B", "below": "C", "share": 0.0}]
    assert out["stable"]                     # 4% <= FLIP_WARN (5%)


def test_rank_interval_of_a_rare_swap_stays_at_one_place():
    # 2 of 100 replicates (2%): inside the 2.5% each tail may leave out
    out = rank_profile(np.array([[2.0], [1.0], [0.0]]), _reps(100, 2), ONE,
                       {"descriptiveness": 1}, NAMES)
    assert out["rank_interval"] == [[1, 1], [2, 2], [3, 3]]
    assert out["first_share"] == [0.98, 0.02, 0.0]


def test_unstable_when_adjacent_sets_flip_often():
    out = rank_profile(np.array([[2.0], [1.0], [0.0]]), _reps(100, 30), ONE,
                       {"descriptiveness": 1}, NAMES)
    assert out["flips"][0]["share"] == 0.3 and not out["stable"]
    assert out["rank_interval"][:2] == [[1, 2], [1, 2]]


def test_criterion_score_is_the_mean_of_its_normalised_columns():
    """Two descriptiveness columns and one alignment column (lower is better), weights
    1 and 1. Min-max per column across the three sets, then by hand:

    ============  ==============  ============  ===========================
    set           a (z), b (z)    desc = mean   c raw -> z (inverted)
    ============  ==============  ============  ===========================
    A             10 (1), 0 (0)   0.5           4 -> 1 - (4-0)/4 = 0
    B              0 (0), 4 (1)   0.5           0 -> 1
    C              5 (.5), 3 (.75) 0.625        2 -> 0.5
    ============  ==============  ============  ===========================

    profile score = (desc + align) / 2: A 0.25, B 0.75, C 0.5625.
    """
    cols = [Column("a", "descriptiveness", True, "a"), Column("b", "descriptiveness", True, "b"),
            Column("c", "alignment", False, "c")]
    values = np.array([[10.0, 0.0, 4.0], [0.0, 4.0, 0.0], [5.0, 3.0, 2.0]])
    out = rank_profile(values, None, cols, {"descriptiveness": 1, "alignment": 1}, NAMES)
    assert out["criteria"]["descriptiveness"] == pytest.approx([0.5, 0.5, 0.625])
    assert out["criteria"]["alignment"] == pytest.approx([0.0, 1.0, 0.5])
    assert out["score"] == pytest.approx([0.25, 0.75, 0.5625])
    assert out["rank"] == [3, 1, 2]
    assert "rank_interval" not in out        # no replicates: no interval claimed


def test_flips_up_to_five_percent_are_stable():
    values = np.array([[2.0], [1.0], [0.0]])
    at = rank_profile(values, _reps(100, 5), ONE, {"descriptiveness": 1}, NAMES)
    over = rank_profile(values, _reps(100, 6), ONE, {"descriptiveness": 1}, NAMES)
    assert at["flips"][0]["share"] == 0.05 and at["stable"]
    assert over["flips"][0]["share"] == 0.06 and not over["stable"]


def test_ties_rank_in_set_order_and_missing_values_stay_missing():
    from capaudit.leaderboard.ranking import normalise, ranks_of

    assert ranks_of(np.array([0.5, 0.5, 0.2])).tolist() == [1, 2, 3]
    assert ranks_of(np.array([[0.1, 0.9], [0.9, 0.1]])).tolist() == [[2, 1], [1, 2]]
    z = normalise(np.array([[1.0], [np.nan], [3.0]]), np.array([False]))
    assert z[0, 0] == 1.0 and np.isnan(z[1, 0]) and z[2, 0] == 0.0   # lower is better


def test_zero_weights_leave_a_criterion_out():
    cols = [Column("a", "descriptiveness", True, "a"), Column("c", "alignment", True, "c")]
    values = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    out = rank_profile(values, None, cols, {"descriptiveness": 1, "alignment": 0}, NAMES)
    assert out["score"] == [1.0, 0.0, 0.5] and out["rank"] == [1, 3, 2]
    none = rank_profile(values, None, cols, {"descriptiveness": 0, "alignment": 0}, NAMES)
    assert all(np.isnan(none["score"]))
    assert out["weights"] == {"descriptiveness": 1, "alignment": 0}   # as asked, shown


def test_no_replicates_claim_no_interval():
    values = np.array([[2.0], [1.0], [0.0]])
    out = rank_profile(values, np.zeros((0, 3, 1)), ONE, {"descriptiveness": 1}, NAMES)
    assert set(out) == {"weights", "score", "rank", "criteria", "left_out"}   # no rank_interval


def test_ties_among_many_sets_keep_set_order():
    from capaudit.leaderboard.ranking import ranks_of

    score = np.array([0.0, 1.0] * 10)   # 20 sets: odd ones tie at 1, even ones at 0
    # the ten 1s take ranks 1..10 in set order, the ten 0s ranks 11..20
    want = [10 + i // 2 + 1 if i % 2 == 0 else (i + 1) // 2 for i in range(20)]
    assert ranks_of(score).tolist() == want


def test_normalise_divides_by_a_span_below_one():
    from capaudit.leaderboard.ranking import normalise

    z = normalise(np.array([[0.2], [0.6], [0.4]]), np.array([True]))
    assert z[:, 0].tolist() == pytest.approx([0.0, 1.0, 0.5])


def test_a_zero_weight_criterion_with_a_missing_value_changes_nothing():
    cols = [Column("a", "descriptiveness", True, "a"), Column("c", "alignment", True, "c")]
    values = np.array([[1.0, np.nan], [0.0, 1.0], [0.5, 0.0]])
    out = rank_profile(values, None, cols, {"descriptiveness": 1, "alignment": 0}, NAMES)
    assert out["score"] == [1.0, 0.0, 0.5]


def test_a_profile_whose_criteria_were_not_computed_scores_nothing():
    reps = _reps(20, 0)
    out = rank_profile(np.array([[2.0], [1.0], [0.0]]), reps, ONE, {"alignment": 1}, NAMES)
    assert all(np.isnan(out["score"])) and len(out["rank_interval"]) == 3


def test_rank_interval_upper_end_is_a_rank_not_an_interpolation():
    # A is 2nd in 3 of 100: the 97.5th percentile falls between the 97th rank (1) and the
    # 98th (2); the interval's end is the rank above (2), not 1.525 cut to 1
    out = rank_profile(np.array([[2.0], [1.0], [0.0]]), _reps(100, 3), ONE,
                       {"descriptiveness": 1}, NAMES)
    assert out["rank_interval"][0] == [1, 2]


def test_a_tie_in_a_replicate_is_not_a_flip():
    reps = _reps(100, 0)
    reps[:10, 1, 0] = 2.0                       # B equals A in 10 replicates, never above
    out = rank_profile(np.array([[2.0], [1.0], [0.0]]), reps, ONE, {"descriptiveness": 1},
                       NAMES)
    assert out["flips"][0] == {"above": "A", "below": "B", "share": 0.0}
