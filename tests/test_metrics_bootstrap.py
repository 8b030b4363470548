"""The vectorised bootstrap equals an explicit resample-the-images loop."""

from __future__ import annotations

import numpy as np

from capaudit.audit.bootstrap import bootstrap_intervals, resample_counts
from capaudit.audit.metrics.base import Estimate, SparseStats, ratio


def test_ratio_of_sums_matches_explicit_resampling():
    rng = np.random.default_rng(0)
    n_img = 300
    num = rng.integers(0, 5, n_img).astype(float)
    den = num + rng.integers(1, 5, n_img)
    est = {"m": Estimate(np.stack([num, den], 1), ratio(), n_img)}
    lo, hi = bootstrap_intervals(est, n_img, n_boot=400, seed=7)["m"]
    # the same resamples, drawn explicitly as image ids
    seeds = np.random.SeedSequence(7).spawn(1)
    counts = resample_counts(n_img, 400, seeds[0])
    vals = 100 * (counts @ num) / (counts @ den)
    assert (lo, hi) == tuple(np.quantile(vals, [0.025, 0.975]))
    point = 100 * num.sum() / den.sum()
    assert lo < point < hi


def test_sparse_stats_equal_dense():
    rng = np.random.default_rng(1)
    dense = np.where(rng.random((200, 12)) < 0.1, rng.random((200, 12)), 0.0)
    u, c = np.nonzero(dense)
    sp = SparseStats(u, c, dense[u, c], dense.shape)
    counts = resample_counts(200, 30, 0)
    assert np.allclose(sp.resampled_sums(counts), counts @ dense)
    assert np.allclose(sp.sum(axis=0), dense.sum(axis=0))


def test_blocks_do_not_change_the_result(monkeypatch):
    import capaudit.audit.bootstrap as bs
    est = {"m": Estimate(np.ones((50, 2)) * [1, 2], ratio(), 50)}
    a = bs.bootstrap_intervals(est, 50, 100, seed=1)
    monkeypatch.setattr(bs, "BLOCK_ELEMS", 50 * 7)
    b = bs.bootstrap_intervals(est, 50, 100, seed=1)
    assert a["m"] == pytest_approx(b["m"])


def pytest_approx(x):
    import pytest
    return pytest.approx(x)
