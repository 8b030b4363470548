"""The interval the bootstrap reports (``audit/bootstrap.py``): the 2.5th and 97.5th percentiles
of the replicates, or, for a biased statistic (``recentre``), that spread around the
replicates' median moved onto the point value. Replicates chosen so the quantiles are known
by hand."""

from __future__ import annotations

import numpy as np
import pytest

from capaudit.audit.bootstrap import bootstrap_intervals
from capaudit.metrics.estimate import Estimate

# 101 replicates, skewed: 0, 1, ..., 50, then 52, 54, ..., 150. With linear interpolation the
# 2.5th percentile sits at position 2.5 (value 2.5), the median at 50 (value 50), the 97.5th
# at position 97.5, halfway between the 97th (144) and 98th (146) values: 145.
SKEWED = np.array([i if i <= 50 else 50 + 2 * (i - 50) for i in range(101)], dtype=float)


def _interval(recentre: bool, point: float = 10.0, values=SKEWED):
    est = Estimate(np.zeros((3, 1)), lambda s: s[..., 0], 3, value=point, recentre=recentre,
                   spread=lambda n: values)
    return bootstrap_intervals({"m": est}, n_units=3, n_boot=len(values))["m"]


def test_percentile_interval():
    assert _interval(False) == pytest.approx((2.5, 145.0))


def test_recentred_interval_keeps_the_asymmetric_spread_around_the_point():
    # 47.5 below the median and 95 above it, moved onto the point value 10
    assert _interval(True) == pytest.approx((10 - 47.5, 10 + 95.0))


def test_recentred_interval_of_a_symmetric_spread_is_centred_on_the_point():
    lo, hi = _interval(True, point=1000.0, values=np.arange(101, dtype=float))
    assert (lo, hi) == pytest.approx((1000 - 47.5, 1000 + 47.5))


def test_replicates_that_failed_are_left_out():
    with_nan = np.concatenate([SKEWED, [np.nan] * 7])
    assert _interval(False, values=with_nan) == pytest.approx((2.5, 145.0))
    assert _interval(False, values=np.full(5, np.nan)) == (None, None)
