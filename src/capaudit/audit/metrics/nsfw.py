"""``nsfw_words``: percent of captions containing a word or phrase of the LDNOOBW list.

Whole-word and whole-phrase, case-insensitive (:mod:`capaudit.lotus.nsfw`):
"Scunthorpe", "cocktail" and "assess" are not hits. Lower is better.
"""

from __future__ import annotations

import numpy as np

from capaudit.audit.metrics.base import METRICS, Estimate, MetricContext
from capaudit.lotus.inputs import lotus_of, mean_estimate

__all__ = ["nsfw_words"]


@METRICS.register("nsfw_words", version="1")
def nsfw_words(ctx: MetricContext) -> Estimate:
    """Percent of captions with an LDNOOBW word or phrase."""
    hits = lotus_of(ctx).nsfw
    flag = np.array([bool(h) for h in hits], np.float64)
    return mean_estimate(ctx, flag, 100.0, {"hits": int(sum(len(h) for h in hits))})
