"""``filter run --shards``: clean a corpus shard by shard, on local processes or Ray, exactly.

The driver lists the shards once, writes what the workers read once (the filter's step,
:mod:`.steps`: evidence, labels), and runs its passes of shard tasks through an executor
(:mod:`capaudit.executors`): a filter's first pass where it has one (the hallucination
filter's coverage pass, :mod:`.coverage`, held to its coverage rule; gender-balance's count,
from which the corpus's decision is taken) before any cleaned shard is written, then the
filter pass (:mod:`.task`), each task writing its cleaned shard, its log and its marker and
returning its summary. The run's summary is the exact sum of the shards'
(:mod:`.merge`), written beside DST with the resolved configuration, seed and versions, and
recorded in the store as a run (``runs``, and ``filter_runs`` under DST's path, where
``capaudit filter log DST`` finds the shards' logs). A failed shard stops the run with one
line naming it (the shards done keep their markers), or with ``skip_bad`` is left out and
listed. A killed run resumes with the shards that have no matching marker.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Mapping

from capaudit.errors import InputError
from capaudit.core.storage import paths
from capaudit.core.storage.urls import join, shown_url
from capaudit.io import shard_files as files
from capaudit.filters.shards.steps import SHARDED_FILTERS, shard_step

__all__ = ["run_sharded_filter", "SHARDED_FILTERS"]

WORKER_MB_ENV, DEFAULT_WORKER_MB = "CAPAUDIT_WORKER_MB", 4


def _workers(executor: str, asked: int, shards: list[tuple]) -> int:
    """Local workers worth starting (idle cores, one per ``CAPAUDIT_WORKER_MB`` of shards,
    no more than the shards, their sizes as listed); a Ray cluster's cores are its own."""
    from capaudit.core.config import worker_count
    from capaudit.core.ranges import env_number

    per_mb = env_number(WORKER_MB_ENV, DEFAULT_WORKER_MB, 0, 1e6)
    if executor != "local" or per_mb == 0:
        return max(1, min(asked, len(shards)))
    size = sum(s[2] or 0 for s in shards)
    return min(len(shards) or 1, worker_count(asked, size, int(per_mb * 2 ** 20)))


def _executor(executor: str, workers: int, address: str | None, work: str, out: str):
    """The executor of both passes (local workers started once, for both); on a Ray cluster
    of several nodes (no shared disk) the work folder and DST must be URLs every node reaches,
    else one line before any work."""
    from capaudit.executors import get_executor
    from capaudit.executors.base import require_shared

    ex = get_executor(executor, workers=workers, address=address, keep_pool=True)
    try:
        require_shared(ex, work)
        require_shared(ex, out, what="output folder", flag="--out")
    except BaseException:
        ex.close()
        raise
    return ex


def _run_pass(fn, tasks: list[dict], ex, skip_bad: bool,
              on_shard: Callable | None) -> dict[int, dict]:
    done: dict[int, dict] = {}
    for task, result in ex.map_unordered(fn, tasks):
        done[task["index"]] = result
        if on_shard:
            on_shard(result)
        if result["status"] == "failed" and not skip_bad:
            fix = result.get("fix")
            raise InputError(f"shard {result['shard']} failed: {result['error']}",
                             fix=(f"{fix}; or " if fix else "") + "pass --skip-bad-shards "
                                 "to leave it out and list it")
    return done


def _options(filter_name: str, given: Mapping, config, overrides, seed: int) -> tuple[dict, str | None]:
    from capaudit.filters.base import FILTERS
    from capaudit.filters.options import filter_options

    if filter_name not in SHARDED_FILTERS:
        raise InputError(f"filter run --shards runs {', '.join(SHARDED_FILTERS)}, not "
                         f"'{filter_name}'", fix="register the captions with sets add and run "
                         "filter run SET (a filter without a shard step in "
                         "filters/shards/steps.py runs on a registered set)")
    given = dict(given)
    if "seed" in FILTERS.get(filter_name).defaults:
        given["seed"] = seed
    opts = filter_options(filter_name, given, config, overrides)
    kind = getattr(FILTERS.get(filter_name)(**opts), "kind", None)  # option errors first
    return opts, kind


