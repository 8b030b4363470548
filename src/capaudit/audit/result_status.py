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

``by-construction`` is set by compare, which knows where a set came from.
"""

from __future__ import annotations

from typing import Any, Mapping

from capaudit.metrics.spec import annotation_kinds

__all__ = ["DEFAULT_MIN_N", "assign_status", "too_few_note"]

DEFAULT_MIN_N = 30


def too_few_note(n_images: int, min_n: int) -> str:
    return f"too few: {n_images:,} images (under --min-n {min_n})"


def assign_status(results: Mapping[str, Any], cov, cfg: Mapping[str, Any]) -> None:
    """Set coverage, status and notes of every result of one target (``cov``: its
    :class:`~capaudit.audit.annotation_coverage.Coverage`, or ``None``)."""
    min_n = int(cfg.get("min_n") or DEFAULT_MIN_N)
    partial_run = bool(cfg.get("allow_partial"))
    for name, r in results.items():
        if r.skipped:
            continue
        kinds = [k for k in annotation_kinds([name])
                 if cov is not None and k in cov.covered and k not in cov.dropped]
        r.coverage = {k: round(cov.share(k), 6) for k in kinds}
        short = [k for k in kinds if cov.covered[k] < cov.n_images]
        if partial_run and short:
            least = min(cov.covered[k] for k in short)
            r.mark("partial", f"partial: {least:,} of {cov.n_images:,} images")
        if r.value is not None and r.n_images is not None and r.n_images < min_n:
            r.mark("too-few", too_few_note(r.n_images, min_n))
