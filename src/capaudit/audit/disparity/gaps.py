"""Disparity of every metric across groups of images: woman/man, light/dark skin.

A caption set can look fine on average and still describe one group of people
worse than another (more hallucinated objects on images of women, lower recall
on images of darker-skinned people). ``audit_disparity`` splits the captions by
the image's label (``annotations.gender`` or ``annotations.skin_tone``;
unlabelled images are left out and counted), computes each metric on each group
with the same per-caption records and metric functions as ``audit run``, and
reports ``first - second`` (``male - female``, ``light - dark``).

Intervals. The two groups are disjoint sets of images, so they are resampled
independently (each group its own image bootstrap, its own seed derived from
``seed``), and replicate ``i`` of the difference is replicate ``i`` of the first
group minus replicate ``i`` of the second: a percentile interval of the
difference, re-centred for the biased statistics exactly as the per-group
intervals are (:mod:`capaudit.audit.bootstrap`).

Two metrics need care:

* ``vocab`` grows with the number of captions, so comparing a group of 7,000
  images with one of 3,000 would measure size, not language. It is computed on
  equal-size groups: the larger group is subsampled (seeded) to the smaller
  group's number of images. ``extra["images"]`` says how many.
* ``recall_disparity`` is itself a man/woman difference; by gender it is
  skipped with that reason, by skin tone it is computed within each group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from capaudit.audit.bootstrap import bootstrap_values, interval
from capaudit.audit.disparity.groups import (GROUPINGS, GroupStreams, caption_chunks,
                                             equal_images, group_seed, labels_of, not_by,
                                             scan_images)
from capaudit.audit.engine import images_used, point_value
from capaudit.errors import InputError
from capaudit.metrics import METRICS, default_metrics
from capaudit.metrics.estimate import MetricResult
from capaudit.metrics.stream import check_streams

__all__ = ["Disparity", "audit_disparity", "disparity_stream"]


@dataclass
class Disparity:
    """One caption set split by ``by``: per metric, each group's result and the difference."""

    by: str
    groups: tuple[str, str]
    results: dict[str, dict[str, MetricResult]]     # metric -> {group or "a-b": result}
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def diff_key(self) -> str:
        return f"{self.groups[0]}-{self.groups[1]}"

    def to_dict(self) -> dict[str, Any]:
        return {m: {g: r.to_dict() | ({"extra": r.extra} if r.extra else {})
                    for g, r in per.items()} for m, per in self.results.items()}



def audit_disparity(image_ids: Sequence[int | None], captions: Sequence[str], annotations,
                    by: str = "gender", metrics: list[str] | None = None,
                    mode: str = "reference", n_boot: int = 1000, seed: int = 0,
                    workers: int = 2, min_images: int = 10, config: dict | None = None,
                    chunk_size: int | None = None) -> Disparity:
    """Every metric on each group of ``by`` and the difference, with bootstrap intervals:
    :func:`disparity_stream` over captions held in memory (one chunk by default)."""
    if len(image_ids) != len(captions):
        raise InputError(f"{len(image_ids)} image ids for {len(captions)} captions")
    return disparity_stream(lambda: zip(image_ids, captions), annotations, by, metrics, mode,
                            n_boot, seed, workers, min_images, config,
                            chunk_size or max(len(captions), 1))


