"""Recall disparity between images of men and of women (Hall et al. 2023).

For each category j present (instance annotations) in at least
``min_images`` images labelled male *and* in at least ``min_images``
labelled female, recall_g(j) = captions of such images of gender g that
mention j / captions of those images. The value is the mean over those m
categories of |recall_man(j) - recall_woman(j)| x 100; ``extra`` keeps m and
the per-category table (with the signed man - woman difference).

The category set is fixed on the full sample; bootstrap resamples recompute
the per-category recalls from resampled sums (categories empty in a resample
are left out of that resample's mean).

Interval: a mean of *absolute* differences is biased upward (sampling noise
in either direction increases |man - woman|), and a resample adds its own
noise on top of the sample's, so the bootstrap distribution sits well above
the point value (1,000 demo images: value 13.76, percentile interval
[12.09, 24.33]; oscar: 7.05, [7.90, 11.16]) and a percentile interval can
exclude the value itself. The basic (pivotal) interval
[2v - q97.5, 2v - q2.5] corrects for that bias but, when the bias exceeds
half the spread, lies entirely below the value, and BCa degenerates (no
resample falls below the value). We therefore report the bootstrap spread
re-centred on the value, as for the vocabulary (``recentre``):
[v - (median - q2.5), v + (q97.5 - median)]. It measures the sampling
variability of the reported statistic and always contains it, but it does
not remove the statistic's upward bias; the bias itself is visible as the
gap between the value and the resampled median.
"""

from __future__ import annotations

import numpy as np

from capaudit.metrics.base import Metric, register_metric
from capaudit.metrics.estimate import Estimate, SparseStats
from capaudit.metrics.needs import MetricSkipped
from capaudit.metrics.state import UnitCells

__all__ = ["RecallDisparity", "disparity_estimate", "category_diffs", "below_min_images"]


@register_metric
class RecallDisparity(Metric):
    name, label = "recall_disparity", "Recall disp."
    description = "mean |recall(man) − recall(woman)| over categories (Hall et al. 2023, ×100)"
    direction, criterion = -1, "bias"
    needs = frozenset({"instances", "demographics"})
    not_by = {"gender": "recall disparity is itself a man - woman difference"}

    def update(self, ctx):
        """Cells (image, category): captions of a gender-labelled image naming one of its
        instance categories; the category selection waits for the whole input."""
        inst, _ = ctx.instances
        g_unit = ctx.image_gender
        caps, cats = ctx.mentioned_pairs
        u = ctx.unit[caps]
        ok = (g_unit[u] > 0) & inst[u, cats]
        n = int(((g_unit[ctx.unit] > 0) & ctx.has_image).sum())
        return UnitCells.of(ctx.unit_keys[u[ok]], cats[ok], n=n)

    def finalize(self, state, units):
        ctx = units.context
        inst, _ = ctx.instances
        return disparity_estimate(ctx.categories, inst, ctx.image_gender, units.n_caps.copy(),
                                  units.index(state.keys), state.cols, state.vals, units.n,
                                  units.min_images, int(state.totals["n"]))


def disparity_estimate(categories: list[str], inst: np.ndarray, g_unit: np.ndarray,
                       n_caps: np.ndarray, hit_unit: np.ndarray, hit_cat: np.ndarray,
                       hit_val: np.ndarray, n_units: int, min_images: int, n: int) -> Estimate:
    """The estimate from per-unit pieces: instance matrix [units, C], gender per unit,
    captions per unit, and (unit, category, count) of captions mentioning the category.

    The category selection is made here, on the full sample.
    """
    n_img = images_by_gender(inst, g_unit)
    keep = kept_categories(n_img, min_images)
    stats = disparity_stats(inst, g_unit, n_caps, hit_unit, hit_cat, hit_val, n_units, keep)
    k = len(keep)
    return Estimate(stats, disparity_fin(k), n,
                    {"m": k, "min_images": min_images,
                     "per_category": disparity_table(categories, keep, n_img, stats.sum(axis=0)),
                     "below_min_images": below_min_images(categories, keep, n_img)},
                    recentre=True, parts=category_diffs(k))


