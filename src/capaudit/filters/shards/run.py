"""``filter run --shards``: clean a corpus shard by shard, on local processes or Ray, exactly.

A sharded filter is a step of the one runner (:func:`capaudit.runner.run.run_step`):
:class:`FilterStep` lists the shards once, writes what the workers read once (the filter's
parts, found by name: :mod:`.steps`), runs the filter's first pass
where it has one (the coverage pass, :mod:`.coverage`, whose sum is held to the filter's
coverage rule before any cleaned shard is written), then the filter pass (:mod:`.task`), each
task writing its cleaned shard, its log and its marker and returning its summary. The run's
summary is the exact sum of the shards' (:mod:`.merge`), written beside DST with the resolved
configuration, seed and versions, and recorded in the store as a run (``runs``, and
``filter_runs`` under DST's path, where ``capaudit filter log DST`` finds the shards' logs).
A failed shard stops the run with one line naming it (the shards done keep their markers),
or with ``skip_bad`` is left out and listed. A killed run resumes with the shards that have
no matching marker.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

from capaudit.errors import InputError
from capaudit.core.storage import paths
from capaudit.core.storage.urls import is_url, join, name_of, shown_url
from capaudit.io import shard_files as files
from capaudit.filters.shards import plan
from capaudit.filters.shards.steps import SHARDED_FILTERS, shard_step, warm_worker
from capaudit.runner.step import RunOptions, Step

__all__ = ["run_sharded_filter", "SHARDED_FILTERS"]


def _options(filter_name: str, given: Mapping, config, overrides, seed: int) -> tuple[dict, str | None]:
    from capaudit.filters.options import filter_options, make_filter

    if filter_name not in SHARDED_FILTERS:
        raise InputError(f"filter run --shards runs {', '.join(SHARDED_FILTERS)}, not "
                         f"'{filter_name}'", fix="register the captions with sets add and run "
                         "filter run SET (a filter without a shard step in "
                         "filters/shards/steps.py runs on a registered set)")
    opts = filter_options(filter_name, given, config, overrides, seed)
    kind = getattr(make_filter(filter_name, opts), "kind", None)  # option errors first
    return opts, kind


def run_sharded_filter(store, spec: str, out: str, filter_name: str, given: Mapping[str, Any],
                       *, config=None, seed: int = 0, overrides=None, executor: str = "local",
                       workers: int = 1, address: str | None = None, work_dir: str | None = None,
                       skip_bad: bool = False, fmt: str | None = None,
                       reader: Mapping | None = None, keep_work: bool = False,
                       on_start: Callable | None = None, on_shard: Callable | None = None):
    """Clean the shards of ``spec`` into the folder ``out``; returns ``(summary, the first
    pass's guard or None, the spec as it may be shown)``. The filter's own part is its step
    (:mod:`.steps`), found by name."""
    from capaudit.core.runs import recorded_run
    from capaudit.core.storage.work_folder import default_work_dir, remove_work
    from capaudit.filters.base import FILTERS
    from capaudit.runner.run import run_step

    opts, kind = _options(filter_name, given, config, overrides, seed)
    parts = shard_step(filter_name).Driver(filter_name, opts, kind)
    given_out, out = str(out), paths.absolute(str(out))
    shards, spec = files.list_shard_entries(spec)
    reader = {k: v for k, v in dict(reader or {}).items() if v is not None}
    work = str(work_dir or default_work_dir(str(store.path), _name(out), "filter-work"))
    up_to = os.path.dirname(work) if work_dir is None else \
        None if paths.path_kind(work) != "missing" else work
    cfg = {"command": "filter run --shards", "shards": spec.shown,
           "out": shown_url(out), "filter": filter_name,
           "version": FILTERS.version(filter_name), "options": opts, "format": fmt,
           "reader": reader, "executor": executor,
           **({"chosen": opts.chosen} if opts.chosen else {})}
    with recorded_run(store, cfg, seed) as run_id:
        step = FilterStep(store, run_id, cfg, seed, shards, (out, given_out), work, parts)
        summary, cov = run_step(step, RunOptions(executor, workers, address, skip_bad,
                                                 on_shard, on_start))
    if not keep_work:
        remove_work(join(step.root, "coverage-" + step.ids_key))
        for path in [step.evidence["path"], *step.written]:
            if path:
                paths.remove_file(path)
        remove_work(join(step.root, step.key), up_to=up_to)
    return summary, cov, spec.shown


class FilterStep(Step):
    """``filter run --shards`` of any filter, its own parts handed in (``parts``: what its
    workers read, their options, its first pass and what follows from it)."""

    worker_mb = 4.0         # a filter streams its shards: 4 MB of shards per worker

    def __init__(self, store, run_id: int, cfg: dict, seed: int, shards: list[tuple],
                 outs: tuple[str, str], work: str, parts):
        from capaudit.filters.shards.task import filter_shard

        self.store, self.run_id, self.cfg, self.seed, self.shards = store, run_id, cfg, seed, shards
        (self.out, given_out), self.work_dir, self.parts = outs, work, parts
        self.sizes = [s[2] for s in shards]
        self.shared = ((work, "work folder", "--work-dir"), (given_out, "output folder", "--out"))
        self.passes = (parts.first_pass, filter_shard) if parts.first_pass else (filter_shard,)
        self.worker_opts, self.guard, self.written = parts.worker_options(), None, []
        self.warm_up = fresh_warm_up(work, cfg["filter"], self.worker_opts)

    def plan(self, root: str, workers: int) -> list[dict]:
        """What the workers read, written once; the markers' keys; a task per shard; DST
        checked (nothing capaudit did not write is replaced)."""
        from capaudit.filters.base import FILTERS

        name, cfg = self.cfg["filter"], self.cfg
        self.root, self.evidence = root, self.parts.prepare(self.store, root)
        self.key, self.ids_key = plan.run_key(name, FILTERS.version(name), self.worker_opts,
                                              self.evidence, cfg["reader"], cfg["format"])
        self.ok = tasks = plan.make_tasks(self.shards, self.out, root, self.key, self.ids_key, {
            "filter": name, "options": self.worker_opts, "evidence": self.evidence,
            "reader": cfg["reader"], "fmt": cfg["format"], **self.parts.task_fields()})
        plan.check_out(self.out, tasks, [s[0] for s in self.shards])
        for folder, names in ((self.out, [t["rel"] for t in tasks]),
                              (plan.log_dir(self.out), [t["log_rel"] for t in tasks])):
            paths.clean_tmp(folder, names)
        return tasks

    def between(self, tasks: list[dict], results: list[dict[int, dict]]) -> list[dict]:
        """The first pass's counts of the shards it read held to the filter's rule (or turned
        into what the filter pass's tasks carry); those shards go on."""
        self.ok = super().between(tasks, results)
        self.guard, fields, self.written = self.parts.after_first(
            _name(self.out), [results[0][t["index"]] for t in self.ok], self.root)
        for t in self.ok:     # what the first pass decided keys the filter pass
            t.update(fields, cfg_hash=plan.decided_key(t["cfg_hash"], fields))
        return self.ok

    def merge(self, tasks: list[dict], results: list[dict[int, dict]]) -> tuple[dict, Any]:
        first = results[0] if len(results) > 1 else {}
        second = {self.ok[i]["index"]: summary for i, summary in results[-1].items()}
        return _finish(self.store, self.run_id, self.cfg, self.seed, self.out, tasks, first,
                       second, self.guard, self.evidence)


def fresh_warm_up(work: str, name: str, worker_opts: dict) -> tuple | None:
    """The workers' warm-up (:attr:`~capaudit.runner.step.Step.warm_up`: the filter's parser
    loaded while the driver plans) for a run that starts afresh; None where an earlier run
    left its local work folder: a rerun, whose shards may all be done already, and whose
    workers would then load a parser no task asks for (+0.6 s on a finished rerun)."""
    if not is_url(work) and os.path.exists(work):
        return None
    return (warm_worker, (name, worker_opts))


def _name(out: str) -> str:
    """DST's last part (a URL's too): the run's name in lines and its default work folder."""
    return name_of(out) or out


def _finish(store, run_id: int, cfg: dict, seed: int, out: str, tasks: list[dict],
            first: dict, second: dict, cov, evidence: dict) -> tuple[dict, Any]:
    """The run's summary (sum of the shards'), its files beside DST, its rows in the store."""
    import dataclasses
    import json

    from capaudit.core.config import provenance
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
    if cfg.get("chosen"):   # as a set's run: why an option holds a value no one gave
        summary["chosen"] = cfg["chosen"]
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
    return summary, cov
