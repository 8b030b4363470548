"""Set-level arithmetic of the judged metrics: ratios with image-bootstrap intervals,
Welch's t-test, the agreement statistics of ``judge validate``, and :class:`Judged`,
what every judged metric's ``compute`` returns.

Why here and not in each metric: every judged number is a ratio of per-caption
sums (yes sentences / parsed sentences, correct units / units, ...), so one
function turns per-caption numerators and denominators into value, n and a 95%
interval with the project's bootstrap over images
(:mod:`capaudit.audit.bootstrap`: captions of one image are resampled together).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

__all__ = ["Judged", "label", "ratio_table", "welch", "roc_auc", "macro_f1", "cohen_kappa",
           "rank_agreement"]


def label(name: str, evidence: str) -> str:
    """Metric names say what the judge saw when it was not the image."""
    return name if evidence == "image" else f"{name}@reference-captions"


@dataclass
class Judged:
    """What a metric computed: verdict rows, metric rows per set, extra JSON."""

    items: dict = field(default_factory=dict)     # set name -> list of rows
    values: dict = field(default_factory=dict)    # set name -> {metric: {value, n, ci_*}}
    extra: dict = field(default_factory=dict)     # anything else for JSON (tests, per-category)


def ratio_table(image_ids: Sequence, parts: Mapping[str, tuple[Sequence, Sequence]],
                n_boot: int = 1000, seed: int = 0) -> dict[str, dict]:
    """``{name: {value, n, ci_low, ci_high}}`` for ``sum(num) / sum(den)`` per metric.

    ``num`` / ``den`` are per caption; a caption with ``den == 0`` adds nothing
    (it is not counted in ``n``). A caption without an image id is its own unit.
    """
    from capaudit.audit.bootstrap import bootstrap_intervals
    from capaudit.metrics.base import Estimate, ratio

    ids = ["c%d" % i if v is None else v for i, v in enumerate(image_ids)]
    uniq = {v: k for k, v in enumerate(dict.fromkeys(ids))}
    unit = np.array([uniq[v] for v in ids], dtype=np.int64)
    n_units = len(uniq)
    ests, out = {}, {}
    for name, (num, den) in parts.items():
        num = np.asarray(num, np.float64)
        den = np.asarray(den, np.float64)
        stats = np.zeros((n_units, 2))
        np.add.at(stats[:, 0], unit, num)
        np.add.at(stats[:, 1], unit, den)
        n = int((den > 0).sum())
        total = stats.sum(axis=0)
        value = float(total[0] / total[1]) if total[1] > 0 else None
        out[name] = {"value": value, "n": n, "ci_low": None, "ci_high": None}
        if value is not None:
            ests[name] = Estimate(stats, ratio(1.0), n)
    for name, (lo, hi) in bootstrap_intervals(ests, n_units, n_boot, seed).items():
        out[name].update(ci_low=lo, ci_high=hi)
    return out


def welch(a: Sequence[float], b: Sequence[float]) -> dict:
    """Welch's unequal-variance t-test on per-caption scores (two-sided)."""
    from scipy import stats

    a = np.asarray([x for x in a if x is not None], np.float64)
    b = np.asarray([x for x in b if x is not None], np.float64)
    out = {"t": None, "df": None, "p": None, "n_a": len(a), "n_b": len(b)}
    if len(a) < 2 or len(b) < 2:
        return out
    out.update(mean_a=float(a.mean()), mean_b=float(b.mean()))
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    if va + vb == 0:   # no spread on either side: no test
        return out
    t = (a.mean() - b.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return {**out, "t": float(t), "df": float(df), "p": float(2 * stats.t.sf(abs(t), df))}


def roc_auc(labels: Sequence[int], scores: Sequence[float]) -> float | None:
    """Area under the ROC curve (ties count one half): P(score of a 1 > score of a 0)."""
    from scipy.stats import rankdata

    y = np.asarray(labels, int)
    s = np.asarray(scores, np.float64)
    n1, n0 = int(y.sum()), int((1 - y).sum())
    if n1 == 0 or n0 == 0:
        return None
    r = rankdata(s)
    return float((r[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def macro_f1(labels: Sequence[int], preds: Sequence[int]) -> float:
    """Mean of the F1 of class 1 and of class 0."""
    y, p = np.asarray(labels, int), np.asarray(preds, int)
    f1s = []
    for c in (1, 0):
        tp = int(((p == c) & (y == c)).sum())
        fp = int(((p == c) & (y != c)).sum())
        fn = int(((p != c) & (y == c)).sum())
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    return float(np.mean(f1s))


def cohen_kappa(a: Sequence[int], b: Sequence[int]) -> float | None:
    """(p_o - p_e) / (1 - p_e) for two binary raters."""
    a, b = np.asarray(a, int), np.asarray(b, int)
    if len(a) == 0:
        return None
    po = float((a == b).mean())
    pe = float(a.mean() * b.mean() + (1 - a.mean()) * (1 - b.mean()))
    return None if pe == 1 else (po - pe) / (1 - pe)


def rank_agreement(x: Sequence[float], y: Sequence[float]) -> dict:
    """Spearman rho and Kendall tau-b between two system-level score lists."""
    from scipy.stats import kendalltau, spearmanr

    if len(x) < 3:
        return {"spearman": None, "kendall": None, "n_systems": len(x)}
    rho = spearmanr(x, y).statistic
    tau = kendalltau(x, y).statistic
    return {"spearman": None if np.isnan(rho) else float(rho),
            "kendall": None if np.isnan(tau) else float(tau), "n_systems": len(x)}
