"""Caption-set metrics: one module per family, each metric one registered :class:`Metric`.

Importing this package registers every built-in metric (in the order below,
which is the column order of ``audit run``); third-party metrics come from the
``capaudit.metrics`` entry points. See :mod:`.base` for the spec and the
accumulator contract, :mod:`.state` for mergeable states, :mod:`.spec` for the
lookups the rest of capaudit uses, and :mod:`capaudit.audit.engine` for how
they are run.
"""

from capaudit.metrics import diversity, recall, gender_error, recall_disparity, chair, lic, judged  # noqa: F401,I001
# LOTUS metrics (read the caption texts through capaudit.metrics.features; not in the default audit)
from capaudit.metrics import coverage, clip_scores, complexity, nsfw, people_words  # noqa: F401,I001
from capaudit.metrics.base import METRICS, Metric, register_metric
from capaudit.metrics.context import MetricContext
from capaudit.metrics.estimate import Estimate, MetricResult
from capaudit.metrics.needs import MetricSkipped
from capaudit.metrics.spec import default_metrics, metric_spec

__all__ = ["METRICS", "Metric", "register_metric", "default_metrics", "metric_spec", "Estimate",
           "MetricContext", "MetricResult", "MetricSkipped"]


def __getattr__(name: str):
    if name == "DEFAULT_METRICS":  # kept for callers of the old constant; plugins included
        return default_metrics()
    raise AttributeError(name)
