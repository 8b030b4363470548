"""Circular scoring: a value computed from the evidence a filter of the set's lineage used.

Why: the hallucination filter drops what its evidence does not support; CHAIR counts what
its ground truth does not support. A set filtered with the CHAIR ground truth and scored
with that same ground truth measures the filter against itself: ``llava_cg`` showed CHAIR_s
8.89 -> 5.56 and 890 ShareGPT4V captions 33.6 -> 2.4, both ``ok``, while only a value of
exactly 0 was flagged. Here the question is asked of the content, not of the value:

- the lineage: every filter from the set back to its first parent records the evidence it
  used (kind and identity: the sha256 of the file or of the stored source,
  ``evidence_sha256`` in the filtered set's options; a set filtered before that was recorded
  is matched by kind);
- a value is ``circular`` when its metric judges hallucination (criterion ``alignment``)
  against an annotation of the kind a lineage filter used with the same identity; the
  status travels on the :class:`~capaudit.metrics.estimate.MetricResult` to every view
  (terminal, JSON, report, card, store) and keeps it off every ranking;
- beside it, the independent score: the same metric with the COCO instance categories as
  its ground truth (evidence the filter did not use), computed by the caller's ``score``
  over the same rows, with its own n and status; else the score the filter run measured
  with ``--score-evidence``; else a note saying how to get one.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

__all__ = ["CIRCULAR", "FilterEvidence", "lineage_evidence", "find_circular", "mark_circular"]

CIRCULAR = "circular"
# the filter's evidence kind -> the annotation kind an audit reads for it
ANNOTATION_OF = {"chair-gt": "chair_gt", "instances": "instances"}
WHAT = {"chair_gt": "CHAIR ground truth", "instances": "COCO instance categories"}


@dataclass(frozen=True)
class FilterEvidence:
    """The evidence one filter of a lineage used."""

    set_name: str           # the set that filter wrote
    filter: str
    kind: str               # chair-gt, instances, detector
    sha256: str | None      # None: not recorded (an older store) or given in Python


def lineage_evidence(store, name: str) -> list[FilterEvidence]:
    """The evidence of every filter from set ``name`` back to its first parent."""
    out, seen = [], set()
    info = store.find_set(name) if store is not None else None
    while info is not None and info.name not in seen:
        seen.add(info.name)
        opts = info.options or {}
        if info.format == "filter" and opts.get("evidence"):
            sha = opts.get("evidence_sha256")
            if sha is None and opts.get("evidence_source"):   # recorded before the sha was
                from capaudit.io.annotation_store import source_sha256

                sha = source_sha256(store, opts["evidence_source"])
            out.append(FilterEvidence(info.name, str(opts.get("filter") or "filter"),
                                      str(opts["evidence"]), sha))
        info = store.find_set(info.parent) if info.parent else None
    return out


def find_circular(store, target, annotations) -> dict[str, FilterEvidence]:
    """``{annotation kind: the lineage filter whose evidence it is}`` for a stored set."""
    if store is None or not str(getattr(target, "source", "")).startswith("set:"):
        return {}
    from capaudit.io.annotation_store import source_sha256

    found: dict[str, FilterEvidence] = {}
    for ev in lineage_evidence(store, target.spec):
        kind = ANNOTATION_OF.get(ev.kind)
        if kind is None or kind in found or getattr(annotations, kind, None) is None:
            continue
        used = source_sha256(store, annotations.sources.get(kind))
        if ev.sha256 is None or used is None or ev.sha256 == used:
            found[kind] = ev
    return found


def circular_metrics(results: Mapping[str, Any], found: Mapping[str, FilterEvidence]
                     ) -> dict[str, str]:
    """``{metric: annotation kind}`` of the computed values that judge hallucination against
    an annotation in ``found``."""
    from capaudit.metrics.spec import metric_spec

    out = {}
    for name, r in results.items():
        spec = metric_spec(name)
        if r.skipped or spec is None or spec.criterion != "alignment":
            continue
        kind = next((k for k in spec.needs if k in found), None)
        if kind is not None:
            out[name] = kind
    return out


def _identity(ev: FilterEvidence) -> str:
    return f"sha256 {ev.sha256[:12]}" if ev.sha256 else "identity not recorded"


def mark_circular(store, results: Mapping[str, Any], found: Mapping[str, FilterEvidence],
                  annotations, cfg: Mapping[str, Any],
                  score: Callable[..., Mapping[str, Any]] | None = None) -> None:
    """Mark the circular values of one target and put the independent score beside each.
    ``score(annotations, metrics, set_name)``: the target (``set_name`` None) or another
    stored set audited with other annotations, as ``{metric: MetricResult}``."""
    names = circular_metrics(results, found)
    if not names:
        return
    independent = _instances_scores(store, names, found, annotations, cfg, score,
                                    {m: results[m].n_images for m in names})
    for name, kind in names.items():
        ev, r = found[kind], results[name]
        r.mark(CIRCULAR, f"circular: scored with the {WHAT[kind]} ({_identity(ev)}) that the "
                         f"{ev.filter} filter of '{ev.set_name}' used to decide what to drop")
        ind = independent.get(name) or _stored_score(store, ev, name)
        r.extra["independent"] = ind
        r.notes.append(independent_note(ind))


def score_text(ind: Mapping[str, Any]) -> str:
    """``12.22 [5.56, 18.89] n=30`` (``(too-few)`` after it when so)."""
    ci = ind.get("ci") or [None, None]
    iv = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if None not in ci else ""
    n = f"n={ind['n_images']:,}" if ind.get("n_images") is not None else f"n={ind['n']:,} captions"
    status = f" ({ind['status']})" if ind.get("status") not in (None, "ok") else ""
    return f"{ind['value']:.2f}{iv} {n}{status}"


def independent_note(ind: Mapping[str, Any] | None) -> str:
    """``independent: 12.22 [5.56, 18.89] n=30 under COCO instance categories (sha256 ..);
    before the filter (llava): 26.67 [..] n=30``."""
    if not ind or ind.get("value") is None:
        return ("independent: none (score the set with evidence its filter did not use: "
                "--instances FILE, or filter run --score-evidence instances|DETECTIONS)")
    line = f"independent: {score_text(ind)} under {ind['evidence']}"
    if ind.get("before"):
        line += f"; before the filter ({ind['before']['set']}): {score_text(ind['before'])}"
    return line


def _instances_scores(store, names: Mapping[str, str], found, annotations, cfg, score,
                      own_images: Mapping[str, int | None]) -> dict:
    """The circular CHAIR values recomputed with the instance categories as ground truth
    (when those are not themselves the filter's evidence), and the same for the set the
    filter read (``before``), so the gain is measured, not asserted."""
    if score is None or getattr(annotations, "instances", None) is None or "instances" in found:
        return {}
    asked = [m for m, k in names.items() if k == "chair_gt"]
    if not asked:
        return {}
    from capaudit.io.annotation_store import source_sha256
    from capaudit.metrics.spec import CORRECTED_SUFFIX

    other = dataclasses.replace(annotations, chair_gt=annotations.instances)
    base = sorted({m.removesuffix(CORRECTED_SUFFIX) for m in asked})
    sha = source_sha256(store, annotations.sources.get("instances"))
    what = f"{WHAT['instances']} ({'sha256 ' + sha[:12] if sha else 'given in Python'})"
    info = store.find_set(found["chair_gt"].set_name) if store is not None else None
    parent = info.parent if info is not None else None
    covered = frozenset(annotations.instances)   # an image they lack is not judged at all
    after = score(other, base, None, covered)
    before = score(other, base, parent, covered) if parent else {}
    min_n = int(cfg.get("min_n") or 30)
    out = {}
    for m in asked:
        r = after.get(m)
        if r is None or r.skipped or r.value is None:
            continue
        out[m] = {**_scored(r, min_n, own_images.get(m)), "evidence": what, "sha256": sha}
        if (b := before.get(m)) is not None and not b.skipped and b.value is not None:
            out[m]["before"] = {"set": parent, **_scored(b, min_n, None)}
    return out


def _scored(r, min_n: int, of_images: int | None) -> dict:
    """A value with its interval, n and status: ``too-few`` under ``min_n`` images,
    ``partial: k of n images`` when it rests on fewer images than the value it stands
    beside (``of_images``)."""
    status = "ok"
    if of_images and (r.n_images or 0) < of_images:
        status = f"partial: {r.n_images or 0:,} of {of_images:,} images"
    if (r.n_images or 0) < min_n:
        status = "too-few" if status == "ok" else f"{status}; too-few"
    return {"value": r.value, "ci": [r.ci_low, r.ci_high], "n": r.n, "n_images": r.n_images,
            "status": status}


def _stored_score(store, ev: FilterEvidence, metric: str) -> dict | None:
    """The after-score the filter run measured with ``--score-evidence`` (when not circular)."""
    from capaudit.store.filter_log import has_tables, run_row

    if store is None or not has_tables(store):
        return None
    row = run_row(store, ev.set_name)
    ind = (json.loads(row[5]) if row and row[5] else {}).get("independent") or {}
    after = ind.get("after") or {}
    base = metric.split("_corrected")[0]
    if ind.get("circular") or after.get(base) is None:
        return None
    n = int(after.get("captions") or 0)
    return {"value": after[base], "ci": [None, None], "n": n, "n_images": None,
            "status": "ok" if n >= 30 else "too-few",
            "evidence": f"{ind.get('evidence')} (the filter run's --score-evidence; "
                        f"before: {(ind.get('before') or {}).get(base)})"}
