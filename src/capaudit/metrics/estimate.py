"""What a metric's accumulator gives: per-unit statistics, and the result reported.

``finalize`` returns an :class:`Estimate` -- per-unit sufficient statistics
(dense, or :class:`SparseStats` when mostly zero) and the function from their
column sums to the value -- which the engine bootstraps over images
(:mod:`capaudit.audit.bootstrap`) without re-running the metric; the point value
and interval become a :class:`MetricResult`. :func:`ratio` is the ``finalize``
of the common numerator/denominator statistic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

import numpy as np

__all__ = ["MetricResult", "SparseStats", "Estimate", "ratio"]


@dataclass
class MetricResult:
    """One metric on one caption set: the value with everything that must travel with it.

    Value, 95% bootstrap interval, ``n`` (the metric's own count: captions, mentions) and
    ``n_images`` (the images -- bootstrap units -- with a statistic: what an interval rests
    on), the share of the set's images each annotation it read covers, and a ``status``
    (``ok``, ``partial``, ``capped``, ``by-construction``, ``circular``, ``too-few``;
    ``skipped: why`` when ``skipped``) with ``notes`` saying why. Every view writes it through
    :mod:`capaudit.metrics.present`, so a caveat shown in one place is shown in all.
    """

    value: float | None
    n: int
    ci_low: float | None = None
    ci_high: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None   # reason, when the metric could not be computed
    n_images: int | None = None
    status: str = "ok"
    notes: list[str] = field(default_factory=list)
    coverage: dict[str, float] = field(default_factory=dict)   # annotation kind -> share

    @property
    def state(self) -> str:
        """The status as every view writes it (``skipped: why`` for a skipped metric;
        ``partial; too-few`` for a partial value that has another status too, so the JSON,
        the store and ``to_pandas()`` never drop the partial coverage)."""
        if self.skipped:
            return f"skipped: {self.skipped}"
        partial = self.status != "partial" and any(t.startswith("partial") for t in self.notes)
        return f"partial; {self.status}" if partial else self.status

    def mark(self, status: str, note: str | None = None) -> None:
        """Set the status (the last one set is the headline) and keep its note."""
        self.status = status
        if note and note not in self.notes:
            self.notes.append(note)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "n": self.n, "ci": [self.ci_low, self.ci_high],
                               "n_images": self.n_images, "status": self.state}
        if self.notes:
            out["notes"] = list(self.notes)
        if self.coverage:
            out["coverage"] = dict(self.coverage)
        if self.skipped:
            out["skipped"] = self.skipped
        if self.extra.get("independent") is not None:   # a circular value's other score
            out["independent"] = dict(self.extra["independent"])
        if "distinct" in self.extra:  # vocab: exact count or HyperLogLog sketch
            out["distinct"] = self.extra["distinct"]
        return out


class SparseStats:
    """Mostly-zero per-unit statistics in coordinate form (e.g. units x categories)."""

    def __init__(self, units: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape: tuple[int, int]):
        order = np.lexsort((units, cols))  # group by column
        self.units, self.cols = units[order], cols[order]
        self.vals = np.asarray(vals, np.float64)[order]
        self.shape = shape
        self.ucols, self.starts = np.unique(self.cols, return_index=True)

    def sum(self, axis: int = 0) -> np.ndarray:
        assert axis == 0
        return np.bincount(self.cols, weights=self.vals, minlength=self.shape[1])

    @cached_property
    def _product(self):
        """(non-zero units, their statistics) for :meth:`resampled_sums`.

        A ``scipy.sparse`` CSR matrix [those units, k] when scipy is installed,
        else ``None`` (numpy gather + ``reduceat`` fallback, same sums).
        """
        rows, inv = np.unique(self.units, return_inverse=True)
        try:
            import scipy.sparse as sp
        except ImportError:  # pragma: no cover - scipy is optional
            return rows, inv, None
        mat = sp.csr_array((self.vals, (inv, self.cols)), shape=(len(rows), self.shape[1]))
        mat.sum_duplicates()
        return rows, inv, mat

    def resampled_sums(self, counts: np.ndarray) -> np.ndarray:
        """``counts @ stats`` for a block of draw counts [b, units] -> [b, k].

        Only the units with a non-zero statistic are gathered (e.g. images of
        labelled gender for the recall-disparity table), then one sparse product.
        """
        if not len(self.units):
            return np.zeros((len(counts), self.shape[1]))
        rows, inv, mat = self._product
        sub = counts[:, rows]
        if mat is not None:
            return np.asarray(sub @ mat, dtype=np.float64)
        out = np.zeros((self.shape[1], len(counts)))
        contrib = np.ascontiguousarray(sub.T)[inv] * self.vals[:, None]
        out[self.ucols] = np.add.reduceat(contrib, self.starts, axis=0)
        return out.T


@dataclass
class Estimate:
    """Per-unit sufficient statistics of a metric (rows = bootstrap units)."""

    stats: np.ndarray | SparseStats                    # float64 [units, k]
    finalize: Callable[[np.ndarray], np.ndarray]       # [..., k] column sums -> [...] values
    n: int
    extra: dict[str, Any] = field(default_factory=dict)
    # custom bootstrap: f(counts [b, units]) -> values [b]; used instead of stats when set
    boot: Callable[[np.ndarray], np.ndarray] | None = None
    value: float | None = None                         # set when not a function of the sums
    recentre: bool = False  # interval = bootstrap spread around the point value (biased statistics)
    # values [n_boot] that come from no resample (a sketch's error band): f(n_boot), used
    # instead of the resamples, so how the replicates are split into blocks cannot matter
    spread: Callable[[int], np.ndarray] | None = None
    # sub-values from the same column sums ([..., k] -> [..., p]: recall disparity's
    # per-category differences), bootstrapped on the same resamples (extra["parts_ci"])
    parts: Callable[[np.ndarray], np.ndarray] | None = None


def ratio(scale: float = 100.0) -> Callable[[np.ndarray], np.ndarray]:
    """``finalize`` for a two-column (numerator, denominator) statistic."""
    def fin(s: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return scale * s[..., 0] / s[..., 1]
    return fin
