"""Gender error (Burns et al. 2018, "Women also Snowboard").

Over captions whose image is labelled male or female: 100 x captions whose
predicted gender (:mod:`capaudit.text.gender`) contradicts the label /
those captions. A neutral prediction is never an error; the confusion counts
(including neutral rates, which the paper also reports) go to ``extra``.
"""

from __future__ import annotations

import numpy as np

from capaudit.metrics.base import Metric, register_metric
from capaudit.metrics.state import UnitSums

__all__ = ["GenderError"]

_NAMES = ("neutral", "male", "female")


@register_metric
class GenderError(Metric):
    name, label = "gender_error", "Gender err"
    description = "captions whose gender words contradict the image label (Burns et al. 2018, ×100)"
    direction, criterion = -1, "bias"
    needs = frozenset({"demographics"})

    def update(self, ctx):
        label = ctx.image_gender[ctx.unit]
        label[~ctx.has_image] = 0
        pred = ctx.records.gender
        m = label > 0
        err = (m & (pred > 0) & (pred != label)).astype(np.float64)
        confusion = np.zeros((3, 3), np.int64)  # [image label, prediction]
        np.add.at(confusion, (label.astype(np.int64), pred.astype(np.int64)), 1)
        return UnitSums.of(ctx, err, None, mask=m, confusion=confusion)

    def finalize(self, state, units):
        c = state.totals["confusion"]
        confusion = {f"{_NAMES[a]}->{_NAMES[b]}": int(c[a, b]) for a in (1, 2) for b in (0, 1, 2)}
        return state.ratio_estimate(units, extra={"confusion": confusion})
