"""Noun and verb coverage against the human captions (IC3 / LOTUS descriptiveness).

``noun_recall`` / ``verb_recall``: percent of the image's reference noun (verb)
lemmas the caption uses; ``noun_precision`` / ``verb_precision``: percent of the
caption's noun (verb) lemmas that the references use -- the one LOTUS reports.
Needs ``--reference SET``. Definitions and undefined cases:
:mod:`capaudit.metrics.features.word_coverage`.
"""

from __future__ import annotations

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


def _coverage(word: str, which: int) -> type[_Coverage]:
    """The recall (``which`` 0: IC3's denominator) or precision (1: LOTUS's coverage) of the
    caption's ``word`` lemmas, registered as ``<word>_recall`` / ``<word>_precision``."""
    if which == 0:
        measure, label = "recall", "rec."
        description = f"reference {word} lemmas the caption uses (×100; IC3 denominator)"
    else:
        measure, label = "precision", "prec."
        description = f"caption {word} lemmas the references use (×100; LOTUS {word} coverage)"
    # type() sets __module__ (this module) and __qualname__ as a class statement would
    return register_metric(type(word.title() + measure.title(), (_Coverage,), {
        "name": f"{word}_{measure}", "label": f"{word.title()} {label}",
        "description": description, "kind": word + "s", "which": which}))


NounRecall = _coverage("noun", 0)
NounPrecision = _coverage("noun", 1)
VerbRecall = _coverage("verb", 0)
VerbPrecision = _coverage("verb", 1)
