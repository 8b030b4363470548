"""Noun and verb coverage against the human captions (IC3 / LOTUS descriptiveness).

``noun_recall`` / ``verb_recall``: percent of the image's reference noun (verb)
lemmas the caption uses; ``noun_precision`` / ``verb_precision``: percent of the
caption's noun (verb) lemmas that the references use -- the one LOTUS reports.
Needs ``--reference SET``. Definitions and undefined cases:
:mod:`capaudit.metrics.features.word_coverage`.
"""

from __future__ import annotations

import pyarrow as pa

from capaudit.metrics.base import register_metric
from capaudit.metrics.per_caption import PerCaptionMean
from capaudit.metrics.features.inputs import lotus_of

__all__ = ["NounRecall", "NounPrecision", "VerbRecall", "VerbPrecision"]


class _Coverage(PerCaptionMean):
    kind, which = "nouns", 0
    scale = 100.0
    direction, criterion = 1, "descriptiveness"
    needs = frozenset({"reference"})
    default = False

    def values(self, ctx):
        return lotus_of(ctx).coverage(self.kind)[self.which]

    def finalize(self, state, units):
        est = super().finalize(state, units)
        est.extra["reference"] = units.config.get("reference")
        return est


@register_metric
class NounRecall(_Coverage):
    name, label = "noun_recall", "Noun rec."
    description = "reference noun lemmas the caption uses (×100; IC3 denominator)"
    details = {"noun_recall": pa.float64()}


@register_metric
class NounPrecision(_Coverage):
    name, label = "noun_precision", "Noun prec."
    description = "caption noun lemmas the references use (×100; LOTUS noun coverage)"
    which = 1
    details = {"noun_precision": pa.float64()}


@register_metric
class VerbRecall(_Coverage):
    name, label = "verb_recall", "Verb rec."
    description = "reference verb lemmas the caption uses (×100; IC3 denominator)"
    kind = "verbs"
    details = {"verb_recall": pa.float64()}


@register_metric
class VerbPrecision(_Coverage):
    name, label = "verb_precision", "Verb prec."
    description = "caption verb lemmas the references use (×100; LOTUS verb coverage)"
    kind, which = "verbs", 1
    details = {"verb_precision": pa.float64()}
