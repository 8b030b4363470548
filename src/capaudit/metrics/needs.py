"""What a metric may need, and the exception it raises when that is missing.

A metric names its needs in its spec (:attr:`~capaudit.metrics.base.Metric.needs`,
keys of :data:`NEEDS`); when the annotation, reference set, model or judge is not
there it raises :class:`MetricSkipped` and the engine records the reason instead
of failing the whole audit. Kept apart from the spec so the per-chunk context
(:mod:`.context`) can raise the same reasons without importing the registry.
"""

from __future__ import annotations

__all__ = ["NEEDS", "ANNOTATION_NEEDS", "MetricSkipped"]

# what a metric may need; the engine skips a metric whose annotation is missing, with this reason
NEEDS = {
    "instances": "no instance annotations (give --instances)",
    "chair_gt": "no CHAIR ground truth (give --chair-gt)",
    "demographics": "no image gender labels (give --demographics)",
    "reference": "no reference caption set",
    "model": "no model",
    "judge": "no judge backend",
    "images": "no images",
}
# the needs that are annotation files joined on image ids (held to the coverage check)
ANNOTATION_NEEDS = ("instances", "chair_gt", "demographics")


class MetricSkipped(Exception):
    """The metric cannot be computed on this input (the message says why)."""
