"""Object recall: how many of the image's annotated categories the caption names.

Per caption, |mentioned categories & instance categories| / |instance
categories|, averaged over captions (x 100). Captions whose image has no
instance category (or no entry in the instance table) are skipped, as in the
reference definition. Note this differs from the Maxlinn CHAIR script's
"Recall" (a ratio of sums against the CHAIR ground truth).

All captions of an image share the denominator, so the state is integer hits
per image (exact under any chunking) and the per-image sum of recalls is
``hits / |instance categories|``, formed once in ``finalize``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from capaudit.metrics.base import Metric, register_metric
from capaudit.metrics.context import MetricContext
from capaudit.metrics.estimate import Estimate, ratio
from capaudit.metrics.state import UnitSums
from capaudit.core.arrays import from_numpy

__all__ = ["Recall", "caption_recall"]


def _hits(ctx: MetricContext) -> tuple[np.ndarray, np.ndarray]:
    """(instance categories mentioned, instance categories of the image) per caption."""
    inst, _ = ctx.instances
    caps, cats = ctx.mentioned_pairs
    hit = inst[ctx.unit[caps], cats]
    hits = np.bincount(caps[hit], minlength=len(ctx.records)).astype(np.float64)
    denom = inst.sum(axis=1)[ctx.unit].astype(np.float64)
    denom[~ctx.has_image] = 0
    return hits, denom


def caption_recall(ctx: MetricContext) -> np.ndarray:
    """float per caption; NaN where the caption is skipped."""
    hits, denom = _hits(ctx)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, hits / denom, np.nan)


@register_metric
class Recall(Metric):
    name, label = "recall", "Recall"
    description = "mean share of the image's instance categories the caption mentions (×100)"
    direction, criterion = +1, "descriptiveness"
    needs = frozenset({"instances"})
    corrected = True
    details = {"recall": pa.float64()}

    def update(self, ctx):
        hits, denom = _hits(ctx)
        m = denom > 0
        return UnitSums.of(ctx, hits, None, mask=m, skipped_captions=int((~m).sum()))

    def finalize(self, state, units):
        stats = state.dense(units)
        inst, _ = units.context.instances
        n_inst = inst.sum(axis=1).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            stats[:, 0] = np.where(n_inst > 0, stats[:, 0] / n_inst, 0.0)
        return Estimate(stats, ratio(), int(stats[:, 1].sum()),
                        {"skipped_captions": int(state.totals["skipped_captions"])})

    def caption_details(self, ctx):
        r = caption_recall(ctx)
        return {"recall": from_numpy(r, valid=~np.isnan(r))}
