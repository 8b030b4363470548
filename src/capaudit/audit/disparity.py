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

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import numpy as np

from capaudit.audit.bootstrap import bootstrap_values, interval
from capaudit.audit.engine import image_id_array, point_value
from capaudit.metrics import METRICS, default_metrics
from capaudit.metrics.context import MetricContext
from capaudit.metrics.estimate import MetricResult
from capaudit.metrics.stream import StreamStats, check_streams
from capaudit.errors import InputError
from capaudit.text.records import build_records

__all__ = ["GROUPINGS", "Disparity", "audit_disparity", "disparity_stream"]

GROUPINGS = {"gender": ("male", "female"), "skin_tone": ("light", "dark")}


def not_by(by: str, names) -> dict[str, str]:
    """``{metric: reason}`` for the metrics whose spec says grouping by ``by`` makes no sense."""
    return {n: METRICS.get(n).not_by[by] for n in names if by in METRICS.get(n).not_by}


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


def _group_seed(seed: int, k: int) -> int:
    return int(np.random.SeedSequence([int(seed), k]).generate_state(1)[0])


def _labels_of(ids: np.ndarray, labels: dict) -> np.ndarray:
    return np.array([labels.get(int(i)) if i >= 0 else None for i in ids], dtype=object)


def _chunks(rows: Iterable[tuple[int | None, str]], size: int) -> Iterator[tuple[np.ndarray, list]]:
    """``(image ids, captions)`` of ``size`` rows at a time."""
    it = iter(rows)
    while True:
        part = list(islice(it, size))
        if not part:
            return
        yield image_id_array([r[0] for r in part]), [r[1] for r in part]


def _scan_images(rows, labels: dict, groups: tuple[str, str], size: int):
    """First pass, image ids only: each group's distinct images and caption count, and the
    captions without a usable label (the captions themselves are not kept)."""
    images: dict[str, list[np.ndarray]] = {g: [] for g in groups}
    counts = dict.fromkeys(groups, 0)
    total = 0
    for ids, _ in _chunks(rows, size):
        lab = _labels_of(ids, labels)
        total += len(ids)
        for g in groups:
            sel = ids[lab == g]
            counts[g] += len(sel)
            images[g].append(np.unique(sel))
    uniq = {g: np.unique(np.concatenate(v)) if v else np.zeros(0, np.int64)
            for g, v in images.items()}
    return uniq, counts, total - sum(counts.values())


