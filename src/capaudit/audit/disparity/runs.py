"""Disparity audits of stored sets: run on targets, written to the store's metric rows.

``audit disparity`` (:func:`run_disparity`) and ``audit compare --disparity``
(:func:`compare_disparities`) read each target in chunks with the audit's
settings and store every group's and every gap's row under one run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from capaudit.audit.disparity.gaps import Disparity, disparity_stream
from capaudit.audit.disparity.groups import GROUPINGS
from capaudit.errors import InputError

__all__ = ["target_disparity", "run_disparity", "store_disparity", "compare_disparities"]



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
            # what travels with the value, as the audit's rows carry it (audit.runner)
            extra.update(n_images=r.n_images, status=r.state, notes=list(r.notes))
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
