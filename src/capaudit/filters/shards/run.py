"""``filter run --shards``: clean a corpus shard by shard, on local processes or Ray, exactly.

The driver lists the shards once, writes the evidence once in columnar form, and runs two
passes of shard tasks through an executor (:mod:`capaudit.executors`): the coverage pass
(:mod:`.coverage`), whose sum is held to the filter's coverage rule before any cleaned shard
is written, then the filter pass (:mod:`.task`), each task writing its cleaned shard, its log
and its marker and returning its summary. The run's summary is the exact sum of the shards'
(:mod:`.merge`), written beside DST with the resolved configuration, seed and versions, and
recorded in the store as a run (``runs``, and ``filter_runs`` under DST's path, where
``capaudit filter log DST`` finds the shards' logs). A failed shard stops the run with one
line naming it (the shards done keep their markers), or with ``skip_bad`` is left out and
listed. A killed run resumes with the shards that have no matching marker.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

from capaudit.errors import InputError
from capaudit.io import shard_files as files

__all__ = ["run_sharded_filter", "SHARDED_FILTERS"]

SHARDED_FILTERS = ("hallucination",)
WORKER_MB_ENV, DEFAULT_WORKER_MB = "CAPAUDIT_WORKER_MB", 4


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
    if ref is not None and files.is_file(str(ref)):
        path, digest, source = convert_in_child(kind, str(ref), folder)
    else:
        evidence, source = resolve_evidence(kind, ref, store)
        path, digest = write_evidence(evidence, folder)
        del evidence
    return {"kind": kind, "source": source, "path": path, "sha256": digest,
            "namespace": source_namespace(store, source.removeprefix("file:"))}


def _workers(executor: str, asked: int, tasks: list[dict]) -> int:
    """Local workers worth starting (idle cores, one per ``CAPAUDIT_WORKER_MB`` of shards,
    no more than the shards); a Ray cluster's cores are its own."""
    from capaudit.core.config import worker_count
    from capaudit.core.ranges import env_number

    per_mb = env_number(WORKER_MB_ENV, DEFAULT_WORKER_MB, 0, 1e6)
    if executor != "local" or per_mb == 0:
        return max(1, min(asked, len(tasks)))
    size = sum(files.file_size(t["path"]) or 0 for t in tasks)
    return min(len(tasks) or 1, worker_count(asked, size, int(per_mb * 2 ** 20)))


def _run_pass(fn, tasks: list[dict], executor: str, workers: int, address: str | None,
              skip_bad: bool, on_shard: Callable | None) -> dict[int, dict]:
    from capaudit.executors import get_executor

    done: dict[int, dict] = {}
    ex = get_executor(executor, workers=workers, address=address)
    try:
        for task, result in ex.map_unordered(fn, tasks):
            done[task["index"]] = result
            if on_shard:
                on_shard(result)
            if result["status"] == "failed" and not skip_bad:
                fix = result.get("fix")
                raise InputError(f"shard {result['shard']} failed: {result['error']}",
                                 fix=(f"{fix}; or " if fix else "") + "pass --skip-bad-shards "
                                     "to leave it out and list it")
    finally:
        ex.close()
    return done


def _options(filter_name: str, given: Mapping, config, overrides, seed: int) -> tuple[dict, str]:
    from capaudit.filters.base import FILTERS
    from capaudit.filters.options import filter_options

    if filter_name not in SHARDED_FILTERS:
        raise InputError(f"filter run --shards runs {', '.join(SHARDED_FILTERS)}, not "
                         f"'{filter_name}'", fix="register the captions with sets add and run "
                         "filter run SET (a filter that needs the whole set cannot go shard by "
                         "shard)")
    given = dict(given)
    if "seed" in FILTERS.get(filter_name).defaults:
        given["seed"] = seed
    opts = filter_options(filter_name, given, config, overrides)
    kind = FILTERS.get(filter_name)(**opts).kind     # option errors before any work
    return opts, kind


