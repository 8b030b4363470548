"""Bootstrap 95% intervals over images, vectorised and shared by all metrics.

Why over images: captions of the same image are not independent (COCO has
five human captions per image), so the resampling unit is the image: draw
``n_units`` image ids with replacement and every caption of a drawn image
comes along (a caption without an image id is its own unit).

Why sufficient statistics: each metric gives per-image column sums
(:class:`~capaudit.metrics.estimate.Estimate`). A resample is a vector of
draw counts ``c`` (how often each image was drawn), and the resampled column
sums are ``c @ stats``. For a block of ``b`` resamples the counts are drawn
once as a ``[b, units]`` matrix (uniform integers, then one ``bincount`` per
row -- exactly the multinomial(n, 1/n) of "draw n images with replacement"),
and then:

* every dense metric at once: one BLAS product ``counts @ stacked`` against
  the concatenated per-unit statistics (float64, so resampled sums are exact
  up to rounding of the last bit);
* sparse statistics (the per-category recall table of ``recall_disparity``,
  non-zero only on images of labelled gender): a gather of the few columns
  that are non-zero and one ``scipy.sparse`` product
  (:meth:`~capaudit.metrics.estimate.SparseStats.resampled_sums`);
* metrics that are not sums (the vocabulary) get the count matrix itself
  (``Estimate.boot``).

Blocks hold ~2M counts (16 MB) so memory is bounded whatever the input size,
and independent blocks run on ``workers`` threads (random generation,
``bincount``, BLAS and the sparse product all release the GIL). Every metric
sees the same resamples (paired intervals).

Determinism: block sizes depend only on ``n_units`` and ``n_boot``, and each
block draws from its own generator spawned from ``seed``
(``SeedSequence(seed).spawn``), so the intervals are identical for any number
of workers. ``tests/test_metrics_bootstrap.py`` checks them against a plain
resample-the-images loop with the same generators.

Poisson bootstrap (``method="poisson"``; ``"auto"`` picks it from
``POISSON_MIN_UNITS`` units up): instead of a multinomial draw of ``n_units``
images, every unit gets an independent Poisson(1) weight per replicate, and
that weight is a pure function of ``(seed, image id, replicate)``
(:func:`poisson_counts`, a splitmix64 hash turned into a Poisson(1) draw by
its inverse CDF). No weight depends on the other units, so a shard, a worker
or a Ray task can compute its own replicate sums, and the intervals do not
depend on how the data was split or ordered. A caption without an image id
is weighted by its position in the bootstrap order (the same for every
split, :func:`~capaudit.metrics.state.unit_order`). The two bootstraps
agree within Monte-Carlo error (``tests/test_bootstrap_poisson.py`` on
COCO); the exact one stays the default below the threshold, so small audits
keep their published intervals.

Intervals are percentile intervals (2.5th and 97.5th), except for estimates
flagged ``recentre`` (biased statistics: the vocabulary, where a resample
holds only ~63% of the distinct images, and ``recall_disparity``, a mean of
absolute differences, biased upward), whose interval is the bootstrap spread
around its median moved onto the point value.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Mapping

import numpy as np

from capaudit.audit.intervals import interval, part_intervals
from capaudit.metrics.estimate import Estimate, SparseStats

PARTS = "#parts"   # key suffix of an estimate's sub-values (Estimate.parts) in the resamples

__all__ = ["PARTS", "part_intervals", "resample_counts", "poisson_counts", "choose_method", "bootstrap_intervals", "block_seeds", "block_sizes"]

POISSON_MIN_UNITS = 2_000_000  # "auto": Poisson bootstrap from this many units up
BLOCK_ELEMS = 2_000_000      # counts held per block (resamples x units)
PARALLEL_MIN = 1_000_000     # resamples x units below which threads are not worth starting


def resample_counts(n_units: int, b: int, seed) -> np.ndarray:
    """Draw counts, float64 [b, n_units]: how often each unit is drawn in each resample.

    Row ``r`` is the bincount of ``n_units`` uniform draws (row ``r`` of
    ``default_rng(seed).integers(0, n_units, (b, n_units))``).
    """
    rng = np.random.default_rng(seed)
    counts = np.empty((b, n_units), np.float64)
    for r in range(b):  # row by row: the draws stay in cache (same stream as one (b, n) call)
        counts[r] = np.bincount(rng.integers(0, n_units, n_units), minlength=n_units)
    return counts


_M1, _M2, _GOLD = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), \
    np.uint64(0x9E3779B97F4A7C15)
# Poisson(1) CDF up to k = 20 (the tail beyond is < 1e-19: below a 53-bit uniform's resolution)
_POISSON_CDF = np.cumsum([np.exp(-1.0) / np.prod(np.arange(1, k + 1, dtype=float))
                          for k in range(21)])


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (uint64 -> uint64, wrapping)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def unit_hash_keys(keys: np.ndarray) -> np.ndarray:
    """What a unit's Poisson weights hash: its image id, or (no id) its bootstrap position,
    offset past every image id, so both are split-independent."""
    keys = np.asarray(keys, np.int64)
    pos = np.arange(len(keys), dtype=np.int64)
    return np.where(keys >= 0, keys, np.int64(1 << 62) + pos).astype(np.uint64)


def poisson_counts(hkeys: np.ndarray, replicates: np.ndarray, seed: int) -> np.ndarray:
    """float64 [len(replicates), units]: the Poisson(1) weight of each unit in each replicate,
    a pure function of (seed, unit, replicate) (:func:`unit_hash_keys` gives ``hkeys``)."""
    with np.errstate(over="ignore"):
        base = _mix(np.asarray(hkeys, np.uint64) * _GOLD + _mix(np.uint64(seed) + _GOLD))
        rep = _mix((np.asarray(replicates, np.uint64) + np.uint64(1)) * _M2)
        h = _mix(base[None, :] ^ rep[:, None])
    u = (h >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
    return np.searchsorted(_POISSON_CDF, u, side="right").astype(np.float64)


def block_sizes(n_units: int, n_boot: int) -> list[int]:
    """Resamples per block (depends only on the input size, never on workers)."""
    block = max(1, min(n_boot, BLOCK_ELEMS // max(n_units, 1)))
    return [min(block, n_boot - s) for s in range(0, n_boot, block)]


def block_seeds(seed: int, n_blocks: int) -> list[np.random.SeedSequence]:
    return np.random.SeedSequence(seed).spawn(n_blocks)


class _Plan:
    """How to turn a block of counts into resampled values for every metric."""

    def __init__(self, estimates: Mapping[str, Estimate], n_units: int, hkeys=None, seed=0):
        self.estimates, self.n_units = estimates, n_units
        self.hkeys, self.seed = hkeys, seed   # hkeys: Poisson bootstrap
        names = [k for k in estimates if estimates[k].spread is None]  # spreads: no resamples
        self.custom = [k for k in names if estimates[k].boot is not None]
        self.sparse = [k for k in names if k not in self.custom
                       and isinstance(estimates[k].stats, SparseStats)]
        self.dense = [k for k in names if k not in self.custom and k not in self.sparse]
        widths = [estimates[k].stats.shape[1] for k in self.dense]
        self.edges = np.concatenate([[0], np.cumsum(widths)]).astype(int)
        self.stacked = (np.ascontiguousarray(np.concatenate(
            [np.asarray(estimates[k].stats, np.float64) for k in self.dense], axis=1))
            if self.dense and self.edges[-1] > 0 else None)

    def run(self, job: tuple[int, object]) -> dict[str, np.ndarray]:
        b, seed = job
        if self.hkeys is not None:  # seed is the first replicate of the block here
            counts = poisson_counts(self.hkeys, np.arange(seed, seed + b), self.seed)
        else:
            counts = resample_counts(self.n_units, b, seed)
        out: dict[str, np.ndarray] = {}
        sums = counts @ self.stacked if self.stacked is not None else np.zeros((b, 0))
        for i, k in enumerate(self.dense):
            out[k] = np.asarray(self.estimates[k].finalize(sums[:, self.edges[i]:self.edges[i + 1]]),
                                dtype=np.float64)
        for k in self.sparse:
            est = self.estimates[k]
            sums = est.stats.resampled_sums(counts)
            out[k] = est.finalize(sums)
            if est.parts is not None:
                out[k + PARTS] = np.asarray(est.parts(sums), np.float64)
        for k in self.custom:
            out[k] = np.asarray(self.estimates[k].boot(counts), dtype=np.float64)
        return out


def _single_threaded_blas():
    """The products are skinny ([b, units] x [units, ~10]): BLAS threads only
    spin against each other and against our block threads, so use one."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - optional
        return nullcontext()
    return threadpool_limits(1, user_api="blas")


