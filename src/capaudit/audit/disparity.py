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

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from capaudit.audit.bootstrap import bootstrap_values, interval
from capaudit.audit.engine import image_id_array, point_value
from capaudit.audit.metrics import METRICS, default_metrics
from capaudit.audit.metrics.base import MetricContext, MetricResult
from capaudit.audit.metrics.stream import StreamStats, check_streams
from capaudit.errors import InputError
from capaudit.text.records import build_records

__all__ = ["GROUPINGS", "Disparity", "audit_disparity"]

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


def _split(image_ids: np.ndarray, labels: dict, groups: tuple[str, str]):
    """Caption indices per group, and how many captions had no usable label."""
    lab = np.array([labels.get(int(i)) if i >= 0 else None for i in image_ids], dtype=object)
    idx = {g: np.flatnonzero(lab == g) for g in groups}
    return idx, int(len(image_ids) - sum(len(v) for v in idx.values()))


def _equal_images(ids: np.ndarray, idx: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """Caption indices of each group restricted to the same number of images (seeded)."""
    images = {g: np.unique(ids[v]) for g, v in idx.items()}
    k = min(len(v) for v in images.values())
    rng = np.random.default_rng(_group_seed(seed, 99))
    out = {}
    for g, v in idx.items():
        keep = images[g] if len(images[g]) == k else np.sort(rng.choice(images[g], k, replace=False))
        out[g] = v[np.isin(ids[v], keep)]
    return out


def _group_estimates(captions, ids, sel, names, annotations, mode, min_images, workers, skip,
                     config=None):
    """Every metric's estimate on one group (the engine's accumulators on one chunk)."""
    texts = [captions[i] for i in sel]
    records = build_records(texts, mode=mode, workers=workers)
    acc = StreamStats([n for n in names if n not in skip], mode, annotations, min_images, config)
    acc.add(MetricContext(records, ids[sel], annotations, min_images, captions=texts,
                          config=config))
    ests, skipped, units = acc.estimates()
    skipped.update({n: skip[n] for n in names if n in skip})
    return ests, skipped, units.n, units.n_images


def audit_disparity(image_ids: Sequence[int | None], captions: Sequence[str], annotations,
                    by: str = "gender", metrics: list[str] | None = None,
                    mode: str = "reference", n_boot: int = 1000, seed: int = 0,
                    workers: int = 2, min_images: int = 10, config: dict | None = None) -> Disparity:
    """Every metric on each group of ``by`` and the difference, with bootstrap intervals.
    ``config`` (the resolved settings) reaches every metric's context (LOTUS options)."""
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
    ids = image_id_array(image_ids)
    captions = list(captions)
    idx, unlabelled = _split(ids, labels, groups)
    if min(len(v) for v in idx.values()) == 0:
        empty = [g for g, v in idx.items() if len(v) == 0]
        raise InputError(f"no captions of {by} = {', '.join(empty)} images in this set",
                         fix="check that the labels cover this set's image ids")
    sized = [n for n in names if METRICS.get(n).size_dependent]
    plan = [(tuple(n for n in names if n not in sized), idx, "all images")]
    if sized:
        plan.append((tuple(sized), _equal_images(ids, idx, seed), "equal images"))
    results: dict[str, dict[str, MetricResult]] = {}
    meta = {"by": by, "groups": list(groups), "unlabelled_captions": unlabelled,
            "captions": {g: int(len(v)) for g, v in idx.items()}, "n_boot": n_boot,
            "seed": seed, "mode": mode}
    for part_names, part_idx, basis in plan:
        if not part_names:
            continue
        per_group, boots = {}, {}
        for k, g in enumerate(groups):
            ests, skipped, n_units, n_images = _group_estimates(
                captions, ids, part_idx[g], part_names, annotations, mode, min_images, workers,
                not_by(by, part_names), config)
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
    """:func:`audit_disparity` of a loaded target with the audit settings of ``cfg``."""
    from capaudit.audit.runner import metric_names

    return audit_disparity(target.image_ids, target.captions, annotations, by=by,
                           metrics=metric_names(cfg), mode=cfg["mode"], n_boot=cfg["n_boot"],
                           seed=cfg["seed"], workers=cfg["workers"],
                           min_images=cfg["min_images"], config=cfg)


def run_disparity(store, targets: Sequence[str], cfg: dict, by: str = "gender") -> dict:
    """Audit each target's disparity by ``by``; store every row in one transaction.

    Rows go to ``metrics`` with ``grp`` = ``gender=male``, ``gender=female`` and
    ``gender:male-female`` (likewise for skin tone), so per-group values sit
    beside the ``all`` rows of ``audit run``. Returns ``{name: Disparity}`` and
    ``_run_id``.
    """
    from capaudit.audit.targets import load_target
    from capaudit.core.config import current_command, package_versions
    from capaudit.io.annotation_store import resolve_annotations

    annotations = resolve_annotations(store, cfg.get("instances"), cfg.get("chair_gt"),
                                      cfg.get("demographics"))
    from capaudit.lotus.inputs import prepare

    prepare(store, cfg)  # LOTUS metrics: reference set, CLIP model (bad ones fail here)
    loaded = [load_target(store, t) for t in targets]
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
    from capaudit.audit.targets import load_target

    bys = cfg.get("disparity") or ()
    bys = [b.strip() for b in bys.split(",")] if isinstance(bys, str) else list(bys)
    for by in bys:
        if by not in GROUPINGS:
            raise InputError(f"unknown grouping '{by}'", fix=f"use {' or '.join(GROUPINGS)}")
    bys = [b for b in bys if getattr(annotations, b, None)]
    out: dict[str, dict[str, Disparity]] = {}
    for name in names:
        t = load_target(store, name)
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
