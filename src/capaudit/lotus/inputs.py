"""What the LOTUS metrics read of one caption set, computed lazily and once.

A metric asks for what it needs (``features`` for coverage and complexity,
``clip`` for the CLIP metrics, ...) and only that is computed; what a metric
cannot have (no ``--reference``, no ``--clip-model``) raises
:class:`~capaudit.audit.metrics.base.MetricSkipped` with the option to give,
so the metric is reported as not computed -- never as zero.

The engine attaches one :class:`LotusInputs` to the metric context as
``ctx.lotus`` (see :func:`attach`); :func:`mean_estimate` turns a per-caption
value array into the engine's per-image sufficient statistics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Sequence

import numpy as np

from capaudit.audit.metrics.base import Estimate, MetricContext, MetricSkipped, ratio

__all__ = ["LotusOptions", "LotusInputs", "lotus_of", "mean_estimate", "attach"]


@dataclass
class LotusOptions:
    reference: tuple[list, list] | None = None    # (image ids, captions) of the human set
    reference_name: str | None = None
    clip_model: str | None = None
    images: str | None = None
    long_text: str = "truncate"
    workers: int = 1
    store: object = None
    extra: dict = field(default_factory=dict)


class LotusInputs:
    def __init__(self, captions: Sequence[str], image_ids: np.ndarray, opts: LotusOptions):
        self.captions = list(captions)
        self.image_ids = np.asarray(image_ids, np.int64)
        self.opts = opts
        self._coverage: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @cached_property
    def features(self) -> list[dict]:
        from capaudit.lotus.parse import parse_features

        return parse_features(self.captions, self.opts.store, self.opts.workers)

    @cached_property
    def reference_features(self) -> tuple[list, list[dict]]:
        if self.opts.reference is None:
            raise MetricSkipped("no reference captions (give --reference SET, a human caption set)")
        from capaudit.lotus.parse import parse_features

        ids, caps = self.opts.reference
        return ids, parse_features(caps, self.opts.store, self.opts.workers)

    def coverage(self, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """(recall, precision) per caption for ``nouns`` or ``verbs``."""
        if kind not in self._coverage:
            from capaudit.lotus.coverage import coverage, reference_words

            ids, feats = self.reference_features
            ref = reference_words(ids, feats, kind)
            self._coverage[kind] = coverage(self.image_ids.tolist(), self.features, kind, ref)
        return self._coverage[kind]

    @cached_property
    def reference_images(self) -> int:
        ids, _ = self.reference_features
        return len({i for i in ids if i is not None})

    @cached_property
    def nsfw(self) -> list[list[str]]:
        from capaudit.lotus.nsfw import nsfw_hits

        return nsfw_hits(self.captions)

    @cached_property
    def clip(self):
        if not self.opts.clip_model:
            raise MetricSkipped("no CLIP model (give --clip-model PATH: a local transformers "
                                "CLIPModel; no weights ship with capaudit)")
        if not self.opts.images:
            raise MetricSkipped("no images (give --images DIR with the COCO images)")
        from capaudit.lotus.clip import ClipScorer

        scorer = ClipScorer(self.opts.clip_model, self.opts.long_text)
        return scorer.score(self.captions, self.image_ids.tolist(), Path(self.opts.images),
                            self.opts.store)

    @cached_property
    def gender_words(self) -> tuple[np.ndarray, np.ndarray]:
        from capaudit.lotus.people import gender_mention

        return gender_mention(self.captions)

    @cached_property
    def skin_tone_words(self) -> tuple[np.ndarray, np.ndarray]:
        from capaudit.lotus.people import skin_tone_mention

        return skin_tone_mention(self.captions)


def attach(ctx: MetricContext, captions: Sequence[str], opts: LotusOptions) -> MetricContext:
    """Give ``ctx`` its LOTUS inputs (captions in the context's caption order)."""
    ctx.lotus = LotusInputs(captions, ctx.caption_image, opts)
    return ctx


def lotus_of(ctx: MetricContext) -> LotusInputs:
    lot = getattr(ctx, "lotus", None)
    if lot is None:
        raise MetricSkipped("LOTUS metrics need the caption texts (run them with "
                            "capaudit audit leaderboard or audit run)")
    return lot


def mean_estimate(ctx: MetricContext, values: np.ndarray, scale: float = 1.0,
                  extra: dict | None = None) -> Estimate:
    """Mean of a per-caption value over the captions where it is defined (not NaN),
    as per-image (sum, count) statistics; ``extra['undefined']`` counts the others."""
    values = np.asarray(values, np.float64)
    ok = ~np.isnan(values)
    stats = np.stack([ctx.per_unit(np.where(ok, values, 0.0), ok), ctx.per_unit(None, ok)], axis=1)
    return Estimate(stats, ratio(scale), int(ok.sum()),
                    dict(extra or {}, undefined=int((~ok).sum())))
