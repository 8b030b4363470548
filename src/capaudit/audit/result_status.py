"""The status of each value of an audit: what must be read with it, set once, shown everywhere.

Why here: the engine knows a value's images, the coverage guard what each annotation
covers, the configuration how many images a value needs (``--min-n``) and whether the
audit ran on the covered images only (``--allow-partial``). Joining them once, on the
:class:`~capaudit.metrics.estimate.MetricResult` itself, is what lets the terminal,
JSON, report, leaderboard and DataFrame show the same caveat (:mod:`capaudit.metrics.present`):

- ``partial``: ``--allow-partial`` and an annotation the metric reads covers only part of
  the set ("partial: 20 of 100 images");
- ``too-few``: the value rests on fewer than ``min_n`` images (six labelled images give
  a gender error of 0.00 [0.00, 0.00]): shown, never ranked;
- ``skipped: why``: not computed.

- ``by-construction``: CHAIR of the human COCO captions the CHAIR ground truth was built
  from is 0 whatever the captions say. Only where true: the ground truth covers every image
  of the set and the value is 0 (another ground truth, a partial audit or another mode
  gives a measurement, not a construction);
- ``circular``: the value judges hallucination against the very evidence a filter of the
  set's lineage used to drop sentences, whatever the value (:mod:`capaudit.audit.circular`),
  with the independent score beside it.

:data:`UNRANKED` are the statuses every ranking leaves out (the compare marks, the
leaderboard's columns).
"""

from __future__ import annotations

from typing import Any, Mapping

from capaudit.metrics.spec import annotation_kinds

__all__ = ["DEFAULT_MIN_N", "assign_status", "too_few_note", "mark_by_construction",
           "BY_CONSTRUCTION", "FILTERED_BY_GT", "HUMAN_COCO_FORMATS", "UNRANKED"]

DEFAULT_MIN_N = 30
UNRANKED = ("by-construction", "circular")   # shown with their note, never ranked
# caption formats that hold human COCO captions: the CHAIR ground truth is built from them
HUMAN_COCO_FORMATS = ("coco", "karpathy")
BY_CONSTRUCTION = ("by construction: the CHAIR ground truth includes the objects parsed from "
                   "these human captions")
FILTERED_BY_GT = ("by construction: the hallucination filter removed what this CHAIR ground "
                  "truth calls hallucinated (score it with other evidence: filter --evidence "
                  "instances or a detector)")


def too_few_note(n_images: int, min_n: int) -> str:
    return f"too few: {n_images:,} images (under --min-n {min_n})"


def used_kinds(cov, metric: str) -> list[str]:
    """The annotation kinds ``metric`` reads that the target's coverage ``cov`` kept."""
    return [k for k in annotation_kinds([metric])
            if cov is not None and k in cov.covered and k not in cov.dropped]


def partial_note(cov, metric: str) -> str | None:
    """"partial: 20 of 100 images" (the least-covered annotation ``metric`` reads), or
    None when every one it reads covers all the target's images."""
    short = [cov.covered[k] for k in used_kinds(cov, metric) if cov.covered[k] < cov.n_images]
    return f"partial: {min(short):,} of {cov.n_images:,} images" if short else None


def assign_status(results: Mapping[str, Any], cov, cfg: Mapping[str, Any]) -> None:
    """Set coverage, status and notes of every result of one target (``cov``: its
    :class:`~capaudit.audit.annotation_coverage.Coverage`, or ``None``)."""
    min_n = int(cfg.get("min_n") or DEFAULT_MIN_N)
    partial_run = bool(cfg.get("allow_partial"))
    for name, r in results.items():
        if r.skipped:
            continue
        kinds = used_kinds(cov, name)
        r.coverage = {k: round(cov.share_of_ids(k), 6) for k in kinds}
        if partial_run and (note := partial_note(cov, name)):
            r.mark("partial", note)
        if r.value is not None and r.n_images is not None and r.n_images < min_n:
            r.mark("too-few", too_few_note(r.n_images, min_n))


def _origin(store, target) -> tuple[str | None, dict]:
    """(caption format, filter options) of a target: a stored set's, or a file's format."""
    if target.source.startswith("set:"):
        info = store.find_set(target.spec) if store is not None else None
        return (None, {}) if info is None else (info.format, info.options or {})
    try:
        from pathlib import Path

        from capaudit.io.readers import detect_format
        return detect_format(Path(target.source)), {}
    except Exception:  # noqa: BLE001 - a format we cannot tell is simply not human COCO
        return None, {}


def mark_by_construction(store, target, results: Mapping[str, Any], cov) -> None:
    """Mark the CHAIR values of ``target`` that are 0 by construction (see the module): a
    filtered set's are ``circular`` instead (:mod:`capaudit.audit.circular`), whatever
    their value."""
    fmt, _ = _origin(store, target)
    why = BY_CONSTRUCTION if fmt in HUMAN_COCO_FORMATS else None
    if why is None or cov is None or "chair_gt" in cov.dropped \
            or cov.covered.get("chair_gt") != cov.n_images:
        return
    for name, r in results.items():
        if name.startswith("chair") and not r.skipped and r.value == 0:
            r.mark("by-construction", why)