def below_min_images(categories: list[str], keep: np.ndarray, n_img: np.ndarray) -> dict:
    """``{category: [images of men, images of women]}`` of the categories present but left
    out (under ``min_images`` for a gender): the report says why they have no bar."""
    few = np.flatnonzero((n_img.sum(axis=0) > 0) & ~np.isin(np.arange(len(categories)), keep))
    return {categories[j]: [int(n_img[0, j]), int(n_img[1, j])] for j in few}


def images_by_gender(inst: np.ndarray, g_unit: np.ndarray) -> np.ndarray:
    """int [2, C]: images labelled male / female on which each category is present."""
    return np.stack([inst[g_unit == 1].sum(0), inst[g_unit == 2].sum(0)])


def kept_categories(n_img: np.ndarray, min_images: int) -> np.ndarray:
    """Categories in at least ``min_images`` images of both genders (none: the metric is
    skipped)."""
    keep = np.flatnonzero((n_img >= min_images).all(axis=0))
    if len(keep) == 0:
        raise MetricSkipped(f"no category in >= {min_images} images of both genders "
                            "(lower --min-images)")
    return keep


def disparity_stats(inst, g_unit, n_caps, hit_unit, hit_cat, hit_val, n_units: int,
                    keep: np.ndarray) -> SparseStats:
    """Sparse [units, 4k] statistics of the categories ``keep``; columns: hit_man [0,k),
    den_man [k,2k), hit_woman [2k,3k), den_woman [3k,4k)."""
    k = len(keep)
    pos = np.full(inst.shape[1], -1)
    pos[keep] = np.arange(k)
    # denominators: captions of labelled units, for each kept instance category
    du, dc = np.nonzero(inst[:, keep] & (g_unit > 0)[:, None])
    den_col = dc + np.where(g_unit[du] == 1, k, 3 * k)
    # hits: captions mentioning j, where j is a kept instance category of their unit
    u, cats = hit_unit, hit_cat
    ok = (pos[cats] >= 0) & (g_unit[u] > 0) & inst[u, cats]
    u, j, hv = u[ok], pos[cats[ok]], np.asarray(hit_val, np.float64)[ok]
    hit_col = j + np.where(g_unit[u] == 1, 0, 2 * k)
    return SparseStats(np.concatenate([du, u]), np.concatenate([den_col, hit_col]),
                       np.concatenate([n_caps[du], hv]), (n_units, 4 * k))


def disparity_fin(k: int):
    """Column sums [..., 4k] -> the mean |recall_man - recall_woman| x 100 over the categories
    defined in that (re)sample."""
    def fin(s: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            rm = s[..., 0:k] / s[..., k:2 * k]
            rw = s[..., 2 * k:3 * k] / s[..., 3 * k:4 * k]
            d = np.abs(rm - rw)
            cnt = (~np.isnan(d)).sum(axis=-1)
            return 100 * np.where(cnt > 0, np.nansum(d, axis=-1) / np.maximum(cnt, 1), np.nan)
    return fin


def category_diffs(k: int):
    """``parts`` of the estimate: column sums [..., 4k] -> recall(man) - recall(woman) x 100
    of each kept category [..., k], in the order of ``per_category`` (their intervals come
    from the same resamples as the value's: ``extra["parts_ci"]``)."""
    def diffs(s: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return 100 * (s[..., 0:k] / s[..., k:2 * k] - s[..., 2 * k:3 * k] / s[..., 3 * k:4 * k])
    return diffs


def kept_columns(keep: np.ndarray, n_cat: int) -> np.ndarray:
    """Where the columns of categories ``keep`` lie in statistics of all ``n_cat`` categories."""
    return np.concatenate([keep + i * n_cat for i in range(4)])


def disparity_table(categories: list[str], keep: np.ndarray, n_img: np.ndarray,
                    tot: np.ndarray) -> list[dict]:
    """Per kept category: images and captions by gender, recalls and their difference."""
    k, table = len(keep), []
    with np.errstate(invalid="ignore", divide="ignore"):
        for i, j in enumerate(keep):
            rm = tot[i] / tot[k + i]
            rw = tot[2 * k + i] / tot[3 * k + i]
            table.append({"category": categories[j], "images_man": int(n_img[0, j]),
                          "images_woman": int(n_img[1, j]), "captions_man": int(tot[k + i]),
                          "captions_woman": int(tot[3 * k + i]), "recall_man": 100 * rm,
                          "recall_woman": 100 * rw, "diff_man_minus_woman": 100 * (rm - rw)})
    return table
