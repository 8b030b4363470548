"""CHAIR_s and CHAIR_i (Rohrbach et al. 2018) against the CHAIR ground truth.

CHAIR_s = 100 x captions with at least one hallucinated mention / captions;
CHAIR_i = 100 x hallucinated mentions / all mentions (repeats counted). A
mention is hallucinated when its category is not in the image's CHAIR ground
truth (instances plus objects of its human captions). As in the reference,
an image missing from the ground-truth table has an empty one; how many
captions that concerns is reported in ``extra`` so a wrong table is visible.
Captions without an image id are left out.
"""

from __future__ import annotations

import numpy as np

from capaudit.audit.metrics.base import METRICS, Estimate, MetricContext, ratio

__all__ = ["chair_s", "chair_i", "caption_hallucinated"]


def caption_hallucinated(ctx: MetricContext) -> np.ndarray:
    """Bool per caption: at least one hallucinated mention."""
    h = ctx.hallucinated
    return np.bincount(ctx.mention_caption[h], minlength=len(ctx.records)) > 0


def _missing(ctx: MetricContext) -> int:
    _, present = ctx.chair_gt
    return int((ctx.has_image & ~present[ctx.unit]).sum())


@METRICS.register("chair_s", version="1")
def chair_s(ctx: MetricContext) -> Estimate:
    """Percent of captions with a hallucinated object."""
    flag = caption_hallucinated(ctx).astype(np.float64)
    m = ctx.has_image
    stats = np.stack([ctx.per_unit(flag, m), ctx.per_unit(None, m)], axis=1)
    return Estimate(stats, ratio(), int(m.sum()), {"captions_without_gt": _missing(ctx)})


@METRICS.register("chair_i", version="1")
def chair_i(ctx: MetricContext) -> Estimate:
    """Percent of object mentions that are hallucinated."""
    h = ctx.hallucinated
    keep = ctx.has_image[ctx.mention_caption]
    u = ctx.mention_unit[keep]
    stats = np.stack([np.bincount(u[h[keep]], minlength=ctx.n_units),
                      np.bincount(u, minlength=ctx.n_units)], axis=1).astype(np.float64)
    return Estimate(stats, ratio(), int(keep.sum()),
                    {"captions": int(ctx.has_image.sum()), "hallucinated_mentions": int(h[keep].sum()),
                     "captions_without_gt": _missing(ctx)})
