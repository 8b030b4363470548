"""``audit compare``: the GCE paper's Table 1 view over several caption sets, hard to misread.

A side-by-side table misleads in five ways; this module computes around each:

* **Different images.** A set of easy images beats a set of hard ones. When
  the sets share images every set is scored on the shared images only
  (``same_images``, on by default when they overlap); :class:`Basis` says
  how many captions and images each set was scored on.
* **Different sample sizes.** Vocabulary grows with the number of captions
  (five human captions per image against one model caption), so it (every
  metric whose spec says ``size_dependent``) is compared on the same number
  of captions per set: a seeded sample of the smallest set's count, as
  ``audit disparity`` compares groups.
* **Differences inside the noise.** Best and worst are marked only where the
  95% interval of the set does not overlap any other set's interval.
* **Values that are 0 by construction.** Human COCO captions hallucinate
  nothing against a CHAIR ground truth built from those captions, nor does a
  set the hallucination filter cleaned with that ground truth; such values are
  flagged (``flags``) and never ranked.
* **A filtered set scored on its survivors.** A set whose parent is compared
  too is scored on the parent's images, each caption the filter dropped
  counting as an empty caption (it mentions nothing and hallucinates nothing),
  so recall lost by dropping captions shows.

LIC is slow and only computed when asked; otherwise the table carries a
visible ``lic`` column "not computed (use --lic)".

Presentation lives elsewhere: the terminal table in
:mod:`capaudit.cli.compare_view`, the report in :mod:`capaudit.audit.report`
(which imports this module, never the other way round).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from capaudit.audit.metrics.spec import direction
from capaudit.audit.runner import DEFAULTS, StreamTarget, resolve_target, run_audit
from capaudit.errors import InputError

# column order of every view, whatever order the metrics were computed in
ORDER = ("vocab", "length", "recall", "recall_corrected", "gender_error", "recall_disparity",
         "chair_s", "chair_s_corrected", "chair_i", "chair_i_corrected", "lic_m", "lic_d", "lic")
LIC_NOT_COMPUTED = "not computed (use --lic)"
# caption formats that hold human COCO captions: the CHAIR ground truth is built from them
HUMAN_COCO_FORMATS = ("coco", "karpathy")
BY_CONSTRUCTION = ("by construction: the CHAIR ground truth includes the objects parsed from "
                   "these human captions")
FILTERED_BY_GT = ("by construction: the hallucination filter removed what this CHAIR ground "
                  "truth calls hallucinated (score it with other evidence: filter --evidence "
                  "instances or a detector)")


@dataclass
class Basis:
    """What each set was scored on."""

    same_images: bool
    shared_images: int                    # images every compared set has
    images: dict[str, int]                # images scored, per set
    captions: dict[str, int]              # captions scored, per set (padding included)
    total_images: dict[str, int]
    total_captions: dict[str, int]
    on_parent: dict[str, str] = field(default_factory=dict)   # filtered set -> its parent
    dropped: dict[str, int] = field(default_factory=dict)     # filtered set -> empty captions
    equal_captions: int | None = None     # captions per set behind size-dependent metrics
    equal_metrics: list[str] = field(default_factory=list)

    def describe(self) -> list[str]:
        """One line per fact a reader needs before reading the numbers."""
        names = list(self.images)
        if self.same_images:
            lines = [f"compared on the {self.shared_images:,} images all {len(names)} sets share ("
                     + ", ".join(f"{n}: {self.total_images[n]:,}" for n in names)
                     + " images in all); --all-images scores each set on all its images"]
        else:
            why = ("the sets share no images" if not self.shared_images else
                   f"--all-images; they share {self.shared_images:,}")
            lines = [f"each set scored on all its own images ({why}): differences mix captions "
                     "and images"]
        for child, parent in self.on_parent.items():
            lines.append(f"{child} is scored on its parent {parent}'s images: each of the "
                         f"{self.dropped[child]:,} captions the "
                         "filter dropped counts as an empty caption")
        if self.equal_captions is not None:
            lines.append(f"{', '.join(self.equal_metrics)} on {self.equal_captions:,} captions "
                         "per set (seeded sample): it grows with the number of captions")
        return lines


@dataclass
class Comparison:
    names: list[str]
    metrics: list[str]
    results: dict[str, Any]               # name -> AuditResult
    best: dict[str, str] = field(default_factory=dict)
    worst: dict[str, str] = field(default_factory=dict)
    report_dir: Any = None
    annotations: Any = None
    run_id: int | None = None
    parent_costs: list[dict] = field(default_factory=list)
    amplifications: list[tuple[str, str, list]] = field(default_factory=list)
    disparities: dict[str, dict] = field(default_factory=dict)   # set -> {by: Disparity}
    basis: Basis | None = None
    flags: dict[tuple[str, str], str] = field(default_factory=dict)  # (set, metric) -> why unranked
    unmarked: dict[str, str] = field(default_factory=dict)  # metric -> "best"/"worst"/both: in noise

    def value(self, name: str, metric: str):
        r = self.results[name].results.get(metric)
        return None if r is None or r.skipped else r.value

    def result(self, name: str, metric: str):
        return self.results[name].results.get(metric)


def ordered(metrics) -> list[str]:
    """Metrics in the one column order of every view (unknown ones after, as given)."""
    metrics = list(dict.fromkeys(metrics))
    return ([m for m in ORDER if m in metrics] + [m for m in metrics if m not in ORDER])


def _separated(r, others) -> bool:
    """True when ``r``'s 95% interval overlaps none of ``others``' (all must have one)."""
    if r.ci_low is None or r.ci_high is None:
        return False
    for o in others:
        if o.ci_low is None or o.ci_high is None:
            return False
        if not (r.ci_high < o.ci_low or r.ci_low > o.ci_high):
            return False
    return True


def rank(cmp: Comparison) -> None:
    """Mark best/worst per metric where the intervals say so; flagged values take no part."""
    for m in cmp.metrics:
        d = direction(m)
        cand = {}
        for n in cmp.names:
            r = cmp.result(n, m)
            if r is not None and not r.skipped and r.value is not None and (n, m) not in cmp.flags:
                cand[n] = r
        if d == 0 or len(cand) < 2 or len({r.value for r in cand.values()}) < 2:
            continue
        order = sorted(cand, key=lambda n: cand[n].value * d)
        worst, best = order[0], order[-1]
        if _separated(cand[best], [cand[n] for n in order[:-1]]):
            cmp.best[m] = best
        if _separated(cand[worst], [cand[n] for n in order[1:]]):
            cmp.worst[m] = worst
        missing = [k for k, marks in (("best", cmp.best), ("worst", cmp.worst)) if m not in marks]
        if missing:
            cmp.unmarked[m] = " or ".join(missing)


def _counts(t: StreamTarget) -> tuple[Counter, int]:
    """Captions per image id, and captions without an image."""
    counts: Counter = Counter()
    none = 0
    for iid, _ in t.rows():
        if iid is None:
            none += 1
        else:
            counts[iid] += 1
    return counts, none


def _restrict(t: StreamTarget, keep: set | None, pad: Counter | None, n: int) -> StreamTarget:
    """``t`` limited to the images in ``keep`` (None: all), padded with empty captions up to
    ``pad``'s count per image (a filtered set on its parent's images)."""
    if keep is None and pad is None:
        return StreamTarget(t.name, t.source, t.spec, t.rows, n)

    def rows():
        seen: Counter = Counter()
        for iid, cap in t.rows():
            if keep is None or iid in keep:
                seen[iid] += 1
                yield iid, cap
        for iid, k in (pad or {}).items():
            if keep is None or iid in keep:
                for _ in range(k - seen[iid]):
                    yield iid, ""

    return StreamTarget(t.name, t.source, t.spec, rows, n)


def _set_info(store, t: StreamTarget):
    return store.find_set(t.spec) if store is not None and t.source.startswith("set:") else None


def _format(store, t: StreamTarget) -> str | None:
    info = _set_info(store, t)
    if info is not None:
        return info.format
    try:
        from capaudit.io.readers import detect_format
        from pathlib import Path
        return detect_format(Path(t.source))
    except Exception:  # noqa: BLE001 - a format we cannot tell is simply not human COCO
        return None


def plan_basis(store, resolved: list[StreamTarget], same_images: bool | None
               ) -> tuple[list[StreamTarget], Basis]:
    """The targets restricted (and padded) as the comparison needs, and the basis."""
    names = [t.name for t in resolved]
    counts = {t.name: _counts(t) for t in resolved}
    on_parent = {}
    for t in resolved:
        info = _set_info(store, t)
        if info is not None and info.parent in names and info.format != "downstream":
            on_parent[t.name] = info.parent
    padded = {n: (counts[n][0] | counts[p][0]) if (p := on_parent.get(n)) else counts[n][0]
              for n in names}
    shared = set.intersection(*(set(c) for c in padded.values())) if padded else set()
    identical = all(set(c) == shared for c in padded.values())
    if same_images is None:
        same_images = bool(shared)
    if same_images and not shared:
        raise InputError("the compared sets share no images", fix="use --all-images to score "
                         "each set on its own images (differences then mix captions and images)")
    keep = shared if same_images and not identical else None
    out, images, captions = [], {}, {}
    for t in resolved:
        c = padded[t.name]
        used = {i: k for i, k in c.items() if keep is None or i in keep}
        images[t.name] = len(used)
        captions[t.name] = sum(used.values()) + (0 if same_images else counts[t.name][1])
        pad = counts[on_parent[t.name]][0] if t.name in on_parent else None
        out.append(_restrict(t, keep if same_images else None, pad, captions[t.name]))
    basis = Basis(same_images, len(shared), images, captions,
                  {n: len(counts[n][0]) for n in names},
                  {n: sum(counts[n][0].values()) + counts[n][1] for n in names}, on_parent,
                  {n: sum((counts[p][0] - counts[n][0]).values()) for n, p in on_parent.items()})
    return out, basis


def _sample(t: StreamTarget, k: int, seed: int) -> StreamTarget:
    """``k`` of ``t``'s captions (seeded, without replacement, in their order)."""
    mask = np.zeros(t.n, bool)
    mask[np.random.default_rng(seed).choice(t.n, k, replace=False)] = True

    def rows():
        for j, row in enumerate(t.rows()):
            if mask[j]:
                yield row

    return StreamTarget(t.name, t.source, t.spec, rows, k)


