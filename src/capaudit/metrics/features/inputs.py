"""What the LOTUS metrics read of a chunk of captions, computed lazily and once.

A metric asks for what it needs (``features`` for coverage and complexity,
``clip`` for the CLIP metrics, ...) and only that is computed; what a metric
cannot have (no ``--reference``, no ``--clip-model``) raises
:class:`~capaudit.metrics.base.MetricSkipped` with the option to give,
so the metric is reported as not computed -- never as zero.

The command prepares one :class:`LotusOptions` per audit with :func:`prepare`
(reference captions read once, the store for the caches) and leaves it in the
resolved config as ``config["_lotus"]``; every chunk's context then gets its
:class:`LotusInputs` on first use (:func:`lotus_of`).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["LotusOptions", "LotusInputs", "lotus_of", "prepare", "skipped"]


def skipped(why: str) -> Exception:
    """A :class:`~capaudit.metrics.base.MetricSkipped` (imported late: the metrics
    package imports this module)."""
    from capaudit.metrics.base import MetricSkipped

    return MetricSkipped(why)


@dataclass(repr=False)
class LotusOptions:
    reference: tuple[list, list] | None = None    # (image ids, captions) of the human set
    reference_name: str | None = None
    clip_model: str | None = None
    images: str | None = None
    long_text: str = "truncate"
    nsfw_lexicon: str | None = None               # None = the packaged lexicon (context marks)
    workers: int = 1
    store: Any = None
    _ref_words: dict = field(default_factory=dict)

    def __repr__(self) -> str:  # lands in the stored run config: names only, never captions
        return (f"LotusOptions(reference={self.reference_name!r}, clip_model={self.clip_model!r}, "
                f"images={self.images!r}, long_text={self.long_text!r}"
                + (f", nsfw_lexicon={self.nsfw_lexicon!r}" if self.nsfw_lexicon else "") + ")")

    __str__ = __repr__

    @cached_property
    def nsfw_matcher(self):
        from capaudit.metrics.features.nsfw import load_lexicon

        return load_lexicon(self.nsfw_lexicon)

    @cached_property
    def scorer(self):
        from capaudit.metrics.features.clip import ClipScorer

        return ClipScorer(self.clip_model, self.long_text)

    def reference_words(self, kind: str) -> dict[int, frozenset[str]]:
        """``{image_id: noun (verb) lemmas of all its reference captions}``, parsed once."""
        if self.reference is None:
            raise skipped("no reference captions (give --reference SET, a human caption set)")
        if kind not in self._ref_words:
            from capaudit.metrics.features.word_coverage import reference_words
            from capaudit.metrics.features.parse import parse_features

            ids, caps = self.reference
            feats = parse_features(caps, self.store, self.workers)
            for k in ("nouns", "verbs"):
                self._ref_words[k] = reference_words(ids, feats, k)
        return self._ref_words[kind]


def prepare(store, cfg) -> LotusOptions:
    """Options of one audit from its resolved config; bad inputs fail here, before any work:
    a missing reference set, a CLIP path that is not a CLIP model."""
    ref = None
    if cfg.get("reference"):
        from capaudit.io.targets import load_target

        r = load_target(store, cfg["reference"])
        ref = (r.image_ids, r.captions)
    opts = LotusOptions(reference=ref, reference_name=cfg.get("reference"),
                        clip_model=cfg.get("clip_model"), images=cfg.get("images"),
                        long_text=cfg.get("long_text") or "truncate",
                        nsfw_lexicon=cfg.get("nsfw_lexicon"),
                        workers=int(cfg.get("workers") or 1), store=store)
    if opts.long_text not in ("truncate", "chunk"):
        from capaudit.errors import InputError
        raise InputError(f"unknown --long-text '{opts.long_text}'", fix="use truncate or chunk")
    if opts.nsfw_lexicon:
        opts.nsfw_matcher  # noqa: B018 - reads (and checks) the lexicon now
    if opts.clip_model:
        opts.scorer  # noqa: B018 - loads (and checks) the model now
    if isinstance(cfg, MutableMapping):
        cfg["_lotus"] = opts   # a plain dict config
    else:
        cfg.lotus = opts       # an AuditConfig (capaudit.audit.config): its "_lotus" key
    return opts


class LotusInputs:
    def __init__(self, captions: Sequence[str], image_ids: np.ndarray, opts: LotusOptions):
        self.captions = list(captions)
        self.image_ids = np.asarray(image_ids, np.int64)
        self.opts = opts
        self._coverage: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @cached_property
    def features(self) -> list[dict]:
        from capaudit.metrics.features.parse import parse_features

        return parse_features(self.captions, self.opts.store, self.opts.workers)

    def coverage(self, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """(recall, precision) per caption for ``nouns`` or ``verbs``."""
        if kind not in self._coverage:
            from capaudit.metrics.features.word_coverage import coverage

            ref = self.opts.reference_words(kind)
            self._coverage[kind] = coverage(self.image_ids.tolist(), self.features, kind, ref)
        return self._coverage[kind]

    @cached_property
    def nsfw_scan(self) -> tuple[list[list[str]], list[list[str]]]:
        """(hits, set aside) per caption: set aside = a lexicon entry marked as needing
        context, found without it (:mod:`capaudit.metrics.features.nsfw`)."""
        from capaudit.metrics.features.nsfw import nsfw_scan

        return nsfw_scan(self.captions, self.opts.nsfw_matcher)

    @property
    def nsfw(self) -> list[list[str]]:
        return self.nsfw_scan[0]

    @cached_property
    def clip(self):
        if not self.opts.clip_model:
            raise skipped("no CLIP model (give --clip-model PATH: a local transformers "
                                "CLIPModel; no weights ship with capaudit)")
        if not self.opts.images:
            raise skipped("no images (give --images DIR with the set's images)")
        return self.opts.scorer.score(self.captions, self.image_ids.tolist(),
                                      Path(self.opts.images), self.opts.store)

    @cached_property
    def gender_words(self) -> tuple[np.ndarray, np.ndarray]:
        from capaudit.metrics.features.people import gender_mention

        return gender_mention(self.captions)

    @cached_property
    def skin_tone_words(self) -> tuple[np.ndarray, np.ndarray]:
        from capaudit.metrics.features.people import skin_tone_mention

        return skin_tone_mention(self.captions)


def lotus_of(ctx) -> LotusInputs:
    """The chunk's LOTUS inputs (built on first use, then kept on the context)."""
    lot = getattr(ctx, "_lotus_inputs", None)
    if lot is None:
        captions = ctx.captions
        if captions is None:
            if len(ctx.records):
                raise skipped("the caption texts are not available to this metric")
            captions = []  # an empty chunk (the engine's empty details table)
        opts = ctx.config.get("_lotus") or LotusOptions(
            workers=int(ctx.config.get("workers") or 1),
            nsfw_lexicon=ctx.config.get("nsfw_lexicon"))
        lot = ctx._lotus_inputs = LotusInputs(captions, ctx.caption_image, opts)
    return lot
