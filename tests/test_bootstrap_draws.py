"""The bootstrap's draws and their bookkeeping (``audit/bootstrap.py``), each against what its
docstring says, computed here another way: exact resample counts as one numpy draw, Poisson
weights' frequencies against the Poisson(1) law, blocks and unit keys by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from capaudit.audit.bootstrap import (
    block_sizes,
    bootstrap_intervals,
    bootstrap_values,
    choose_method,
    interval,
    poisson_counts,
    resample_counts,
    unit_hash_keys,
)
from capaudit.errors import InputError
from capaudit.metrics.estimate import Estimate, ratio


def test_resample_counts_are_bincounts_of_one_uniform_draw():
    # the docstring: row r is the bincount of row r of default_rng(seed).integers(0, n, (b, n))
    draws = np.random.default_rng(11).integers(0, 37, (25, 37))
    want = np.stack([np.bincount(row, minlength=37) for row in draws]).astype(float)
    got = resample_counts(37, 25, 11)
    assert got.dtype == np.float64 and np.array_equal(got, want)
    assert (got.sum(axis=1) == 37).all()            # each resample draws n units


@pytest.mark.parametrize("n_units, n_boot, sizes", [
    (1_000, 5_000, [2_000, 2_000, 1_000]),       # 2,000,000 counts per block / 1,000 units
    (10, 7, [7]),                                  # everything in one block
    (0, 3, [3]),                                   # no units: one block all the same
    (3_000_000, 3, [1, 1, 1]),                     # more units than a block holds: one each
    (10, 0, []),
])
def test_block_sizes(n_units, n_boot, sizes):
    assert block_sizes(n_units, n_boot) == sizes


def test_unit_hash_keys_put_units_without_an_id_past_every_id():
    got = unit_hash_keys(np.array([0, 5, -1, 7, -3], np.int64))
    assert got.dtype == np.uint64
    assert got.tolist() == [0, 5, 2**62 + 2, 7, 2**62 + 4]   # image 0 is an id; positions 2, 4


def test_poisson_weights_follow_the_poisson_law():
    w = poisson_counts(unit_hash_keys(np.arange(100_000)), np.arange(4), seed=3).ravel()
    # P(k) = e^-1 / k!; with 400,000 draws the standard error of each share is < 0.0008
    for k in range(4):
        assert (w == k).mean() == pytest.approx(math.exp(-1) / math.factorial(k), abs=0.003), k
    assert w.min() == 0 and w.max() >= 6 and (w == np.round(w)).all()


def test_choose_method():
    assert choose_method(None, 10) == "exact" and choose_method("poisson", 10) == "poisson"
    with pytest.raises(InputError, match="unknown bootstrap 'fast'"):
        choose_method("fast", 10)


def test_poisson_needs_the_unit_keys():
    est = {"m": Estimate(np.ones((3, 2)), ratio(), 3)}
    with pytest.raises(ValueError, match="unit keys"):
        bootstrap_values(est, 3, 10, method="poisson")


def test_interval_level_and_a_missing_point():
    v = np.arange(101, dtype=float)
    assert interval(v, None, level=0.5) == pytest.approx((25.0, 75.0))   # the quartiles
    assert interval(v, None, recentre=True) == pytest.approx((2.5, 97.5))  # no point
    assert interval(v, float("nan"), recentre=True) == pytest.approx((2.5, 97.5))


def test_no_resamples_no_units_no_interval():
    est = {"m": Estimate(np.ones((3, 2)), ratio(), 3)}
    assert bootstrap_intervals(est, 3, n_boot=0) == {"m": (None, None)}
    assert bootstrap_intervals(est, 0, n_boot=10) == {"m": (None, None)}
    assert bootstrap_intervals({}, 3, n_boot=10) == {}


def test_the_bootstrap_used_is_reported():
    # 40 units whose statistics take two distinct rows: "auto" draws them by groups
    rows = np.array([[1.0, 2.0], [0.0, 2.0]])[np.arange(40) % 2]
    est = {"m": Estimate(rows, ratio(), 40)}
    used: dict = {}
    bootstrap_intervals(est, 40, n_boot=50, method="auto", used=used)
    assert used == {"m": "grouped"}
    bootstrap_intervals(est, 40, n_boot=50, method="exact", used=used)
    assert used == {"m": "exact"}
    bootstrap_intervals(est, 40, n_boot=50, method="poisson", keys=np.arange(40), used=used)
    assert used == {"m": "poisson"}


def test_a_recentred_estimate_without_a_value_is_centred_on_its_statistics():
    # the point is the statistics' finalised sum: 100 x 20 / 80 = 25
    rows = np.array([[1.0, 2.0], [0.0, 2.0]])[np.arange(40) % 2]
    est = Estimate(rows, ratio(), 40, recentre=True)
    lo, hi = bootstrap_intervals({"m": est}, 40, n_boot=200, seed=2, method="exact")["m"]
    vals = bootstrap_values({"m": est}, 40, 200, seed=2, method="exact")["m"]
    q_lo, med, q_hi = np.quantile(vals, [0.025, 0.5, 0.975])
    assert (lo, hi) == pytest.approx((25 - (med - q_lo), 25 + (q_hi - med)))


# -- the Poisson weights' stream, written out in plain Python integers ---------------------------
# A sharded or Ray audit reproduces a single-file audit's intervals, and a rerun reproduces a
# published one, only if every weight is the same pure function of (seed, unit, replicate):
# splitmix64's finaliser (its published constants) over the unit's key, the seed and the
# replicate, then Poisson(1)'s inverse CDF. Here that function is computed with Python's
# integers (no numpy wrap-around) and math's factorials, independently of the vectorised code.
_MASK = (1 << 64) - 1
_SM_M1, _SM_M2, _SM_GOLD = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0x9E3779B97F4A7C15


def _splitmix_finaliser(x: int) -> int:
    x = ((x ^ (x >> 30)) * _SM_M1) & _MASK
    x = ((x ^ (x >> 27)) * _SM_M2) & _MASK
    return x ^ (x >> 31)


def _plain_weight(key: int, replicate: int, seed: int) -> int:
    base = _splitmix_finaliser((key * _SM_GOLD + _splitmix_finaliser((seed + _SM_GOLD) & _MASK))
                               & _MASK)
    rep = _splitmix_finaliser(((replicate + 1) * _SM_M2) & _MASK)
    u = (_splitmix_finaliser(base ^ rep) >> 11) / 2**53          # uniform on [0, 1), 53 bits
    cdf = [sum(math.exp(-1) / math.factorial(j) for j in range(k + 1)) for k in range(21)]
    return sum(c <= u for c in cdf)                               # the smallest k with u < F(k)


def test_poisson_weights_are_the_documented_hash_of_seed_unit_and_replicate():
    keys = [0, 1, 2, 9, 318219, 10**18 - 1, 2**62 + 0, 2**62 + 5] + list(range(1000, 1060))
    for seed in (0, 7):
        got = poisson_counts(keys, np.arange(6), seed)          # a plain list of keys too
        want = [[_plain_weight(k, r, seed) for k in keys] for r in range(6)]
        assert got.tolist() == want, seed


def test_defaults_are_1000_replicates_seed_0_and_95_percent():
    asked = []
    spread = Estimate(np.zeros((3, 1)), lambda s: s[..., 0], 3, value=0.0,
                      spread=lambda n: asked.append(n) or np.arange(n, dtype=float))
    lo, hi = bootstrap_intervals({"m": spread}, 3)["m"]
    assert asked == [1000] and (lo, hi) == pytest.approx((0.025 * 999, 0.975 * 999))
    # a statistic with 40 distinct values, so another seed moves the interval
    rows = np.column_stack([np.sqrt(np.arange(40.0)), np.full(40, 2.0)])
    est = {"m": Estimate(rows, ratio(), 40)}
    assert bootstrap_intervals(est, 40) == bootstrap_intervals(est, 40, 1000, seed=0)
    assert bootstrap_intervals(est, 40) != bootstrap_intervals(est, 40, 1000, seed=1)