def size_dependent(metrics) -> list[str]:
    """Metrics whose value grows with the number of captions (vocabulary), by their spec."""
    from capaudit.audit.metrics.spec import metric_spec

    return [m for m in metrics if (s := metric_spec(m)) is not None and s.size_dependent]


def equal_size(targets: list[StreamTarget], metrics: list[str], annotations, cfg: dict
               ) -> tuple[int | None, dict]:
    """``metrics`` of every set on the same number of captions: ``(k, {set: {metric:
    result}})``, or ``(None, {})`` when the sets already have equal counts."""
    from capaudit.audit.runner import audit_stream_target

    k = min(t.n for t in targets)
    if not metrics or all(t.n == k for t in targets) or k == 0:
        return None, {}
    out = {}
    for i, t in enumerate(targets):
        seed = int(np.random.SeedSequence([int(cfg["seed"]), 7, i]).generate_state(1)[0])
        sub = t if t.n == k else _sample(t, k, seed)
        res = audit_stream_target(sub, annotations, {**cfg, "metrics": metrics})
        for r in res.results.values():
            r.extra = dict(r.extra, basis=f"{k} captions per set", captions=k)
        out[t.name] = res.results
    return k, out


def _circular_reason(store, t: StreamTarget) -> str | None:
    """Why this set's CHAIR is 0 by construction, if it is."""
    if _format(store, t) in HUMAN_COCO_FORMATS:
        return BY_CONSTRUCTION
    info = _set_info(store, t)
    opts = (info.options or {}) if info is not None else {}
    if opts.get("filter") == "hallucination" and opts.get("evidence") == "chair-gt":
        return FILTERED_BY_GT
    return None


