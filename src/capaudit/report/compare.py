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
* **Values that are 0 by construction, or circular.** Human COCO captions
  hallucinate nothing against a CHAIR ground truth built from those captions; a
  set the hallucination filter cleaned with some evidence, scored with that same
  evidence, measures the filter against itself (``circular``, with the
  independent score beside it, :mod:`capaudit.audit.circular`); such values are
  flagged (``flags``) and never ranked.
* **A filtered set scored on its survivors.** A set whose parent is compared
  too is scored on the parent's images, each caption the filter dropped
  counting as an empty caption (it mentions nothing and hallucinates nothing),
  so recall lost by dropping captions shows.

LIC is slow and only computed when asked; otherwise the table carries a
visible ``lic`` column "not computed (use --lic)".

The basis (shared images, padding, equal sizes) is planned in
:mod:`capaudit.report.basis`. Presentation lives elsewhere: the terminal table in
:mod:`capaudit.cli.compare_view`, the report in :mod:`capaudit.report`
(which imports this module, never the other way round).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capaudit.report.basis import Basis, equal_size, plan_basis, set_format, size_dependent
from capaudit.metrics.lic import LIC_NOT_COMPUTED
from capaudit.metrics.spec import direction, ordered
from capaudit.audit import result_status
from capaudit.audit.config import AuditConfig
from capaudit.audit.id_join import unranked_reason
from capaudit.audit.runner import resolve_target, run_audit
from capaudit.errors import InputError

__all__ = [
    "Comparison",
    "compare_sets",
    "ordered",
    "parent_costs",
    "rank",
]


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
    validations: dict[str, list] = field(default_factory=dict)   # set -> filter validate rows
    basis: Basis | None = None
    flags: dict[tuple[str, str], str] = field(default_factory=dict)  # (set, metric) -> why unranked
    unmarked: dict[str, str] = field(default_factory=dict)  # metric -> "best"/"worst"/both: in noise
    unranked: dict[str, str] = field(default_factory=dict)  # metric -> why the data cannot rank it
    min_n: int = 30                       # images every compared value needs to be ranked
    human: set[str] = field(default_factory=set)  # human caption sets: drawn, never fitted
    file_scores: dict[str, dict] = field(default_factory=dict)  # set -> its file's own scores

    def value(self, name: str, metric: str):
        r = self.results[name].results.get(metric)
        return None if r is None or r.skipped else r.value

    def result(self, name: str, metric: str):
        return self.results[name].results.get(metric)


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


def _unrankable(cand: dict, min_n: int) -> str | None:
    """Why these values cannot be ranked: one rests on fewer than ``min_n`` images, or its
    interval has no width (six zeros resample to [0, 0] and "overlap" nothing)."""
    from capaudit.metrics.present import is_degenerate

    few = [f"{n} rests on {r.n_images:,} images" for n, r in cand.items()
           if r.n_images is not None and r.n_images < min_n]
    if few:
        return ", ".join(few) + f" (under --min-n {min_n})"
    flat = [n for n, r in cand.items() if is_degenerate(r)]
    if flat:
        return ", ".join(flat) + " has a zero-width interval"
    return None


def rank(cmp: Comparison) -> None:
    """Mark best/worst per metric where the intervals say so; flagged values take no part,
    and sets of different datasets (each on its own images) are never ranked."""
    apart = unranked_reason(cmp.basis.datasets if cmp.basis else {})
    for m in cmp.metrics:
        d = direction(m)
        cand = {}
        for n in cmp.names:
            r = cmp.result(n, m)
            if r is not None and not r.skipped and r.value is not None and (n, m) not in cmp.flags:
                cand[n] = r
        if d == 0 or len(cand) < 2 or len({r.value for r in cand.values()}) < 2:
            continue
        why = (apart or _unrankable(cand, cmp.min_n))
        if why:
            cmp.unranked[m] = why
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


def flag_circular(cmp: Comparison) -> None:
    """Values the audit marked ``by-construction`` or ``circular``
    (:data:`capaudit.audit.result_status.UNRANKED`): flagged with their notes, never ranked."""
    for name in cmp.names:
        for m in cmp.metrics:
            r = cmp.result(name, m)
            if r is not None and not r.skipped and r.status in result_status.UNRANKED:
                # why a CHAIR value is 0 by construction: said where the value is made
                cmp.flags[(name, m)] = "; ".join(t for t in r.notes if not t.startswith(
                    ("partial", "too few"))) or result_status.BY_CONSTRUCTION


