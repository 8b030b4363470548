"""Language complexity (LOTUS): syntactic depth and scene-graph size.

``syntactic_depth``: per sentence the maximum dependency-tree depth (root = 1),
averaged over the caption's sentences, then over captions. ``semantic_nodes``:
objects + attributes + relations of the caption's scene graph
(:mod:`capaudit.lotus.scene_graph`), averaged over captions.
"""

from __future__ import annotations

import numpy as np

from capaudit.audit.metrics.base import METRICS, Estimate, MetricContext
from capaudit.lotus.inputs import lotus_of, mean_estimate

__all__ = ["syntactic_depth", "semantic_nodes"]


@METRICS.register("syntactic_depth", version="1")
def syntactic_depth(ctx: MetricContext) -> Estimate:
    """Mean over captions of the mean per-sentence dependency depth."""
    feats = lotus_of(ctx).features
    vals = np.array([f["depth"] if f["sentences"] else np.nan for f in feats], np.float64)
    return mean_estimate(ctx, vals)


@METRICS.register("semantic_nodes", version="1")
def semantic_nodes(ctx: MetricContext) -> Estimate:
    """Mean scene-graph size (objects + attributes + relations) per caption."""
    feats = lotus_of(ctx).features
    vals = np.array([f["nodes"] for f in feats], np.float64)
    parts = {k: float(np.mean([f[k] for f in feats])) if feats else None
             for k in ("objects", "attributes", "relations")}
    return mean_estimate(ctx, vals, extra={"mean_" + k: v for k, v in parts.items()})
