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
import pyarrow as pa

from capaudit.metrics.base import Metric, register_metric
from capaudit.metrics.context import MetricContext
from capaudit.metrics.state import UnitSums
from capaudit.core.arrays import from_numpy

__all__ = ["ChairS", "ChairI", "caption_hallucinated"]


def caption_hallucinated(ctx: MetricContext) -> np.ndarray:
    """Bool per caption: at least one hallucinated mention."""
    h = ctx.hallucinated
    return np.bincount(ctx.mention_caption[h], minlength=len(ctx.records)) > 0


def _missing(ctx: MetricContext) -> int:
    """Captions whose image has no row in the ground-truth table."""
    _, present = ctx.chair_gt
    return int((ctx.has_image & ~present[ctx.unit]).sum())


class _Chair(Metric):
    """Both CHAIR values: mentions judged against the CHAIR ground truth, corrected mode too;
    ``extra`` holds the named totals of the state (``_totals``)."""

    direction, criterion = -1, "alignment"
    needs = frozenset({"chair_gt"})
    corrected = True
    _totals: tuple[str, ...] = ("captions_without_gt",)

    def finalize(self, state, units):
        return state.ratio_estimate(units, extra={k: int(state.totals[k]) for k in self._totals})


@register_metric
class ChairS(_Chair):
    name, label = "chair_s", "CHAIR_s"
    description = "captions with ≥1 hallucinated COCO object (×100)"
    details = {"chair_s": pa.bool_()}

    def update(self, ctx):
        flag = caption_hallucinated(ctx).astype(np.float64)
        return UnitSums.of(ctx, flag, None, mask=ctx.has_image, captions_without_gt=_missing(ctx))

    def caption_details(self, ctx):
        return {"chair_s": from_numpy(caption_hallucinated(ctx), valid=ctx.has_image)}


@register_metric
class ChairI(_Chair):
    name, label = "chair_i", "CHAIR_i"
    description = "hallucinated object mentions / all object mentions (×100)"
    details = {"hallucinated": pa.list_(pa.string())}
    _totals = ("captions", "hallucinated_mentions", "captions_without_gt")

    def update(self, ctx):
        h = ctx.hallucinated
        n = len(ctx.records)
        hall = np.bincount(ctx.mention_caption[h], minlength=n)
        ment = np.diff(ctx.records.m_offsets)
        has = ctx.has_image
        return UnitSums.of(ctx, hall, ment, mask=has, captions=int(has.sum()),
                           hallucinated_mentions=int(hall[has].sum()),
                           captions_without_gt=_missing(ctx))

    def caption_details(self, ctx):
        from capaudit.metrics.category_pairs import category_lists, unique_keys

        h = ctx.hallucinated
        hk = unique_keys(ctx.mention_caption[h].astype(np.int64) * ctx.n_cat + ctx.records.m_cat[h])
        return {"hallucinated": category_lists(hk // ctx.n_cat, hk % ctx.n_cat, len(ctx.records),
                                               ctx.categories)}
