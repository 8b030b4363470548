"""Bootstrap 95% intervals over images, vectorised and shared by all metrics.

Why over images: captions of the same image are not independent (COCO has
five human captions per image), so the resampling unit is the image: draw
``n_units`` image ids with replacement and every caption of a drawn image
comes along (a caption without an image id is its own unit).

Why sufficient statistics: each metric gives per-image column sums
(:class:`~capaudit.audit.metrics.base.Estimate`). A resample is a vector of
draw counts ``c`` (how often each image was drawn), and the resampled column
sums are ``c @ stats`` -- one matrix product for all dense metrics at once
(a gather for sparse ones such as the per-category recall table), in blocks
of resamples so memory stays bounded (~16 MB of counts per block). Every
metric sees the same resamples (paired intervals). Metrics that are not sums
(the vocabulary) get the count matrix itself (``Estimate.boot``).

Each block has its own seed spawned from ``seed``, so the intervals are the
same whether the blocks run in this process or on ``workers`` forked
processes. Intervals are percentile intervals (2.5th and 97.5th), except for
estimates flagged ``recentre`` (the vocabulary: a resample holds only ~63% of
the distinct images, so distinct-token counts are biased low), whose interval
is the bootstrap spread around the median moved onto the point value.
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Mapping

import numpy as np

from capaudit.audit.metrics.base import Estimate, SparseStats

__all__ = ["resample_counts", "bootstrap_intervals"]

BLOCK_ELEMS = 2_000_000      # counts held per block (resamples x units)
PARALLEL_MIN = 4_000_000     # resamples x units below which a pool is not worth starting


def resample_counts(n_units: int, b: int, seed) -> np.ndarray:
    """Draw counts, float64 [b, n_units]: how often each unit is drawn in each resample."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_units, size=(b, n_units))
    counts = np.empty((b, n_units), np.float64)
    for r in range(b):  # row-wise bincount: cache friendly, ~2x faster than one big one
        counts[r] = np.bincount(draws[r], minlength=n_units)
    return counts


class _Plan:
    """How to turn a block of counts into resampled values for every metric."""

    def __init__(self, estimates: Mapping[str, Estimate], n_units: int):
        self.estimates, self.n_units = estimates, n_units
        names = list(estimates)
        self.custom = [k for k in names if estimates[k].boot is not None]
        self.sparse = [k for k in names if k not in self.custom
                       and isinstance(estimates[k].stats, SparseStats)]
        self.dense = [k for k in names if k not in self.custom and k not in self.sparse]
        widths = [estimates[k].stats.shape[1] for k in self.dense]
        self.edges = np.concatenate([[0], np.cumsum(widths)]).astype(int)
        self.stacked = (np.concatenate([estimates[k].stats for k in self.dense], axis=1)
                        if self.dense else None)

    def run(self, job: tuple[int, object]) -> dict[str, np.ndarray]:
        b, seed = job
        counts = resample_counts(self.n_units, b, seed)
        out: dict[str, np.ndarray] = {}
        if self.stacked is not None:
            sums = counts @ self.stacked
            for i, k in enumerate(self.dense):
                out[k] = self.estimates[k].finalize(sums[:, self.edges[i]:self.edges[i + 1]])
        for k in self.sparse:
            out[k] = self.estimates[k].finalize(self.estimates[k].stats.resampled_sums(counts))
        for k in self.custom:
            out[k] = np.asarray(self.estimates[k].boot(counts), dtype=np.float64)
        return out


_PLAN: _Plan | None = None  # read by forked workers


def _run_block(job):
    return _PLAN.run(job)


def bootstrap_intervals(estimates: Mapping[str, Estimate], n_units: int, n_boot: int = 1000,
                        seed: int = 0, level: float = 0.95, workers: int = 1
                        ) -> dict[str, tuple[float | None, float | None]]:
    """``{name: (low, high)}`` percentile intervals for every estimate."""
    global _PLAN
    if n_boot <= 0 or n_units == 0 or not estimates:
        return {k: (None, None) for k in estimates}
    plan = _Plan(estimates, n_units)
    block = max(1, min(n_boot, BLOCK_ELEMS // n_units))
    sizes = [min(block, n_boot - s) for s in range(0, n_boot, block)]
    jobs = list(zip(sizes, np.random.SeedSequence(seed).spawn(len(sizes))))
    if workers > 1 and len(jobs) > 1 and n_boot * n_units >= PARALLEL_MIN:
        _PLAN = plan
        try:
            with mp.get_context("fork").Pool(min(workers, len(jobs))) as pool:
                parts = pool.map(_run_block, jobs)
        finally:
            _PLAN = None
    else:
        parts = [plan.run(j) for j in jobs]
    alpha = (1 - level) / 2
    out: dict[str, tuple[float | None, float | None]] = {}
    for k in estimates:
        v = np.concatenate([p[k] for p in parts])
        v = v[~np.isnan(v)]
        if len(v) == 0:
            out[k] = (None, None)
        else:
            lo, med, hi = np.quantile(v, [alpha, 0.5, 1 - alpha])
            est = estimates[k]
            if est.recentre and est.value is not None:
                lo, hi = est.value - (med - lo), est.value + (hi - med)
            out[k] = (float(lo), float(hi))
    return out
