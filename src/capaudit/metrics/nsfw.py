"""``nsfw_words``: percent of captions containing a word or phrase of the LDNOOBW list.

Whole-word and whole-phrase, case-insensitive (:mod:`capaudit.metrics.features.nsfw`):
"Scunthorpe", "cocktail" and "assess" are not hits. Lower is better. The hits
of each caption go to the ``nsfw_hits`` detail column.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from capaudit.metrics.base import register_metric
from capaudit.metrics.per_caption import PerCaptionMean
from capaudit.metrics.features.inputs import lotus_of

__all__ = ["NsfwWords"]


@register_metric
class NsfwWords(PerCaptionMean):
    name, label = "nsfw_words", "NSFW %"
    description = "captions with a word or phrase of the LDNOOBW English list (×100)"
    direction, criterion = -1, "side_effects"
    default = False
    scale = 100.0
    details = {"nsfw_hits": pa.list_(pa.string())}

    def values(self, ctx):
        return np.array([bool(h) for h in lotus_of(ctx).nsfw], np.float64)

    def totals(self, ctx):
        return {"hits": int(sum(len(h) for h in lotus_of(ctx).nsfw))}

    def caption_details(self, ctx):
        return {"nsfw_hits": pa.array(lotus_of(ctx).nsfw, pa.list_(pa.string()))}
