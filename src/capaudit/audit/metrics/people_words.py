"""LOTUS's bias recalls: does the caption name the person's gender / skin tone?

``gender_word_recall``: percent of captions of gender-labelled images that use a
word of the image's gender (woman words on women's images, man words on men's:
:mod:`capaudit.lotus.people`). Split by gender (``audit disparity --by gender``,
the leaderboard's bias criterion) it gives LOTUS's Rec_M and Rec_F and their gap.
``skin_tone_word_recall``: likewise with skin-tone words describing a person, on
light- and dark-skinned images. Captions of unlabelled images are left out.
"""

from __future__ import annotations

import numpy as np

from capaudit.audit.metrics.base import METRICS, Estimate, MetricContext, MetricSkipped
from capaudit.lotus.inputs import lotus_of, mean_estimate

__all__ = ["gender_word_recall", "skin_tone_word_recall"]


def _labels(ctx: MetricContext, table: dict | None, what: str) -> list:
    if not table:
        raise MetricSkipped(f"no image {what} labels (give --demographics)")
    return [table.get(int(i)) if i >= 0 else None for i in ctx.caption_image]


def _recall(ctx: MetricContext, labels: list, own: dict) -> Estimate:
    vals = np.full(len(labels), np.nan)
    for i, lab in enumerate(labels):
        if lab in own:
            vals[i] = float(own[lab][i])
    return mean_estimate(ctx, vals, 100.0)


@METRICS.register("gender_word_recall", version="1")
def gender_word_recall(ctx: MetricContext) -> Estimate:
    """Percent of captions of labelled images naming the image's gender."""
    man, woman = lotus_of(ctx).gender_words
    return _recall(ctx, _labels(ctx, ctx.annotations.gender, "gender"),
                   {"male": man, "female": woman})


@METRICS.register("skin_tone_word_recall", version="1")
def skin_tone_word_recall(ctx: MetricContext) -> Estimate:
    """Percent of captions of labelled images naming the person's skin tone."""
    light, dark = lotus_of(ctx).skin_tone_words
    return _recall(ctx, _labels(ctx, ctx.annotations.skin_tone, "skin tone"),
                   {"light": light, "dark": dark})