def choose_method(method: str | None, n_units: int) -> str:
    """``exact`` or ``poisson`` for ``method`` (``auto``/None: by ``POISSON_MIN_UNITS``)."""
    if method in (None, "auto"):
        return "poisson" if n_units >= POISSON_MIN_UNITS else "exact"
    if method not in ("exact", "poisson"):
        from capaudit.errors import InputError
        raise InputError(f"unknown bootstrap '{method}'", fix="use auto, exact or poisson")
    return method


def bootstrap_values(estimates: Mapping[str, Estimate], n_units: int, n_boot: int = 1000,
                     seed: int = 0, workers: int = 1, keys: np.ndarray | None = None,
                     method: str | None = "exact") -> dict[str, np.ndarray]:
    """``{name: values [n_boot]}``: every metric on the same ``n_boot`` resamples of units.

    ``keys`` (unit keys in bootstrap order) are needed by the Poisson bootstrap."""
    poisson = choose_method(method, n_units) == "poisson"
    if poisson and keys is None:
        raise ValueError("the Poisson bootstrap needs the unit keys")
    plan = _Plan(estimates, n_units, unit_hash_keys(keys) if poisson else None, seed)
    sizes = block_sizes(n_units, n_boot)
    starts = list(np.cumsum([0] + sizes[:-1]))
    jobs = list(zip(sizes, starts if poisson else block_seeds(seed, len(sizes))))
    with _single_threaded_blas():
        if workers > 1 and len(jobs) > 1 and n_boot * n_units >= PARALLEL_MIN:
            from concurrent.futures import ThreadPoolExecutor  # not at start-up: 25 ms

            with ThreadPoolExecutor(min(workers, len(jobs))) as ex:
                parts = list(ex.map(plan.run, jobs))  # in block order: deterministic
        else:
            parts = [plan.run(j) for j in jobs]
    out = {k: (np.asarray(est.spread(n_boot), np.float64) if est.spread is not None
               else np.concatenate([p[k] for p in parts])) for k, est in estimates.items()}
    for k in plan.sparse:   # sub-values, [n_boot, p]
        if estimates[k].parts is not None:
            out[k + PARTS] = np.concatenate([p[k + PARTS] for p in parts])
    return out


