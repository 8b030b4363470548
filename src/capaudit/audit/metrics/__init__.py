"""Caption-set metrics: one module per family, all registered in :data:`METRICS`.

Importing this package registers every metric. See :mod:`.base` for the
contract (per-image sufficient statistics + finalize) and
:mod:`capaudit.audit.engine` for how they are run.
"""

from capaudit.audit.metrics import chair, diversity, gender_error, recall, recall_disparity  # noqa: F401
from capaudit.audit.metrics.base import METRICS, Estimate, MetricContext, MetricResult, MetricSkipped

DEFAULT_METRICS = ["vocab", "length", "recall", "gender_error", "recall_disparity", "chair_s", "chair_i"]

__all__ = ["METRICS", "DEFAULT_METRICS", "Estimate", "MetricContext", "MetricResult", "MetricSkipped"]
