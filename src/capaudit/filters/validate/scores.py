"""The validation's arithmetic: confusion counts, precision/recall/F1 with image-bootstrap
intervals, Spearman for graded labels, and the confusion by reason and by evidence.

Positive = hallucinated (the label 1) and flagged (the filter's action is not ``keep``):
``tp`` flagged and hallucinated, ``fp`` flagged and faithful, ``fn`` kept and hallucinated,
``tn`` kept and faithful. precision = tp / (tp + fp) (its n), recall = tp / (tp + fn) (its
n), F1 = 2PR / (P + R) (n = every labelled unit); a value whose n is 0 is None.

Intervals resample *images* (the captions and sentences of one image are not independent):
the draw counts come from :func:`capaudit.audit.bootstrap.resample_counts` (the audit's own
multinomial draws, seeded), each replicate's counts are ``draws @ per-image counts``, and
the interval is the percentile one of :func:`capaudit.audit.intervals.interval`. Spearman
is the Pearson correlation of average ranks (ties share their rank), on the same draws.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from capaudit.audit.bootstrap import resample_counts
from capaudit.audit.intervals import interval

__all__ = ["confusion", "prf", "level_scores", "spearman", "graded_scores", "breakdown",
           "N_BOOT"]

N_BOOT = 1000


def confusion(labels, flagged) -> dict[str, int]:
    c = Counter((bool(lab), bool(f)) for lab, f in zip(labels, flagged))
    return {"tp": c[(True, True)], "fp": c[(False, True)], "fn": c[(True, False)],
            "tn": c[(False, False)]}


def prf(tp, fp, fn):
    """precision, recall, F1 (arrays welcome; NaN where undefined)."""
    tp, fp, fn = (np.asarray(v, np.float64) for v in (tp, fp, fn))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(tp + fp > 0, tp / np.maximum(tp + fp, 1), np.nan)
        r = np.where(tp + fn > 0, tp / np.maximum(tp + fn, 1), np.nan)
        f = np.where(tp > 0, 2 * p * r / (p + r), np.where(tp + fp + fn > 0, 0.0, np.nan))
    return p, r, f


def _value(x) -> float | None:
    x = float(x)
    return None if np.isnan(x) else round(x, 6)


def _units(groups) -> tuple[np.ndarray, int]:
    """Each unit's image index (a unit without an image id is its own image)."""
    index: dict = {}
    out = [index.setdefault(g if g is not None else ("row", i), len(index))
           for i, g in enumerate(groups)]
    return np.asarray(out, np.int64), len(index)


def _draws(n_images: int, n_boot: int, seed: int) -> np.ndarray:
    return resample_counts(n_images, n_boot, seed) if n_images else np.zeros((n_boot, 0))


def level_scores(labels, flagged, groups, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """``{"precision", "recall", "f1", "n", "n_precision", "n_recall", "counts", "ci",
    "n_images"}`` of one level (captions or sentences)."""
    counts = confusion(labels, flagged)
    p, r, f = prf(counts["tp"], counts["fp"], counts["fn"])
    unit_image, n_images = _units(groups)
    stats = np.zeros((n_images, 3))
    kinds = np.asarray([[lab and fl, (not lab) and fl, lab and not fl]
                        for lab, fl in zip(map(bool, labels), map(bool, flagged))], np.float64)
    if len(kinds):
        np.add.at(stats, unit_image, kinds)
    sums = _draws(n_images, n_boot, seed) @ stats
    reps = prf(sums[:, 0], sums[:, 1], sums[:, 2]) if n_images else (np.array([]),) * 3
    ci = {name: list(interval(rep, None)) for name, rep in
          zip(("precision", "recall", "f1"), reps)}
    return {"precision": _value(p), "recall": _value(r), "f1": _value(f),
            "n": len(labels), "n_precision": counts["tp"] + counts["fp"],
            "n_recall": counts["tp"] + counts["fn"], "n_images": n_images,
            "counts": counts, "ci": ci, "n_boot": n_boot, "seed": seed}


def spearman(x, y) -> float:
    """Spearman's rho: the Pearson correlation of average ranks (ties share their rank;
    ``scipy.stats.rankdata``); NaN when either side is constant or fewer than 3 values."""
    from scipy.stats import rankdata

    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if len(x) < 3:
        return float("nan")
    rx, ry = rankdata(x), rankdata(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    return float((rx * ry).sum() / den) if den > 0 else float("nan")


def graded_scores(removed_share, grades, groups, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """Spearman between the share of each caption the filter removes (or flags) and its
    grade, with an image-bootstrap interval."""
    x, y = np.asarray(removed_share, np.float64), np.asarray(grades, np.float64)
    unit_image, n_images = _units(groups)
    members = defaultdict(list)
    for i, g in enumerate(unit_image):
        members[int(g)].append(i)
    draws = _draws(n_images, n_boot, seed)
    reps = []
    for row in draws:
        idx = [i for g in np.nonzero(row)[0] for i in members[int(g)] * int(row[g])]
        reps.append(spearman(x[idx], y[idx]))
    rho = spearman(x, y)
    return {"spearman": None if np.isnan(rho) else round(rho, 6), "n": len(x),
            "n_images": n_images, "ci": {"spearman": list(interval(np.asarray(reps), None))},
            "mean_removed_share": _value(x.mean()) if len(x) else None,
            "n_boot": n_boot, "seed": seed}


def breakdown(labels, flagged, keys) -> dict[str, dict[str, int]]:
    """The confusion counts of each key (a reason, an evidence kind)."""
    by: dict = defaultdict(lambda: {"tp": 0, "fp": 0, "fn": 0, "tn": 0})
    for lab, fl, key in zip(labels, flagged, keys):
        cell = ("tp" if fl else "fn") if lab else ("fp" if fl else "tn")
        by[key][cell] += 1
    return {k: dict(v) for k, v in sorted(by.items())}
