"""Language complexity (LOTUS): syntactic depth and scene-graph size.

``syntactic_depth``: per sentence the maximum dependency-tree depth (root = 1),
averaged over the caption's sentences, then over captions. ``semantic_nodes``:
objects + attributes + relations of the caption's scene graph
(:mod:`capaudit.metrics.features.scene_graph`), averaged over captions. Both from spaCy
parses cached in the store (:mod:`capaudit.metrics.features.parse`).
"""

from __future__ import annotations

import numpy as np

from capaudit.metrics.base import register_metric
from capaudit.metrics.per_caption import PerCaptionMean
from capaudit.metrics.features.inputs import lotus_of

__all__ = ["SyntacticDepth", "SemanticNodes"]


class _Complexity(PerCaptionMean):
    direction, criterion = 1, "complexity"
    default = False


@register_metric
class SyntacticDepth(_Complexity):
    name, label = "syntactic_depth", "Synt. depth"
    description = "mean per-sentence maximum dependency depth (spaCy), mean over captions"

    def values(self, ctx):
        return np.array([f["depth"] if f["sentences"] else np.nan
                         for f in lotus_of(ctx).features], np.float64)


@register_metric
class SemanticNodes(_Complexity):
    name, label = "semantic_nodes", "Sem. nodes"
    description = "scene-graph objects + attributes + relations per caption (rule-based parser)"

    def values(self, ctx):
        return np.array([f["nodes"] for f in lotus_of(ctx).features], np.float64)

    def totals(self, ctx):
        feats = lotus_of(ctx).features
        return {k: int(sum(f[k] for f in feats)) for k in ("objects", "attributes", "relations")}
