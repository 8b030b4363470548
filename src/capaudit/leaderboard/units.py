"""The sets' bootstrap units: each set's estimates over its own images, lifted onto their union.

The compared sets describe the same images, so the leaderboard resamples the
union of their images once and applies each resample to every set:
:class:`ImageUnion` maps every set's units (its images, then its image-less
captions) onto the union's and lifts a set's
:class:`~capaudit.metrics.estimate.Estimate` there, optionally restricted to
one group's images (the bias gaps).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from capaudit.audit.engine import point_value
from capaudit.metrics.estimate import Estimate, SparseStats

__all__ = ["SetEval", "ImageUnion"]


@dataclass
class SetEval:
    """One set's metric estimates over its own units (``images[k]`` = image id of unit k)."""

    name: str
    estimates: dict[str, Estimate]
    skipped: dict[str, str]
    images: np.ndarray
    n_units: int
    worst: list[dict] = field(default_factory=list)



class ImageUnion:
    """Units of the union of the sets' images (+ each set's image-less captions)."""

    def __init__(self, sets: Sequence[SetEval]):
        imgs = np.unique(np.concatenate([s.images for s in sets])) if sets else np.zeros(0, int)
        self.images = imgs
        self.cols: dict[str, np.ndarray] = {}
        extra = len(imgs)
        for s in sets:
            c = np.empty(s.n_units, np.int64)
            c[:len(s.images)] = np.searchsorted(imgs, s.images)
            k = s.n_units - len(s.images)
            c[len(s.images):] = extra + np.arange(k)
            extra += k
            self.cols[s.name] = c
        self.n = extra

    def lift(self, s: SetEval, est: Estimate, mask: np.ndarray | None = None) -> Estimate | None:
        """``est`` over the union's units (restricted to ``mask`` units); None if impossible."""
        cols = self.cols[s.name]
        if est.spread is not None:  # a sketch's error band: no per-unit statistics to restrict
            return None if mask is not None else Estimate(
                np.zeros((self.n, 0)), est.finalize, est.n, value=point_value(est),
                spread=est.spread)
        if est.boot is not None or isinstance(est.stats, SparseStats):
            if mask is not None:
                return None
            if est.boot is not None:
                boot = est.boot
                return Estimate(np.zeros((self.n, 0)), est.finalize, est.n,
                                boot=lambda c, cols=cols, boot=boot: boot(c[:, cols]),
                                value=point_value(est), recentre=est.recentre)
            st, fin = est.stats, est.finalize
            return Estimate(np.zeros((self.n, 0)), fin, est.n,
                            boot=lambda c, cols=cols: fin(st.resampled_sums(c[:, cols])),
                            value=point_value(est), recentre=est.recentre)
        stats = np.zeros((self.n, est.stats.shape[1]))
        stats[cols] = est.stats
        if mask is not None:
            stats *= mask[:, None]
        return Estimate(stats, est.finalize, est.n, recentre=est.recentre)

    def group_mask(self, labels: Mapping[int, str], group: str) -> np.ndarray:
        m = np.zeros(self.n, bool)
        m[:len(self.images)] = [labels.get(int(i)) == group for i in self.images]
        return m
