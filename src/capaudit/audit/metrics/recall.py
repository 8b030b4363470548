"""Object recall: how many of the image's annotated categories the caption names.

Per caption, |mentioned categories & instance categories| / |instance
categories|, averaged over captions (x 100). Captions whose image has no
instance category (or no entry in the instance table) are skipped, as in the
reference definition. Note this differs from the Maxlinn CHAIR script's
"Recall" (a ratio of sums against the CHAIR ground truth).
"""

from __future__ import annotations

import numpy as np

from capaudit.audit.metrics.base import METRICS, Estimate, MetricContext, ratio

__all__ = ["recall", "caption_recall"]


def caption_recall(ctx: MetricContext) -> np.ndarray:
    """float per caption; NaN where the caption is skipped."""
    inst, _ = ctx.instances
    n_inst = inst.sum(axis=1)
    caps, cats = ctx.mentioned_pairs
    hit = inst[ctx.unit[caps], cats]
    hits = np.bincount(caps[hit], minlength=len(ctx.records)).astype(np.float64)
    denom = n_inst[ctx.unit].astype(np.float64)
    denom[~ctx.has_image] = 0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, hits / denom, np.nan)


@METRICS.register("recall", version="1")
def recall(ctx: MetricContext) -> Estimate:
    """Mean per-caption recall of instance categories."""
    r = caption_recall(ctx)
    m = ~np.isnan(r)
    stats = np.stack([ctx.per_unit(r, m), ctx.per_unit(None, m)], axis=1)
    return Estimate(stats, ratio(), int(m.sum()), {"skipped_captions": int((~m).sum())})
