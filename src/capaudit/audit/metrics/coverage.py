"""Noun and verb coverage against the human captions (IC3 / LOTUS descriptiveness).

``noun_recall`` / ``verb_recall``: percent of the image's reference noun (verb)
lemmas the caption uses; ``noun_precision`` / ``verb_precision``: percent of the
caption's noun (verb) lemmas that the references use -- the one LOTUS reports.
Definitions and the undefined cases: :mod:`capaudit.lotus.coverage`.
"""

from __future__ import annotations

from capaudit.audit.metrics.base import METRICS, Estimate, MetricContext
from capaudit.lotus.inputs import lotus_of, mean_estimate

__all__ = ["noun_recall", "noun_precision", "verb_recall", "verb_precision"]


def _coverage(ctx: MetricContext, kind: str, which: int) -> Estimate:
    lot = lotus_of(ctx)
    values = lot.coverage(kind)[which]
    return mean_estimate(ctx, values, 100.0, {"reference": lot.opts.reference_name,
                                              "reference_images": lot.reference_images})


@METRICS.register("noun_recall", version="1")
def noun_recall(ctx: MetricContext) -> Estimate:
    """Percent of the references' noun lemmas the caption mentions."""
    return _coverage(ctx, "nouns", 0)


@METRICS.register("noun_precision", version="1")
def noun_precision(ctx: MetricContext) -> Estimate:
    """Percent of the caption's noun lemmas the references mention (LOTUS coverage)."""
    return _coverage(ctx, "nouns", 1)


@METRICS.register("verb_recall", version="1")
def verb_recall(ctx: MetricContext) -> Estimate:
    """Percent of the references' verb lemmas the caption uses."""
    return _coverage(ctx, "verbs", 0)


@METRICS.register("verb_precision", version="1")
def verb_precision(ctx: MetricContext) -> Estimate:
    """Percent of the caption's verb lemmas the references use (LOTUS coverage)."""
    return _coverage(ctx, "verbs", 1)