def bootstrap_intervals(estimates: Mapping[str, Estimate], n_units: int, n_boot: int = 1000,
                        seed: int = 0, level: float = 0.95, workers: int = 1,
                        keys: np.ndarray | None = None, method: str | None = "exact",
                        used: dict[str, str] | None = None
                        ) -> dict[str, tuple[float | None, float | None]]:
    """``{name: (low, high)}`` 95% intervals for every estimate (see the module docstring).

    ``method`` ``auto`` (the audit's default) draws a metric whose per-unit statistics
    take few distinct rows by groups (:mod:`capaudit.audit.bootstrap_grouped`: the same
    distribution, far fewer draws); ``exact`` never groups. ``used``, when given, is
    filled with the bootstrap each interval came from (``exact``, ``grouped``, ``poisson``).
    """
    base = choose_method(method, n_units)
    groups = {}
    if method in (None, "auto") and base == "exact" and n_boot > 0:
        from capaudit.audit.bootstrap_grouped import row_groups

        for k, est in estimates.items():
            g = (row_groups(est.stats) if est.boot is None and est.spread is None
                 and not isinstance(est.stats, SparseStats) else None)
            if g is not None:
                groups[k] = g
    if used is not None:
        used.update({k: "grouped" if k in groups else base for k in estimates})
    if n_boot <= 0 or n_units == 0 or not estimates:
        return {k: (None, None) for k in estimates}
    rest = {k: est for k, est in estimates.items() if k not in groups}
    vals = bootstrap_values(rest, n_units, n_boot, seed, workers, keys, method) if rest else {}
    if groups:
        from capaudit.audit.bootstrap_grouped import grouped_values, metric_seed

        for k, g in groups.items():
            vals[k] = grouped_values(g, estimates[k].finalize, n_boot, metric_seed(seed, k))
    out: dict[str, tuple[float | None, float | None]] = {}
    for k, est in estimates.items():
        point = est.value
        if point is None and est.recentre:
            point = float(est.finalize(est.stats.sum(axis=0)))
        out[k] = interval(vals[k], point, est.recentre, level)
        if k + PARTS in vals:
            out[k + PARTS] = part_intervals(vals[k + PARTS], level)
    return out
