"""CLIP metrics: ``clipscore``, ``clipscore_long``, ``clip_recall_at_1/5/10``, ``clip_mrr``.

Computed by :mod:`capaudit.lotus.clip` with the user's CLIP model
(``--clip-model``) on the set's images (``--images``); without them the metrics
are skipped with that reason. ``extra`` carries how many captions were longer
than the model's text positions and whether they were truncated or chunked.
"""

from __future__ import annotations

import numpy as np

from capaudit.audit.metrics.base import METRICS, Estimate, MetricContext, MetricSkipped
from capaudit.lotus.inputs import lotus_of, mean_estimate

__all__ = ["clipscore", "clipscore_long", "clip_recall_at_1", "clip_recall_at_5",
           "clip_recall_at_10", "clip_mrr"]


@METRICS.register("clipscore", version="1")
def clipscore(ctx: MetricContext) -> Estimate:
    """100 * max(cos(caption, image), 0), mean over captions."""
    r = lotus_of(ctx).clip
    return mean_estimate(ctx, r.clipscore, extra=r.meta)


@METRICS.register("clipscore_long", version="1")
def clipscore_long(ctx: MetricContext) -> Estimate:
    """CLIPScore of the captions over 77 tokens, scored at full length."""
    r = lotus_of(ctx).clip
    if not r.meta["clipscore_long_at_length"]:
        raise MetricSkipped(f"the CLIP model has {r.meta['positions']} text positions: give a "
                            "Long-CLIP checkpoint or --long-text chunk")
    if np.isnan(r.clipscore_long).all():
        raise MetricSkipped("no caption over 77 tokens")
    return mean_estimate(ctx, r.clipscore_long, extra=r.meta)


def _recall_at(ctx: MetricContext, k: int) -> Estimate:
    r = lotus_of(ctx).clip
    vals = np.where(np.isnan(r.rank), np.nan, (r.rank <= k).astype(np.float64))
    return mean_estimate(ctx, vals, 100.0, {"images": r.meta["images_found"]})


@METRICS.register("clip_recall_at_1", version="1")
def clip_recall_at_1(ctx: MetricContext) -> Estimate:
    """Percent of captions whose own image ranks first among the set's images."""
    return _recall_at(ctx, 1)


@METRICS.register("clip_recall_at_5", version="1")
def clip_recall_at_5(ctx: MetricContext) -> Estimate:
    """Percent of captions whose own image ranks in the top 5."""
    return _recall_at(ctx, 5)


@METRICS.register("clip_recall_at_10", version="1")
def clip_recall_at_10(ctx: MetricContext) -> Estimate:
    """Percent of captions whose own image ranks in the top 10."""
    return _recall_at(ctx, 10)


@METRICS.register("clip_mrr", version="1")
def clip_mrr(ctx: MetricContext) -> Estimate:
    """Mean reciprocal rank of the caption's own image."""
    r = lotus_of(ctx).clip
    return mean_estimate(ctx, 1.0 / r.rank, extra={"images": r.meta["images_found"]})
