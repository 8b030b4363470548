"""``audit run``: resolve targets, audit each, store metrics and per-caption details.

A target is a registered set name or a caption file (format sniffed; it is
read, not registered, and named by its file stem). Results go to DuckDB in
one transaction per command together with the run row (command, resolved
config, seed, versions), so an interrupted audit stores nothing partial.

``run_audit`` streams every target (:func:`capaudit.audit.engine.audit_stream`):
a registered set is read in batches from the store, a file in the reader's
batches, and each chunk's per-caption details are inserted into
``caption_details`` inside the command's transaction as they come, so no
details table is held in Python. DuckDB writes them to the file in row
groups as they come but kept the written blocks in its buffer pool (about 150
bytes per caption, #24): the transaction runs under
:meth:`~capaudit.store.db.Store.bounded_cache`, so they are evicted and the
peak memory stays flat in the number of captions (``benchmarks/bench_memory.py``;
``details: false`` in the config leaves the details out). The returned results therefore
carry no details table of their own (query ``caption_details`` by run id);
without a store no details are built at all.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from capaudit.audit import annotation_coverage as coverage
from capaudit.audit import circular
from capaudit.audit.config import AuditConfig
from capaudit.audit.result_status import assign_status, mark_by_construction
from capaudit.io.targets import (StreamTarget, Target, load_target, own_scores,
                               resolve_target)
from capaudit.errors import InputError

__all__ = ["AuditConfig", "DEFAULTS", "run_audit", "metric_names", "audit_target",
           "audit_stream_target", "store_metrics", "results_json", "Target",
           "StreamTarget", "load_target", "resolve_target", "mark_circular_values"]

DEFAULTS: dict[str, Any] = AuditConfig.defaults()  # every setting with its default

STREAM_CHUNK = 50_000         # captions analysed at a time by ``run_audit``


def metric_names(cfg: Mapping[str, Any]) -> list[str] | None:
    """``cfg['metrics']`` (a list or a comma string) checked against the registry."""
    metrics = cfg.get("metrics")
    if isinstance(metrics, str):
        metrics = [m.strip() for m in metrics.split(",") if m.strip()]
    if metrics:
        from capaudit.metrics.stream import check_streams
        check_streams(metrics)  # did-you-mean on typos; LIC only through --lic
    return metrics


def audit_stream_target(target: StreamTarget, annotations, cfg: Mapping[str, Any],
                        details_sink=None, on_progress=None):
    """Audit a target in chunks (:func:`capaudit.audit.engine.audit_stream`)."""
    from capaudit.audit.engine import audit_stream

    return audit_stream(target.rows(), annotations, metrics=metric_names(cfg), mode=cfg["mode"],
                        n_boot=cfg["n_boot"], seed=cfg["seed"], workers=cfg["workers"],
                        min_images=cfg["min_images"], corrected=cfg["corrected"],
                        chunk_size=int(cfg.get("chunk_size") or STREAM_CHUNK),
                        details_sink=details_sink, on_progress=on_progress, config=cfg)


def audit_target(target: Target, annotations, cfg: Mapping[str, Any]):
    from capaudit.audit.engine import audit_captions

    metrics = metric_names(cfg)
    return audit_captions(target.image_ids, target.captions, annotations, metrics=metrics,
                          mode=cfg["mode"], n_boot=cfg["n_boot"], seed=cfg["seed"],
                          workers=cfg["workers"], min_images=cfg["min_images"],
                          corrected=cfg["corrected"], config=cfg)


def store_metrics(store, run_id: int, name: str, result) -> None:
    for metric, r in result.results.items():
        extra = dict(r.extra)
        if r.skipped:
            extra["skipped"] = r.skipped
        # what travels with the value (metrics.present): in the store as in every view
        extra.update(n_images=r.n_images, status=r.state, notes=list(r.notes),
                     coverage=dict(r.coverage))
        store.write_metric(run_id, name, metric, r.value, r.n, r.ci_low, r.ci_high, "all", extra)


def mark_circular_values(store, t: StreamTarget, results, annotations, cfg) -> None:
    """The values scored with the evidence a filter of the set's lineage used: ``circular``,
    with the independent score beside them (:mod:`capaudit.audit.circular`)."""
    found = circular.find_circular(store, t, annotations)
    if found:
        def score(other, metrics, name=None, only=None):
            target = t if name is None else resolve_target(store, name)
            if only is not None:   # the images ``other`` covers: none counted as empty
                rows = target.rows
                target = dataclasses.replace(target, rows=lambda: (
                    (i, c) for i, c in rows() if i in only))
            return audit_stream_target(target, other,
                                       dataclasses.replace(cfg, metrics=metrics)).results

        circular.mark_circular(store, results, found, annotations, cfg, score)


def check_coverage(store, resolved: list[StreamTarget], annotations,
                   cfg: Mapping[str, Any]) -> dict:
    """Coverage of each target (:mod:`capaudit.audit.annotation_coverage`), before any metric; stops
    with one line when a join is not believable; hides the ids that may not join."""
    metrics = metric_names(cfg)
    return {t.name: coverage.guard_target(store, t, annotations, metrics, cfg) for t in resolved}


def _bounded(resolved: list[StreamTarget], cfg) -> bool:
    """Whether the audit's transaction may run in :meth:`~capaudit.store.db.Store.bounded_cache`:
    caption files only (a registered set is read from the store meanwhile: its ordered scan
    ran Out of Memory at 810k captions) and the default metrics only (a feature metric's
    cache writes keep a primary-key index in memory that a 32 MB pool cannot hold)."""
    from capaudit.metrics import default_metrics

    core = set(default_metrics())
    return (all(t.batches is not None for t in resolved)
            and set(metric_names(cfg) or core) <= core)


def _kinds_read(cfg) -> list[str] | None:
    """The annotation kinds the asked metrics need (``None``: every kind, for the default
    metrics and for LIC, which reads them outside the metric registry)."""
    asked = metric_names(cfg)
    if not asked or cfg.get("lic"):
        return None
    from capaudit.metrics.spec import annotation_kinds

    return annotation_kinds(asked)


def _kinds_for(store, targets, cfg, only_needed: bool) -> list[str] | None:
    """The annotation kinds to read (:func:`_kinds_read` when ``only_needed``), and the
    instances beside a CHAIR audit of a filtered set: its independent score reads them."""
    kinds = _kinds_read(cfg) if only_needed else None
    if kinds is not None and "chair_gt" in kinds and "instances" not in kinds and any(
            circular.lineage_evidence(store, t if isinstance(t, str) else t.spec)
            for t in targets if store is not None):
        kinds = [*kinds, "instances"]
    return kinds


def run_audit(store, targets: Sequence[str | StreamTarget], cfg: AuditConfig | Mapping | None,
              on_target=None, on_progress=None, only_needed: bool = False,
              annotations=None) -> dict[str, Any]:
    """Audit every target; returns {name: AuditResult}; stores all in one transaction.

    A target is a set name, a caption file, or an already resolved
    :class:`StreamTarget` (``audit compare`` passes targets restricted to the
    images the sets share).

    ``on_target(target)`` is called when a target starts (``target.n`` is its
    caption count when known beforehand, else ``None``) and
    ``on_progress(target, n)`` after each chunk of ``n`` captions.

    Targets are streamed (see the module docstring): per-caption details go
    straight into ``caption_details`` inside the transaction, chunk by chunk.
    LIC (``cfg["lic"]``) needs the captions of each image and loads them first.
    ``cfg``: an :class:`AuditConfig` or a mapping of its settings. ``only_needed``: read only
    the annotation kinds the asked metrics need (``audit run``; ``audit compare`` reads all:
    its gaps and report use the returned annotations too). ``annotations``: all kinds, read
    already (``audit compare`` read them to judge whether unassigned ids may join).
    """
    from capaudit.core.config import current_command, package_versions
    from capaudit.io.annotation_store import resolve_annotations
    from capaudit.store.details import write_details

    cfg = AuditConfig.of(cfg)
    if annotations is None:
        annotations = resolve_annotations(store, cfg.get("instances"), cfg.get("chair_gt"),
                                          cfg.get("demographics"),
                                          kinds=_kinds_for(store, targets, cfg, only_needed))
    from capaudit.metrics.features.inputs import prepare

    prepare(store, cfg)  # LOTUS metrics: reference set, CLIP model (bad ones fail here)
    resolved = [t if isinstance(t, StreamTarget) else resolve_target(store, t) for t in targets]
    names = [t.name for t in resolved]
    if len(set(names)) != len(names):
        raise InputError(f"two targets share the name {names}", fix="register them under "
                         "distinct set names")
    metric_names(cfg)  # typos fail before any work
    covs = check_coverage(store, resolved, annotations, cfg)
    lic: dict[str, dict] = {}
    if cfg.get("lic"):  # before the transaction: its cache writes are transactions of their own
        from capaudit.audit.lic.results import lic_results

        for t in resolved:
            lic[t.name] = lic_results(store, load_target(store, t.spec), annotations, cfg)
    results: dict[str, Any] = {}

    def audit_one(t: StreamTarget, sink) -> None:
        if on_target:
            on_target(t)
        step = (lambda n, t=t: on_progress(t, n)) if on_progress else None
        cov = covs[t.name]
        res = audit_stream_target(t, coverage.restrict(annotations, cov), cfg, sink, step)
        t.n = res.meta["n_captions"] if t.n is None else t.n
        res.results.update(lic.get(t.name, {}))
        coverage.mark_skipped(res.results, cov)
        assign_status(res.results, cov, cfg)
        mark_by_construction(store, t, res.results, cov)
        mark_circular_values(store, t, res.results, coverage.restrict(annotations, cov), cfg)
        res.meta.update(coverage={**dataclasses.asdict(cov), "line": cov.line()}, source=t.source,
                        own_scores=own_scores(t))   # a CHAIR output's: report/file_scores.py
        results[t.name] = res

    if store is not None:
        with store.bulk_transaction(bounded=_bounded(resolved, cfg)):
            run_id = store.start_run(current_command(),
                                     {**cfg, "annotation_sources": annotations.sources},
                                     cfg["seed"], package_versions())
            for t in resolved:
                audit_one(t, (lambda tbl, name=t.name: write_details(store, run_id, name, tbl))
                          if cfg.get("details", True) else None)
                store_metrics(store, run_id, t.name, results[t.name])
            store.finish_run(run_id, "ok")
        results["_run_id"] = run_id
    else:
        for t in resolved:
            audit_one(t, None)
    results["_annotations"] = annotations
    return results


def results_json(results: dict[str, Any]) -> dict:
    names = [n for n in results if not n.startswith("_")]
    return {"sets": {n: results[n].to_dict() for n in names},
            "coverage": {n: results[n].meta.get("coverage") for n in names}}

