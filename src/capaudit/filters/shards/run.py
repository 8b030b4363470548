"""``filter run --shards``: the filter's options resolved, its step (:mod:`.step`) handed to
the one runner (:func:`capaudit.runner.run.run_step`) inside a run recorded in the store, and
the work folder of a successful run removed unless ``keep_work``."""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

from capaudit.errors import InputError
from capaudit.core.storage import paths
from capaudit.core.storage.urls import join, shown_url
from capaudit.io import shard_files as files

__all__ = ["run_sharded_filter", "SHARDED_FILTERS"]

SHARDED_FILTERS = ("hallucination",)


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
    from capaudit.core.storage.work_folder import default_work_dir, remove_work
    from capaudit.filters.base import FILTERS
    from capaudit.filters.shards.step import FilterStep
    from capaudit.runner.run import run_step
    from capaudit.runner.step import RunOptions

    opts, kind = _options(filter_name, given, config, overrides, seed)
    given_out, out = str(out), paths.absolute(str(out))
    shards = files.list_shard_entries(str(spec))
    reader = {k: v for k, v in dict(reader or {}).items() if v is not None}
    work = str(work_dir or default_work_dir(str(store.path), _name(out), "filter-work"))
    up_to = os.path.dirname(work) if work_dir is None else \
        None if paths.path_kind(work) != "missing" else work
    worker_opts = {**opts, "evidence": kind, "chair_gt": None, "instances": None,
                   "detections": None}
    if filter_name == "hallucination":   # reference texts: a local file each worker reads
        from capaudit.filters.reference_evidence import shard_references

        worker_opts["references"] = shard_references(opts, kind)
    cfg = {"command": "filter run --shards", "shards": shown_url(str(spec)),
           "out": shown_url(out), "filter": filter_name,
           "version": FILTERS.version(filter_name), "options": opts, "format": fmt,
           "reader": reader, "executor": executor}
    with recorded_run(store, cfg, seed) as run_id:
        step = FilterStep(store, run_id, cfg, seed, shards, out, given_out, work, opts, kind,
                          worker_opts)
        results = run_step(step, RunOptions(executor, workers, address, skip_bad, on_shard,
                                            on_start))
    if not keep_work:
        remove_work(join(step.root, "coverage-" + step.ids_key))
        paths.remove_file(step.evidence["path"])
        remove_work(join(step.root, step.key), up_to=up_to)
    return results


def _name(out: str) -> str:
    """DST's last part (a URL's too): the run's name in lines and its default work folder."""
    from capaudit.core.storage.urls import name_of

    return name_of(out) or out