def compare_sets(store, names: Sequence[str], cfg: Mapping | None = None,
                 same_images: bool | None = None, **hooks) -> Comparison:
    """Audit ``names`` on a common basis, flag and rank them (``hooks``: ``on_target`` /
    ``on_progress`` of :func:`run_audit`). ``same_images``: None = when the sets overlap."""
    import dataclasses

    from capaudit.io.annotation_store import resolve_annotations

    # a copy: the LOTUS options prepared for the audit stay out of the caller's config
    cfg = dataclasses.replace(AuditConfig.of(cfg))
    resolved = [resolve_target(store, n) for n in names]
    human = {t.name for t in resolved if set_format(store, t) in result_status.HUMAN_COCO_FORMATS}
    if len({t.name for t in resolved}) != len(resolved):
        raise InputError(f"two targets share the name {[t.name for t in resolved]}",
                         fix="register them under distinct set names")
    read: dict = {}   # the annotations, read here only when unassigned ids need them

    def annotations():
        read["all"] = resolve_annotations(store, cfg.get("instances"), cfg.get("chair_gt"),
                                          cfg.get("demographics"))
        return read["all"]

    targets, basis = plan_basis(store, resolved, same_images, cfg["min_coverage"], annotations)
    results = run_audit(store, targets, cfg, annotations=read.get("all"), **hooks)
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
    if store is not None and run_id is not None:  # part-of-set rows never pass for the whole
        from capaudit.store.results import mark_compare_basis

        for name in set_names:
            part = (basis.images.get(name) != basis.total_images.get(name)
                    or basis.captions.get(name) != basis.total_captions.get(name))
            if part:
                mark_compare_basis(store, run_id, name,
                                   f"{basis.images.get(name):,} of {basis.total_images.get(name):,}"
                                   f" images (audit compare)")
    if equal and store is not None and run_id is not None:
        with store.transaction():
            for name, per in equal.items():
                for m, r in per.items():
                    store.write_metric(run_id, name, m, r.value, r.n, r.ci_low, r.ci_high,
                                       f"equal:{k}", r.extra)
    from capaudit.metrics.base import MetricResult
    why = (LIC_NOT_COMPUTED if not cfg.get("lic") else
           "LIC = LIC_M - LIC_D needs human captions (--lic-reference HUMAN_SET)")
    for res in results.values():  # never silently absent
        res.results.setdefault("lic", MetricResult(None, 0, skipped=why))
    metrics = ordered(m for res in results.values() for m in res.results)
    cmp = Comparison(set_names, metrics, results, annotations=annotations, run_id=run_id,
                     basis=basis, min_n=int(cfg.get("min_n") or 30), human=human)
    flag_circular(cmp)
    rank(cmp)
    cmp.parent_costs = parent_costs(store, cmp)
    from capaudit.report.file_scores import file_scores   # a CHAIR output's, beside capaudit's
    cmp.file_scores = file_scores(store, run_id, results, lambda n: n not in basis.on_parent and
                                  basis.captions[n] == basis.total_captions[n])
    from capaudit.store.validations import validations_of
    cmp.validations = {n: v for n in set_names if (v := validations_of(store, n))}
    if cfg.get("disparity"):
        from capaudit.audit.disparity import compare_disparities
        cmp.disparities = compare_disparities(store, set_names, annotations, cfg, run_id)
    return cmp


def compare_and_report(store, sets: Sequence[str], report_dir: str | Path | None, cfg: Mapping,
                       same_images: bool | None = None, **hooks) -> Comparison:
    """:func:`compare_sets`, then report.md/html (+ plots) in ``report_dir`` when given: the one
    path of ``audit compare``, ``capaudit demo`` and :meth:`capaudit.api.AuditStore.compare`."""
    from capaudit.report import write_report

    cfg = AuditConfig.of(cfg)
    if report_dir is not None:   # '/', the working or home folder, a link: before any work
        from capaudit.core.safe_write import check_folder_target
        check_folder_target(report_dir)
    cmp = compare_sets(store, sets, cfg, same_images=same_images, **hooks)
    if report_dir is not None:
        from capaudit.io.annotation_store import annotation_provenance

        cmp.report_dir = Path(report_dir)
        ann = annotation_provenance(store, getattr(cmp.annotations, "sources", {}))
        write_report(cmp, cmp.report_dir, {**cfg, "same_images": same_images, "annotations": ann})
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
