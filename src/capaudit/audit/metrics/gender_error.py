"""Gender error (Burns et al. 2018, "Women also Snowboard").

Over captions whose image is labelled male or female: 100 x captions whose
predicted gender (:mod:`capaudit.text.gender`) contradicts the label /
those captions. A neutral prediction is never an error; the confusion counts
(including neutral rates, which the paper also reports) go to ``extra``.
"""

from __future__ import annotations

import numpy as np

from capaudit.audit.metrics.base import METRICS, Estimate, MetricContext, ratio

__all__ = ["gender_error"]


@METRICS.register("gender_error", version="1")
def gender_error(ctx: MetricContext) -> Estimate:
    """Percent of captions of gender-labelled images with the wrong gender word."""
    label = ctx.image_gender[ctx.unit]
    label[~ctx.has_image] = 0
    pred = ctx.records.gender
    m = label > 0
    err = (m & (pred > 0) & (pred != label)).astype(np.float64)
    stats = np.stack([ctx.per_unit(err, m), ctx.per_unit(None, m)], axis=1)
    names = ("neutral", "male", "female")
    confusion = {f"{names[a]}->{names[b]}": int(((label == a) & (pred == b)).sum())
                 for a in (1, 2) for b in (0, 1, 2)}
    return Estimate(stats, ratio(), int(m.sum()), {"confusion": confusion})