def run_sharded_filter(store, spec: str, out: str, filter_name: str, given: Mapping[str, Any],
                       *, config=None, seed: int = 0, overrides=None, executor: str = "local",
                       workers: int = 1, address: str | None = None, work_dir: str | None = None,
                       skip_bad: bool = False, fmt: str | None = None,
                       reader: Mapping | None = None, keep_work: bool = False,
                       on_start: Callable | None = None, on_shard: Callable | None = None):
    """Clean the shards of ``spec`` into the folder ``out``; returns ``(summary, shard
    summaries in shard order, the first pass's guard or None)``. The filter's own part is its
    step (:mod:`.steps`), found by name."""
    from capaudit.core.runs import recorded_run
    from capaudit.filters.base import FILTERS
    from capaudit.filters.shards import plan
    from capaudit.filters.shards.task import filter_shard
    opts, kind = _options(filter_name, given, config, overrides, seed)
    step = shard_step(filter_name).Driver(filter_name, opts, kind)
    given_out, out = str(out), paths.absolute(str(out))
    shards = files.list_shard_entries(str(spec))
    reader = {k: v for k, v in dict(reader or {}).items() if v is not None}
    work = str(work_dir or files.work_folder(str(store.path), _name(out)))
    up_to = os.path.dirname(work) if work_dir is None else \
        None if paths.path_kind(work) != "missing" else work
    worker_opts = step.worker_options()
    cfg = {"command": "filter run --shards", "shards": shown_url(str(spec)),
           "out": shown_url(out), "filter": filter_name,
           "version": FILTERS.version(filter_name), "options": opts, "format": fmt,
           "reader": reader, "executor": executor}
    n = _workers(executor, workers, shards)
    ex = _executor(executor, n, address, work, given_out)
    with _closing(ex), recorded_run(store, cfg, seed) as run_id, files.work_lock(work) as root:
        evidence = step.prepare(store, root)
        key, ids_key = plan.run_key(filter_name, FILTERS.version(filter_name), worker_opts,
                                    evidence, reader, fmt)
        tasks = plan.make_tasks(shards, out, str(root), key, ids_key, {
            "filter": filter_name, "options": worker_opts, "evidence": evidence,
            "reader": reader, "fmt": fmt, **step.task_fields()})
        plan.check_out(out, tasks, [s[0] for s in shards])
        for folder, names in ((out, [t["rel"] for t in tasks]),
                              (plan.log_dir(out), [t["log_rel"] for t in tasks])):
            paths.clean_tmp(folder, names)
        if on_start:
            on_start(len(tasks), n, 2 if step.first_pass else 1)
        first, ok, guard, written = {}, tasks, None, []
        if step.first_pass:      # the whole corpus counted before any output is written
            first = _run_pass(step.first_pass, tasks, ex, skip_bad, on_shard)
            ok = [t for t in tasks if first[t["index"]]["status"] != "failed"]
            guard, fields, written = step.after_first(_name(out), [first[t["index"]]
                                                                   for t in ok], str(root))
            for t in ok:     # what the first pass decided keys the filter pass
                t.update(fields, cfg_hash=plan.decided_key(t["cfg_hash"], fields))
        second = _run_pass(filter_shard, ok, ex, skip_bad, on_shard)
        results = _finish(store, run_id, cfg, seed, out, tasks, first, second, guard, evidence)
    if not keep_work:
        files.remove_work_folder(join(root, "coverage-" + ids_key))
        for path in [evidence["path"], *written]:
            if path:
                paths.remove_file(path)
        files.remove_work_folder(join(root, key), up_to=up_to)
    return results


def _name(out: str) -> str:
    """DST's last part (a URL's too): the run's name in lines and its default work folder."""
    from capaudit.core.storage.urls import name_of

    return name_of(out) or out


@contextlib.contextmanager
def _closing(ex):
    try:
        yield ex
    finally:
        ex.close()


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
    if cov is not None:
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