def flag_circular(store, resolved: list[StreamTarget], cmp: Comparison) -> None:
    """CHAIR of human COCO captions, or of a set filtered with the CHAIR ground truth, is 0
    by construction: flag it, never rank it."""
    for t in resolved:
        why = _circular_reason(store, t)
        if why is None:
            continue
        for m in cmp.metrics:
            if m.startswith("chair") and cmp.value(t.name, m) is not None:
                cmp.flags[(t.name, m)] = why


def compare_sets(store, names: Sequence[str], cfg: dict | None = None,
                 same_images: bool | None = None, **hooks) -> Comparison:
    """Audit ``names`` on a common basis, flag and rank them (``hooks``: ``on_target`` /
    ``on_progress`` of :func:`run_audit`). ``same_images``: None = when the sets overlap."""
    cfg = {**DEFAULTS, **(cfg or {})}
    resolved = [resolve_target(store, n) for n in names]
    if len({t.name for t in resolved}) != len(resolved):
        raise InputError(f"two targets share the name {[t.name for t in resolved]}",
                         fix="register them under distinct set names")
    targets, basis = plan_basis(store, resolved, same_images)
    results = run_audit(store, targets, cfg, **hooks)
    annotations = results.pop("_annotations")
    run_id = results.pop("_run_id", None)
    set_names = list(results)
    sized = size_dependent(dict.fromkeys(m for r in results.values() for m in r.results))
    k, equal = equal_size(targets, sized, annotations, cfg)
    basis.equal_captions, basis.equal_metrics = k, sized if k else []
    for name, per in equal.items():
        for m, r in per.items():
            if m in results[name].results:
                r.extra["all_captions"] = results[name].results[m].value
                results[name].results[m] = r
    if equal and store is not None and run_id is not None:
        with store.transaction():
            for name, per in equal.items():
                for m, r in per.items():
                    store.write_metric(run_id, name, m, r.value, r.n, r.ci_low, r.ci_high,
                                       f"equal:{k}", r.extra)
    from capaudit.audit.metrics.base import MetricResult
    why = (LIC_NOT_COMPUTED if not cfg.get("lic") else
           "LIC = LIC_M - LIC_D needs human captions (--lic-reference HUMAN_SET)")
    for res in results.values():  # never silently absent
        res.results.setdefault("lic", MetricResult(None, 0, skipped=why))
    metrics = ordered(m for res in results.values() for m in res.results)
    cmp = Comparison(set_names, metrics, results, annotations=annotations, run_id=run_id,
                     basis=basis)
    flag_circular(store, resolved, cmp)
    rank(cmp)
    cmp.parent_costs = parent_costs(store, cmp)
    if cfg.get("disparity"):
        from capaudit.audit.disparity import compare_disparities
        cmp.disparities = compare_disparities(store, set_names, annotations, cfg, run_id)
    return cmp


