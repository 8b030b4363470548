"""A 95% interval from bootstrap replicates: percentile, or re-centred on the point value.

Why a module of its own: :mod:`capaudit.audit.bootstrap` draws the replicates; this reads
intervals off them, for a value and for an estimate's sub-values (a category's recall
difference), with numpy's quantile arithmetic but without ``np.quantile``, whose first call
imports ``numpy.ma`` (~12 ms of every audit's start).
"""

from __future__ import annotations

import numpy as np

__all__ = ["interval", "part_intervals"]


def interval(values: np.ndarray, point: float | None, recentre: bool = False,
             level: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile interval of bootstrap ``values`` (NaNs dropped), or re-centred on ``point``."""
    v = values[~np.isnan(values)]
    if len(v) == 0:
        return None, None
    alpha = (1 - level) / 2
    lo, med, hi = _quantiles(v, (alpha, 0.5, 1 - alpha))
    if recentre and point is not None and not np.isnan(point):
        lo, hi = point - (med - lo), point + (hi - med)
    return float(lo), float(hi)


def part_intervals(reps: np.ndarray, level: float = 0.95) -> list[list[float | None]]:
    """Percentile intervals of an estimate's sub-values (``reps`` [n_boot, p]), rounded to
    9 decimals: a sharded audit sums the same replicates in another order, and the last
    bits of a sum must not make its record differ from the single-file audit's."""
    out = []
    for col in np.asarray(reps, np.float64).T:
        lo, hi = interval(col, None, False, level)
        out.append([None if lo is None else round(lo, 9), None if hi is None else round(hi, 9)])
    return out


def _quantiles(v: np.ndarray, qs) -> list[float]:
    """``np.quantile(v, qs)`` (its default, linear method, with its own arithmetic: the same
    floats), without ``np.quantile``'s ``np.unique``, whose first call imports ``numpy.ma``
    (~12 ms of every audit's start, for three numbers)."""
    s = np.sort(v)
    n = len(s)
    out = []
    for q in qs:
        virtual = (n - 1) * q                            # numpy's virtual index (linear)
        below = int(np.floor(virtual))
        gamma = virtual - below
        if virtual >= n - 1:                             # numpy: the last value
            below = n - 1
        a, b = s[below], s[min(below + 1, n - 1)]
        diff = b - a                                     # numpy's _lerp
        out.append(float(b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma))
    return out
