"""Mergeable accumulator states: what a metric keeps of the captions it has seen.

Why these shapes: an audit is a stream of chunks (one chunk for an in-memory
audit, many for a large file, one per shard or Ray worker), so a metric keeps
only state that two partial results can be *merged* into exactly the state of
the concatenated input. Bootstrap units are images, so the state is keyed by
*unit key*: the image id, or ``-(caption index + 1)`` for a caption without
one (its own unit, see :class:`~capaudit.metrics.context.MetricContext`).

- :class:`UnitSums`: dense per-unit column sums plus additive totals (counts,
  a confusion matrix); the common case (a ratio of sums).
- :class:`UnitCells`: sparse (unit, column) -> count cells, for wide
  statistics that are mostly zero (per-category hits of the recall disparity).
- :class:`Units`: the final unit order of the whole audit, given to
  ``finalize`` to turn keyed states into ``[units, k]`` bootstrap statistics.

Keep the values integer counts where you can: then merging is exact whatever
the chunking (float64 holds integers exactly up to 2**53), and a streamed audit
equals the in-memory one bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from capaudit.metrics.estimate import Estimate, ratio
from capaudit.metrics.state_types import register_state

__all__ = ["UnitSums", "UnitCells", "Units", "unit_order"]


def unit_order(keys: np.ndarray) -> np.ndarray:
    """Bootstrap order of unit keys: image ids ascending, then captions without an image
    in caption order (the order :class:`MetricContext` gives a single chunk)."""
    keys = np.asarray(keys, np.int64)
    neg = keys < 0
    return np.lexsort((np.where(neg, -keys, keys), neg))


def _add_totals(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Totals added key by key; a dict total (counts by name: the NSFW entries matched) is
    added name by name."""
    out = dict(a)
    for k, v in b.items():
        if k not in out:
            out[k] = v
        elif isinstance(v, dict):
            out[k] = _add_totals(out[k], v)
        else:
            out[k] = out[k] + v
    return out


@register_state
@dataclass
class UnitSums:
    """Per-unit column sums ``values[i]`` of unit ``keys[i]`` (sorted, unique) + totals."""

    keys: np.ndarray                       # int64 [n]
    values: np.ndarray                     # float64 [n, k]
    totals: dict[str, Any] = field(default_factory=dict)   # added on merge (numbers, arrays)

    @classmethod
    def of(cls, ctx, *columns: np.ndarray | None, mask: np.ndarray | None = None,
           **totals: Any) -> "UnitSums":
        """Sum per-caption ``columns`` (``None`` = 1 per caption) over the chunk's units."""
        cols = [ctx.per_unit(c if c is None else np.asarray(c, np.float64), mask) for c in columns]
        values = np.stack(cols, axis=1) if cols else np.zeros((ctx.n_units, 0))
        keys = ctx.unit_keys
        order = np.argsort(keys, kind="stable")
        return cls(keys[order], values[order], totals)

    def merge(self, other: "UnitSums") -> "UnitSums":
        keys = np.concatenate([self.keys, other.keys])
        uniq, inv = np.unique(keys, return_inverse=True)
        vals = np.concatenate([self.values, other.values])
        out = np.zeros((len(uniq), vals.shape[1]))
        for j in range(vals.shape[1]):  # a's sum then b's: deterministic
            out[:, j] = np.bincount(inv, weights=vals[:, j], minlength=len(uniq))
        return UnitSums(uniq, out, _add_totals(self.totals, other.totals))

    def dense(self, units: "Units") -> np.ndarray:
        """float64 [units, k] in bootstrap order (units absent here are zero)."""
        out = np.zeros((units.n, self.values.shape[1]))
        out[units.index(self.keys)] = self.values
        return out

    def ratio_estimate(self, units: "Units", scale: float = 100.0,
                       extra: dict[str, Any] | None = None) -> Estimate:
        """The (numerator, denominator) sums as an estimate of ``scale`` x their ratio, over
        ``n`` = the denominators' sum (the common ``finalize``)."""
        stats = self.dense(units)
        return Estimate(stats, ratio(scale), int(stats[:, 1].sum()), extra or {})


@register_state
@dataclass
class UnitCells:
    """Sparse counts of (unit key, column) cells, e.g. captions of an image naming a category."""

    keys: np.ndarray                       # int64 unit key per cell
    cols: np.ndarray                       # int64 column per cell
    vals: np.ndarray                       # float64 count per cell
    totals: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, keys, cols, vals=None, **totals: Any) -> "UnitCells":
        keys, cols = np.asarray(keys, np.int64), np.asarray(cols, np.int64)
        vals = np.ones(len(keys)) if vals is None else np.asarray(vals, np.float64)
        return cls(keys, cols, vals, totals).compact()

    def compact(self) -> "UnitCells":
        """One cell per (key, column), counts summed."""
        if not len(self.keys):
            return self
        order = np.lexsort((self.cols, self.keys))
        k, c, v = self.keys[order], self.cols[order], self.vals[order]
        start = np.flatnonzero(np.r_[True, (k[1:] != k[:-1]) | (c[1:] != c[:-1])])
        return UnitCells(k[start], c[start], np.add.reduceat(v, start), self.totals)

    def merge(self, other: "UnitCells") -> "UnitCells":
        return UnitCells(np.concatenate([self.keys, other.keys]),
                         np.concatenate([self.cols, other.cols]),
                         np.concatenate([self.vals, other.vals]),
                         _add_totals(self.totals, other.totals)).compact()


class Units:
    """Every bootstrap unit of an audit, in bootstrap order, and their caption counts.

    ``finalize`` maps keyed states onto these positions (:meth:`index`,
    :meth:`UnitSums.dense`); ``context`` is a :class:`MetricContext` whose
    'captions' are the units (for annotation matrices such as ``instances``).
    """

    def __init__(self, sums: UnitSums, mode: str, annotations, min_images: int,
                 config: dict | None = None):
        order = unit_order(sums.keys)
        self.keys = sums.keys[order]                       # bootstrap order
        self.n_caps = sums.values[order, 0] if len(order) else np.zeros(0)
        self.n = len(self.keys)
        self.n_captions = int(self.n_caps.sum())
        self.n_images = int((self.keys >= 0).sum())
        self.mode, self.annotations, self.min_images = mode, annotations, min_images
        self.config = config or {}
        self._sorted = sums.keys                           # sorted ascending (UnitSums keys)
        self._pos = np.empty(self.n, np.int64)
        self._pos[order] = np.arange(self.n)

    def index(self, keys: np.ndarray) -> np.ndarray:
        """Bootstrap position of each unit key (all must be units of this audit)."""
        return self._pos[np.searchsorted(self._sorted, np.asarray(keys, np.int64))]

    @cached_property
    def context(self):
        from capaudit.metrics.context import MetricContext, UnitRecords

        ids = np.where(self.keys >= 0, self.keys, -1)
        return MetricContext(UnitRecords(self.mode, self.n), ids, self.annotations,
                             self.min_images, config=self.config)
