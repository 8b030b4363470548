"""The accumulator of every metric that is a mean of a per-caption value (the LOTUS ones).

A subclass gives ``values(ctx)`` (one float per caption, ``NaN`` where undefined)
and optionally ``totals(ctx)`` (counters added over chunks); the state is the
per-image (sum, count) of the defined values, so the mean bootstraps over
images as a ratio of sums and merges exactly across chunks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from capaudit.metrics.base import Metric
from capaudit.metrics.context import MetricContext
from capaudit.metrics.state import UnitSums
from capaudit.core.arrays import from_numpy

__all__ = ["PerCaptionMean"]


class PerCaptionMean(Metric):
    """Mean of a per-caption value over the captions where it is defined (not NaN), kept as
    per-image (sum, count) sums; ``extra['undefined']`` counts the other captions. The value
    is also the metric's per-caption detail column: ``details`` is ``{name: float64}`` unless
    a subclass declares its own (and its own :meth:`caption_details`)."""

    scale = 1.0

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.name and "details" not in cls.__dict__:
            cls.details = {cls.name: pa.float64()}

    def values(self, ctx: MetricContext) -> np.ndarray:
        raise NotImplementedError

    def totals(self, ctx: MetricContext) -> dict[str, Any]:
        return {}

    def update(self, ctx):
        v = np.asarray(self.values(ctx), np.float64)
        ok = ~np.isnan(v)
        return UnitSums.of(ctx, np.where(ok, v, 0.0), None, mask=ok, undefined=int((~ok).sum()),
                           **self.totals(ctx))

    def finalize(self, state, units):
        extra = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in state.totals.items()}
        return state.ratio_estimate(units, self.scale, extra)

    def caption_details(self, ctx):
        v = np.asarray(self.values(ctx), np.float64) * self.scale
        return {self.name: from_numpy(v, valid=~np.isnan(v))}