def run_sharded_filter(store, spec: str, out: str, filter_name: str, given: Mapping[str, Any],
                       *, config=None, seed: int = 0, overrides=None, executor: str = "local",
                       workers: int = 1, address: str | None = None, work_dir: str | None = None,
                       skip_bad: bool = False, fmt: str | None = None,
                       reader: Mapping | None = None, keep_work: bool = False,
                       on_start: Callable | None = None, on_shard: Callable | None = None):
    """Clean the shards of ``spec`` into the folder ``out``; returns ``(summary, shard
    summaries in shard order, the coverage)``."""
    from capaudit.core.runs import recorded_run
    from capaudit.filters.base import FILTERS
    from capaudit.filters.shards import plan
    from capaudit.filters.shards.coverage import check_coverage, coverage_shard
    from capaudit.filters.shards.task import filter_shard
    opts, kind = _options(filter_name, given, config, overrides, seed)
    out = files.absolute(str(out))
    shards = files.list_shards(str(spec))
    reader = {k: v for k, v in dict(reader or {}).items() if v is not None}
    work = str(work_dir or files.work_folder(str(store.path), os.path.basename(out)))
    up_to = os.path.dirname(work) if work_dir is None else \
        None if files.path_kind(work) != "missing" else work
    worker_opts = {**opts, "evidence": kind, "chair_gt": None, "instances": None,
                   "detections": None}
    cfg = {"command": "filter run --shards", "shards": str(spec), "out": out,
           "filter": filter_name, "version": FILTERS.version(filter_name), "options": opts,
           "format": fmt, "reader": reader, "executor": executor}
    with recorded_run(store, cfg, seed) as run_id, files.work_lock(work) as root:
        evidence = _evidence(store, kind, opts, root)
        key, ids_key = plan.run_key(filter_name, FILTERS.version(filter_name), worker_opts,
                                    evidence, reader, fmt)
        tasks = plan.make_tasks(shards, out, str(root), key, ids_key, {
            "filter": filter_name, "options": worker_opts, "evidence": evidence,
            "reader": reader, "fmt": fmt})
        plan.check_out(out, tasks, [p for p, _ in shards])
        for folder, names in ((out, [t["rel"] for t in tasks]),
                              (plan.log_dir(out), [t["log_rel"] for t in tasks])):
            files.clean_tmp(folder, names)
        n = _workers(executor, workers, tasks)
        if on_start:
            on_start(len(tasks), n)
        first = _run_pass(coverage_shard, tasks, executor, n, address, skip_bad, on_shard)
        ok = [t for t in tasks if first[t["index"]]["status"] != "failed"]
        cov = check_coverage(os.path.basename(out) or out, [first[t["index"]] for t in ok], kind,
                             evidence["namespace"], float(opts["min_coverage"]),
                             bool(opts["allow_partial"]))
        second = _run_pass(filter_shard, ok, executor, n, address, skip_bad, on_shard)
        results = _finish(store, run_id, cfg, seed, out, tasks, first, second, cov, evidence)
    if not keep_work:
        files.remove_work_folder(os.path.join(root, "coverage-" + ids_key))
        files.remove_file(evidence["path"])
        files.remove_work_folder(os.path.join(root, key), up_to=up_to)
    return results


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
    record = {"summary": summary, "run_id": run_id, "log_dir": plan.log_dir(out),
              "shards": [{k: s.get(k) for k in ("shard", "status", "captions_in",
                                                "captions_out", "output", "log", "error")}
                         for s in shard_rows],
              "evidence": {k: evidence[k] for k in ("kind", "source", "sha256", "namespace")},
              "provenance": provenance(cfg, seed)}
    files.write_json(plan.summary_path(out), record)
    _log.ensure_tables(store.con)
    with store.transaction() as con:
        _log.insert_run(con, out, [cfg["shards"], cfg["filter"], cfg["version"], run_id,
                                   json.dumps({**cfg, "log_dir": plan.log_dir(out),
                                               "summary_file": plan.summary_path(out)},
                                              default=str), json.dumps(summary, default=str)])
    return summary, shard_rows, cov
