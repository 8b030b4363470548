"""CLIP metrics: ``clipscore``, ``clipscore_long``, ``clip_recall_at_1/5/10``, ``clip_mrr``.

Computed by :mod:`capaudit.metrics.features.clip` with the user's CLIP model
(``--clip-model``) on the set's images (``--images``); without them the metrics
are skipped with that reason. ``extra`` counts the captions longer than the
model's text positions and how they were handled (truncated, chunked): never
silently.

Retrieval ranks a caption's own image among *all* images of the set, so its
state keeps, across chunks, each caption's text vector (float16) and the image
vectors seen; ranks are computed in ``finalize`` (memory: ~1 KB per caption for
a 512-d model).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from capaudit.metrics.base import Metric, register_metric
from capaudit.metrics.estimate import Estimate, ratio
from capaudit.metrics.needs import MetricSkipped
from capaudit.metrics.per_caption import PerCaptionMean
from capaudit.metrics.state_types import register_state
from capaudit.metrics.features.inputs import lotus_of

__all__ = ["ClipScore", "ClipScoreLong", "ClipRecallAt1", "ClipRecallAt5", "ClipRecallAt10",
           "ClipMRR"]

_COUNTS = ("long_captions", "truncated", "chunked", "windows", "images_missing",
           "captions_without_image")


def _totals(meta: dict) -> dict:
    return {k: int(meta[k]) for k in _COUNTS}


class _ClipMean(PerCaptionMean):
    direction, criterion = 1, "alignment"
    needs = frozenset({"model", "images"})
    default = False

    def totals(self, ctx):
        return _totals(lotus_of(ctx).clip.meta)

    def finalize(self, state, units):
        est = super().finalize(state, units)
        opts = units.config.get("_lotus")
        if opts is not None:
            est.extra.update(model=opts.scorer.key, long_text=opts.long_text,
                             positions=opts.scorer.positions)
        return est


@register_metric
class ClipScore(_ClipMean):
    name, label = "clipscore", "CLIP-S"
    description = "100·max(cos(caption, image), 0), mean over captions (long ones counted)"

    def values(self, ctx):
        return lotus_of(ctx).clip.clipscore


@register_metric
class ClipScoreLong(_ClipMean):
    name, label = "clipscore_long", "CLIP-S long"
    description = "CLIP-S of the captions over 77 tokens, scored at full length"

    def values(self, ctx):
        opts = lotus_of(ctx).opts
        if opts.clip_model and opts.scorer.positions <= 77 and opts.long_text != "chunk":
            raise MetricSkipped(f"the CLIP model has {opts.scorer.positions} text positions: "
                                "give a Long-CLIP checkpoint or --long-text chunk")
        return lotus_of(ctx).clip.clipscore_long


@register_state
@dataclass
class RetrievalState:
    keys: np.ndarray                 # unit key per caption
    image: np.ndarray                # image id per caption (-1: none)
    text: np.ndarray                 # float16 [n, d]
    images: dict = field(default_factory=dict)

    def merge(self, other: "RetrievalState") -> "RetrievalState":
        return RetrievalState(np.concatenate([self.keys, other.keys]),
                              np.concatenate([self.image, other.image]),
                              np.concatenate([self.text, other.text]),
                              {**self.images, **other.images})


class _Retrieval(Metric):
    direction, criterion = 1, "descriptiveness"
    needs = frozenset({"model", "images"})
    default = False
    scale = 100.0

    def update(self, ctx):
        r = lotus_of(ctx).clip
        keys = ctx.unit_keys[ctx.unit]
        return RetrievalState(keys.astype(np.int64), ctx.caption_image.copy(),
                              r.text.astype(np.float16), dict(r.images))

    def value(self, rank: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def finalize(self, state, units):
        from capaudit.metrics.features.clip import retrieval_ranks

        rank = retrieval_ranks(state.text, state.image.tolist(), state.images)
        v = self.value(rank)
        ok = ~np.isnan(v)
        stats = np.zeros((units.n, 2))
        pos = units.index(state.keys[ok])
        np.add.at(stats[:, 0], pos, v[ok])
        np.add.at(stats[:, 1], pos, 1.0)
        return Estimate(stats, ratio(self.scale), int(ok.sum()),
                        {"images": len(state.images), "unranked": int((~ok).sum())})


class _RecallAt(_Retrieval):
    k = 1

    def value(self, rank):
        return np.where(np.isnan(rank), np.nan, rank <= self.k)


def _recall_at(k: int, ranks: str) -> type[_RecallAt]:
    """``clip_recall_at_<k>``: captions whose own image ``ranks`` among the set's images."""
    return register_metric(type(f"ClipRecallAt{k}", (_RecallAt,), {
        "name": f"clip_recall_at_{k}", "label": f"CLIP R@{k}", "k": k,
        "description": f"captions whose own image ranks {ranks} the set's images (×100)"}))


ClipRecallAt1 = _recall_at(1, "first among")
ClipRecallAt5 = _recall_at(5, "in the top 5 of")
ClipRecallAt10 = _recall_at(10, "in the top 10 of")


@register_metric
class ClipMRR(_Retrieval):
    name, label = "clip_mrr", "CLIP MRR"
    description = "mean reciprocal rank of the caption's own image among the set's images"
    scale = 1.0

    def value(self, rank):
        return 1.0 / rank
