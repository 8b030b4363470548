"""LOTUS's bias recalls: does the caption name the person's gender / skin tone?

``gender_word_recall``: percent of captions of gender-labelled images that use a
word of the image's gender (woman words on women's images, man words on men's:
:mod:`capaudit.metrics.features.people`). Split by gender (``audit disparity --by gender``,
the leaderboard's bias criterion) it gives LOTUS's Rec_M and Rec_F and their gap.
``skin_tone_word_recall``: likewise with skin-tone words describing a person, on
light- and dark-skinned images. Captions of unlabelled images are left out.
"""

from __future__ import annotations

import numpy as np

from capaudit.metrics.base import register_metric
from capaudit.metrics.needs import MetricSkipped
from capaudit.metrics.per_caption import PerCaptionMean
from capaudit.metrics.features.inputs import lotus_of

__all__ = ["GenderWordRecall", "SkinToneWordRecall"]


class _WordRecall(PerCaptionMean):
    """Captions of labelled images that use a word of the image's label: ``kind`` names the
    image labels (``ctx.annotations.<kind>``) and the caption words
    (``lotus_of(ctx).<kind>_words``, one array per label in ``classes``' order)."""

    kind, what, classes = "gender", "gender", ("male", "female")
    direction, criterion = 0, "bias"
    needs = frozenset({"demographics"})
    default = False
    scale = 100.0

    def values(self, ctx):
        own = dict(zip(self.classes, getattr(lotus_of(ctx), f"{self.kind}_words")))
        table = getattr(ctx.annotations, self.kind)
        if not table:
            raise MetricSkipped(f"no image {self.what} labels (give --demographics)")
        vals = np.full(len(ctx.caption_image), np.nan)
        for i, iid in enumerate(ctx.caption_image.tolist()):
            lab = table.get(iid) if iid >= 0 else None
            if lab in own:
                vals[i] = float(own[lab][i])
        return vals


@register_metric
class GenderWordRecall(_WordRecall):
    name, label = "gender_word_recall", "Gender-word rec."
    description = "captions of gender-labelled images naming the image's gender (×100)"


@register_metric
class SkinToneWordRecall(_WordRecall):
    name, label = "skin_tone_word_recall", "Skin-tone-word rec."
    description = "captions of skin-tone-labelled images naming the person's skin tone (×100)"
    kind, what, classes = "skin_tone", "skin tone", ("light", "dark")
    not_by = {"gender": "a skin-tone measure: compare it by skin tone"}