def _equal_images(images: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """Each group's images cut to the smaller group's number of images (seeded)."""
    k = min(len(v) for v in images.values())
    rng = np.random.default_rng(_group_seed(seed, 99))
    return {g: v if len(v) == k else np.sort(rng.choice(v, k, replace=False))
            for g, v in images.items()}


class _GroupStreams:
    """One :class:`StreamStats` per group (over ``names``), fed chunk by chunk with the
    chunk's captions of that group, optionally only those of ``keep[g]`` images."""

    def __init__(self, groups, names, skip, mode, annotations, min_images, workers, config,
                 keep: dict[str, np.ndarray] | None = None):
        self.acc = {g: StreamStats([n for n in names if n not in skip], mode, annotations,
                                   min_images, config) for g in groups}
        self.names, self.skip, self.keep = names, skip, keep
        self.mode, self.annotations, self.min_images = mode, annotations, min_images
        self.workers, self.config = workers, config

    def add(self, g: str, ids: np.ndarray, captions: list, sel: np.ndarray) -> None:
        if self.keep is not None:
            sel = sel[np.isin(ids[sel], self.keep[g])]
        if not len(sel):
            return
        acc = self.acc[g]
        texts = [captions[i] for i in sel]
        records = build_records(texts, mode=self.mode, workers=self.workers)
        acc.add(MetricContext(records, ids[sel], self.annotations, self.min_images,
                              offset=acc.n_captions, captions=texts, config=self.config))

    def estimates(self, g: str):
        """``(estimates, skipped, bootstrap units, images)`` of group ``g``."""
        ests, skipped, units = self.acc[g].estimates()
        skipped.update({n: self.skip[n] for n in self.names if n in self.skip})
        return ests, skipped, units.n, units.n_images


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
    images, counts, unlabelled = _scan_images(rows(), labels, groups, chunk_size)
    if min(counts.values()) == 0:
        empty = [g for g, c in counts.items() if c == 0]
        raise InputError(f"no captions of {by} = {', '.join(empty)} images in this set",
                         fix="check that the labels cover this set's image ids")
    sized = [n for n in names if METRICS.get(n).size_dependent]
    args = (mode, annotations, min_images, workers, config)
    plan = [(tuple(n for n in names if n not in sized), None, "all images")]
    if sized:
        plan.append((tuple(sized), _equal_images(images, seed), "equal images"))
    parts = [(p, basis, _GroupStreams(groups, p, not_by(by, p), *args, keep=keep))
             for p, keep, basis in plan if p]
    for ids, caps in _chunks(rows(), chunk_size):
        lab = _labels_of(ids, labels)
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
            boots[g] = (bootstrap_values(ests, n_units, n_boot, _group_seed(seed, k), workers)
                        if n_boot > 0 and ests else {})
            per_group[g] = (ests, skipped)
        for name in part_names:
            results[name] = _combine(name, groups, per_group, boots, basis,
                                     meta["images"][basis])
    return Disparity(by, groups, {n: results[n] for n in names}, meta)


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
        out[g] = MetricResult(points[g], est.n, lo, hi, extra={"basis": basis, "images": images[g]})
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
    out[key] = MetricResult(diff, out[a].n + out[b].n, lo, hi, extra={"basis": basis})
    return out


def target_disparity(target, annotations, cfg: dict, by: str) -> Disparity:
    """:func:`disparity_stream` of a target (read in chunks of ``cfg['chunk_size']``, as
    ``audit run`` does) with the audit settings of ``cfg``."""
    from capaudit.audit.runner import STREAM_CHUNK, metric_names

    return disparity_stream(target.rows, annotations, by=by, metrics=metric_names(cfg),
                            mode=cfg["mode"], n_boot=cfg["n_boot"], seed=cfg["seed"],
                            workers=cfg["workers"], min_images=cfg["min_images"], config=cfg,
                            chunk_size=int(cfg.get("chunk_size") or STREAM_CHUNK))


def run_disparity(store, targets: Sequence[str], cfg: dict, by: str = "gender") -> dict:
    """Audit each target's disparity by ``by``; store every row in one transaction.

    Rows go to ``metrics`` with ``grp`` = ``gender=male``, ``gender=female`` and
    ``gender:male-female`` (likewise for skin tone), so per-group values sit
    beside the ``all`` rows of ``audit run``. Returns ``{name: Disparity}`` and
    ``_run_id``.
    """
    from capaudit.io.targets import resolve_target
    from capaudit.core.config import current_command, package_versions
    from capaudit.io.annotation_store import resolve_annotations

    annotations = resolve_annotations(store, cfg.get("instances"), cfg.get("chair_gt"),
                                      cfg.get("demographics"))
    from capaudit.metrics.features.inputs import prepare

    prepare(store, cfg)  # LOTUS metrics: reference set, CLIP model (bad ones fail here)
    loaded = [resolve_target(store, t) for t in targets]
    out: dict[str, Any] = {t.name: target_disparity(t, annotations, cfg, by) for t in loaded}
    if store is not None:
        with store.transaction():
            run_id = store.start_run(current_command(), {**cfg, "by": by,
                                     "annotation_sources": annotations.sources},
                                     cfg["seed"], package_versions())
            for name, d in out.items():
                store_disparity(store, run_id, name, d)
            store.finish_run(run_id, "ok")
        out["_run_id"] = run_id
    return out


def store_disparity(store, run_id: int, name: str, d: Disparity) -> None:
    """Metric rows with ``grp`` = ``BY=group`` and ``BY:a-b`` (caller holds the transaction)."""
    for metric, per in d.results.items():
        for g, r in per.items():
            grp = f"{d.by}:{g}" if g == d.diff_key else f"{d.by}={g}"
            extra = dict(r.extra, **({"skipped": r.skipped} if r.skipped else {}))
            store.write_metric(run_id, name, metric, r.value, r.n, r.ci_low, r.ci_high, grp, extra)


def compare_disparities(store, names: Sequence[str], annotations, cfg: dict,
                        run_id: int | None = None) -> dict[str, dict[str, Disparity]]:
    """``{set: {by: Disparity}}`` for ``audit compare --disparity`` (groupings without
    labels are left out); stored under the compare's run when there is one."""
    from capaudit.io.targets import resolve_target

    bys = cfg.get("disparity") or ()
    bys = [b.strip() for b in bys.split(",")] if isinstance(bys, str) else list(bys)
    for by in bys:
        if by not in GROUPINGS:
            raise InputError(f"unknown grouping '{by}'", fix=f"use {' or '.join(GROUPINGS)}")
    bys = [b for b in bys if getattr(annotations, b, None)]
    out: dict[str, dict[str, Disparity]] = {}
    for name in names:
        t = resolve_target(store, name)
        out[name] = {by: target_disparity(t, annotations, cfg, by) for by in bys}
    if store is not None and run_id is not None and bys:
        with store.transaction():
            for name, per in out.items():
                for d in per.values():
                    store_disparity(store, run_id, name, d)
    return out


def disparity_rows(disparities: dict[str, dict[str, Disparity]]
                   ) -> tuple[list[str], list[list[str]]]:
    """(gap headers, rows of [set, metric, gap per grouping]) with 95% intervals as text."""
    bys = list(dict.fromkeys(by for per in disparities.values() for by in per))
    if not bys:
        return [], []
    heads = [next(per[by] for per in disparities.values() if by in per).diff_key for by in bys]
    metrics = list(dict.fromkeys(m for per in disparities.values() for d in per.values()
                                 for m in d.results))
    rows = []
    for name, per in disparities.items():
        for metric in metrics:
            cells = []
            for by in bys:
                d = per.get(by)
                r = d.results.get(metric, {}).get(d.diff_key) if d else None
                cells.append("-" if r is None or r.value is None else
                             f"{r.value:+.2f}" + ("" if r.ci_low is None else
                                                   f" [{r.ci_low:+.2f}, {r.ci_high:+.2f}]"))
            rows.append([name, metric, *cells])
    return [h.replace("-", " − ") for h in heads], rows


def disparity_markdown(disparities: dict[str, dict[str, Disparity]]) -> list[str]:
    """Report lines: per set and metric, each grouping's gap with its 95% interval."""
    heads, rows = disparity_rows(disparities)
    if not heads:
        return []
    return (["| set | metric | " + " | ".join(heads) + " |", "|---|---|" + "---:|" * len(heads)]
            + ["| " + " | ".join(r) + " |" for r in rows])
