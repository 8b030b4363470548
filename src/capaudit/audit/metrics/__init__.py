"""Caption-set metrics: one module per family, all registered in :data:`METRICS`.

Importing this package registers every metric. See :mod:`.base` for the
contract (per-image sufficient statistics + finalize) and
:mod:`capaudit.audit.engine` for how they are run.
"""

from capaudit.audit.metrics import chair, diversity, gender_error, recall, recall_disparity  # noqa: F401
from capaudit.audit.metrics import (clip_scores, complexity, coverage, nsfw,  # noqa: F401
                                    people_words)
from capaudit.audit.metrics.base import METRICS, Estimate, MetricContext, MetricResult, MetricSkipped

# LOTUS metrics (need the caption texts; see capaudit.lotus): not in the default audit
LOTUS_METRICS = ["noun_recall", "noun_precision", "verb_recall", "verb_precision",
                 "clip_recall_at_1", "clip_recall_at_5", "clip_recall_at_10", "clip_mrr",
                 "clipscore", "clipscore_long", "syntactic_depth", "semantic_nodes", "nsfw_words",
                 "gender_word_recall", "skin_tone_word_recall"]
DEFAULT_METRICS = ["vocab", "length", "recall", "gender_error", "recall_disparity", "chair_s", "chair_i"]

__all__ = ["METRICS", "DEFAULT_METRICS", "LOTUS_METRICS", "Estimate", "MetricContext", "MetricResult", "MetricSkipped"]