def disparity_stream(rows: Callable[[], Iterable[tuple[int | None, str]]], annotations,
                     by: str = "gender", metrics: list[str] | None = None,
                     mode: str = "reference", n_boot: int = 1000, seed: int = 0,
                     workers: int = 2, min_images: int = 10, config: dict | None = None,
                     chunk_size: int = 50_000) -> Disparity:
    """:func:`audit_disparity` of ``rows()`` (a fresh ``(image_id, caption)`` iterator per
    call), ``chunk_size`` captions at a time, like ``audit run``: each group's metric
    accumulators keep only their mergeable states, so memory is bounded by images and
    vocabulary, not captions. A first pass reads the image ids alone (group sizes and
    the equal-image subsample of the size-dependent metrics); the second analyses every
    caption of a group once, and once more only for the subsample. Values and intervals
    do not depend on ``chunk_size``. ``config`` reaches every metric's context."""
    if by not in GROUPINGS:
        raise InputError(f"unknown grouping '{by}'", fix=f"use {' or '.join(GROUPINGS)}")
    labels = getattr(annotations, by, None) or {}
    if not labels:
        raise InputError(f"no {by} labels for the images",
                         fix="pass --demographics FILE or add them with capaudit annotations "
                             "add demographics FILE")
    names = list(metrics or default_metrics())
    check_streams(names)  # typos fail before any work
    groups = GROUPINGS[by]
    images, counts, unlabelled = scan_images(rows(), labels, groups, chunk_size)
    if min(counts.values()) == 0:
        empty = [g for g, c in counts.items() if c == 0]
        raise InputError(f"no captions of {by} = {', '.join(empty)} images in this set",
                         fix="check that the labels cover this set's image ids")
    sized = [n for n in names if METRICS.get(n).size_dependent]
    args = (mode, annotations, min_images, workers, config)
    plan = [(tuple(n for n in names if n not in sized), None, "all images")]
    if sized:
        plan.append((tuple(sized), equal_images(images, seed), "equal images"))
    parts = [(p, basis, GroupStreams(groups, p, not_by(by, p), *args, keep=keep))
             for p, keep, basis in plan if p]
    for ids, caps in caption_chunks(rows(), chunk_size):
        lab = labels_of(ids, labels)
        for g in groups:
            sel = np.flatnonzero(lab == g)
            for _, _, streams in parts:
                streams.add(g, ids, caps, sel)
    results: dict[str, dict[str, MetricResult]] = {}
    meta = {"by": by, "groups": list(groups), "unlabelled_captions": unlabelled,
            "captions": counts, "n_boot": n_boot, "seed": seed, "mode": mode}
    for part_names, basis, streams in parts:
        per_group, boots = {}, {}
        for k, g in enumerate(groups):
            ests, skipped, n_units, n_images = streams.estimates(g)
            meta.setdefault("images", {}).setdefault(basis, {})[g] = n_images
            boots[g] = (bootstrap_values(ests, n_units, n_boot, group_seed(seed, k), workers)
                        if n_boot > 0 and ests else {})
            per_group[g] = (ests, skipped)
        for name in part_names:
            results[name] = _combine(name, groups, per_group, boots, basis,
                                     meta["images"][basis])
    mark_too_few(results, (config or {}).get("min_n"))
    return Disparity(by, groups, {n: results[n] for n in names}, meta)


def mark_too_few(results: dict[str, dict[str, MetricResult]], min_n: int | None) -> None:
    """Status ``too-few`` on every group value under ``min_n`` images, and on every gap whose
    smaller group is (:mod:`capaudit.audit.result_status`): a gap on 12 images of women is
    shown with its caveat in the terminal, the report, the JSON and the store, as a value
    of ``audit run`` is."""
    from capaudit.audit.result_status import DEFAULT_MIN_N, too_few_note

    min_n = int(min_n or DEFAULT_MIN_N)
    for per in results.values():
        for r in per.values():
            if not r.skipped and r.value is not None and r.n_images is not None \
                    and r.n_images < min_n:
                r.mark("too-few", too_few_note(r.n_images, min_n))


def _combine(name, groups, per_group, boots, basis, images) -> dict[str, MetricResult]:
    out: dict[str, MetricResult] = {}
    points = {}
    for g in groups:
        ests, skipped = per_group[g]
        if name in skipped:
            out[g] = MetricResult(None, 0, skipped=skipped[name])
            continue
        est = ests[name]
        points[g] = point_value(est)
        lo, hi = (interval(boots[g][name], points[g], est.recentre) if boots[g]
                  else (None, None))
        out[g] = MetricResult(points[g], est.n, lo, hi, extra={"basis": basis, "images": images[g]},
                              n_images=images_used(est))
    a, b = groups
    key = f"{a}-{b}"
    if a not in points or b not in points or None in (points[a], points[b]):
        reason = next((r.skipped for r in out.values() if r.skipped), "undefined in a group")
        out[key] = MetricResult(None, 0, skipped=reason)
        return out
    diff = points[a] - points[b]
    lo = hi = None
    if boots[a] and boots[b]:
        rec = per_group[a][0][name].recentre
        lo, hi = interval(boots[a][name] - boots[b][name], diff, rec)
    # a gap is as weak as its smaller group: that is the n it rests on
    out[key] = MetricResult(diff, out[a].n + out[b].n, lo, hi, extra={"basis": basis},
                            n_images=min(out[a].n_images, out[b].n_images))
    return out
