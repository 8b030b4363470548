"""A sharded filter as a step of the runner (:mod:`capaudit.runner`): its plan, its two passes
and its merge.

Plan: the evidence, resolved as ``filter run SET`` resolves it, written once in columnar form
into the work folder; the keys of the shards' markers (:func:`.plan.run_key`); one task per
shard; DST checked (nothing capaudit did not write is replaced). Passes: the coverage pass
(:mod:`.coverage`), whose sum is held to the filter's coverage rule before any cleaned shard is
written, then the filter pass (:mod:`.task`) over the shards the first did not fail. Merge: the
run's summary, the exact sum of the shards' (:mod:`.merge`), written beside DST with the
resolved configuration, seed and versions, and recorded in the store under DST's path.
"""

from __future__ import annotations

from typing import Any

from capaudit.core.storage import paths
from capaudit.core.storage.urls import shown_url
from capaudit.filters.shards.coverage import coverage_shard
from capaudit.filters.shards.task import filter_shard
from capaudit.io import shard_files as files
from capaudit.runner.step import Step

__all__ = ["FilterStep"]


class FilterStep(Step):
    """``filter run --shards`` of one filter (``cfg["filter"]``)."""

    worker_mb = 4.0         # a filter streams its shards: 4 MB of shards per worker
    passes = (coverage_shard, filter_shard)

    def __init__(self, store, run_id: int, cfg: dict, seed: int, shards: list[tuple], out: str,
                 given_out: str, work: str, opts: dict, kind: str, worker_opts: dict):
        self.store, self.run_id, self.cfg, self.seed = store, run_id, cfg, seed
        self.shards, self.out, self.opts, self.kind = shards, out, opts, kind
        self.worker_opts, self.work_dir = worker_opts, work
        self.sizes = [s[2] for s in shards]
        self.shared = ((work, "work folder", "--work-dir"), (given_out, "output folder", "--out"))

    def plan(self, root: str, workers: int) -> list[dict]:
        from capaudit.filters.base import FILTERS
        from capaudit.filters.shards import plan

        name, cfg = self.cfg["filter"], self.cfg
        self.root, self.evidence = root, _evidence(self.store, self.kind, self.opts, root)
        self.key, self.ids_key = plan.run_key(name, FILTERS.version(name), self.worker_opts,
                                              self.evidence, cfg["reader"], cfg["format"])
        tasks = plan.make_tasks(self.shards, self.out, root, self.key, self.ids_key, {
            "filter": name, "options": self.worker_opts, "evidence": self.evidence,
            "reader": cfg["reader"], "fmt": cfg["format"]})
        plan.check_out(self.out, tasks, [s[0] for s in self.shards])
        for folder, names in ((self.out, [t["rel"] for t in tasks]),
                              (plan.log_dir(self.out), [t["log_rel"] for t in tasks])):
            paths.clean_tmp(folder, names)
        return tasks

    def between(self, tasks: list[dict], results: list[dict[int, dict]]) -> list[dict]:
        """The coverage pass's sum held to the filter's rule; the shards it read go on."""
        from capaudit.core.storage.urls import name_of
        from capaudit.filters.shards.coverage import check_coverage

        self.ok = ok = super().between(tasks, results)
        self.cov = check_coverage(name_of(self.out) or self.out,
                                  [results[0][t["index"]] for t in ok], self.kind,
                                  self.evidence["namespace"], float(self.opts["min_coverage"]),
                                  bool(self.opts["allow_partial"]))
        return ok

    def merge(self, tasks: list[dict], results: list[dict[int, dict]]) -> tuple[dict, list, Any]:
        """The run's summary (sum of the shards'), its files beside DST, its rows in the store."""
        second = {self.ok[i]["index"]: summary for i, summary in results[1].items()}
        return _finish(self.store, self.run_id, self.cfg, self.seed, self.out, tasks,
                       results[0], second, self.cov, self.evidence)


def _evidence(store, kind: str, opts: dict, folder: str) -> dict:
    """The run's evidence, resolved as ``filter run SET`` resolves it, written in columnar
    form into the work folder: ``{kind, source, namespace, path, sha256}``. A file is read in
    a child process (its parse's transient memory stays out of the driver); a source stored
    with ``annotations add`` is read here, from the store's tables."""
    from capaudit.audit.annotation_coverage import source_namespace
    from capaudit.filters.evidence import resolve_evidence
    from capaudit.filters.shards.evidence_file import convert_in_child, write_evidence

    ref = {"chair-gt": opts.get("chair_gt"), "instances": opts.get("instances"),
           "detector": opts.get("detections")}.get(kind)
    if ref is not None and paths.is_file(str(ref)):
        path, digest, source = convert_in_child(kind, str(ref), folder)
    else:
        evidence, source = resolve_evidence(kind, ref, store)
        path, digest = write_evidence(evidence, folder)
        del evidence
    return {"kind": kind, "source": source, "path": path, "sha256": digest,
            "namespace": source_namespace(store, source.removeprefix("file:"))}


def _finish(store, run_id: int, cfg: dict, seed: int, out: str, tasks: list[dict],
            first: dict, second: dict, cov, evidence: dict) -> tuple[dict, list, Any]:
    """The run's summary (sum of the shards'), its files beside DST, its rows in the store."""
    import dataclasses
    import json

    from capaudit.core.config import provenance
    from capaudit.filters.shards import plan
    from capaudit.filters.shards.merge import merge_summaries
    from capaudit.store import filter_log as _log

    shard_rows = [second.get(t["index"]) or first[t["index"]] for t in tasks]
    done = [s for s in shard_rows if s["status"] in ("done", "resumed")]
    summary = merge_summaries(done)
    summary["shards"] = {"total": len(tasks), "filtered": sum(s["status"] == "done" for s in
                                                               shard_rows),
                         "resumed": sum(s["status"] == "resumed" for s in shard_rows),
                         "failed": [{"shard": s["shard"], "error": s["error"]}
                                    for s in shard_rows if s["status"] == "failed"]}
    summary["coverage_guard"] = {**dataclasses.asdict(cov), "line": cov.line()}
    kept = [t for t in tasks if (second.get(t["index"]) or {}).get("status") in
            ("done", "resumed")]
    plan.write_manifest(out, [t["rel"] for t in kept])
    plan.write_manifest(plan.log_dir(out), [t["log_rel"] for t in kept])
    plan.drop_claims(out, kept)
    shown = shown_url(out)     # what is stored and written: no credentials
    record = {"summary": summary, "run_id": run_id, "log_dir": plan.log_dir(shown),
              "shards": [{k: s.get(k) for k in ("shard", "status", "captions_in",
                                                "captions_out", "output", "log", "error")}
                         for s in shard_rows],
              "evidence": {k: evidence[k] for k in ("kind", "source", "sha256", "namespace")},
              "provenance": provenance(cfg, seed)}
    files.write_json(plan.summary_path(out), record)
    _log.ensure_tables(store.con)
    with store.transaction() as con:
        _log.insert_run(con, shown, [cfg["shards"], cfg["filter"], cfg["version"], run_id,
                                     json.dumps({**cfg, "log_dir": plan.log_dir(shown),
                                                 "summary_file": plan.summary_path(shown)},
                                              default=str), json.dumps(summary, default=str)])
    return summary, shard_rows, cov