def parent_costs(store, cmp: Comparison) -> list[dict]:
    """What a filter cost, for each compared set whose parent is compared too.

    Both are scored on the parent's images, each caption the filter dropped
    counting as empty (:func:`plan_basis`), so ``recall`` here is the honest
    recall cost that the filtered set's own recall (over surviving captions
    only) hides.
    """
    out = []
    if store is None:
        return out
    on_parent = cmp.basis.on_parent if cmp.basis else {}
    for name in cmp.names:
        info = store.find_set(name)
        if info is None or not info.parent or info.parent not in cmp.names:
            continue
        if info.format == "downstream":  # captions of a model trained on the parent set
            from capaudit.audit.amplification import amplification
            cmp.amplifications.append((info.parent, name, amplification(
                cmp.results[info.parent].results, cmp.results[name].results)))
            continue
        child, parent = cmp.results[name].results, cmp.results[info.parent].results
        total = cmp.basis.total_captions if cmp.basis else {}
        row = {"set": name, "parent": info.parent, "on_parent": name in on_parent,
               "captions": total.get(name, cmp.results[name].meta.get("n_captions")),
               "parent_captions": total.get(info.parent,
                                            cmp.results[info.parent].meta.get("n_captions"))}
        for m in ("recall", "length", "chair_s", "gender_error"):
            if m in child and m in parent and not child[m].skipped and not parent[m].skipped:
                row[m] = (parent[m].value, child[m].value)
        out.append(row)
    return out
