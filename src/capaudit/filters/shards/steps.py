"""The filters of ``filter run --shards``: one step file per filter, found by its name.

Why a step per filter: the run (:mod:`.run`: plan, passes, markers, writing, merging) is
the same for every filter; what differs is what a worker must be handed and whether the
filter decides caption by caption or on the whole corpus. A step module holds only that:

* ``Driver(name, opts, kind)``, on the driver: ``worker_options()`` (the options every
  worker's filter is built with, and the run is keyed by), ``prepare(store, root)`` (what
  the workers read, written once into the work folder: ``{kind, source, path, sha256,
  namespace}``), ``task_fields()`` (what else each task carries), ``first_pass`` (a task
  function run on every shard before any output is written, or None) and
  ``after_first(run_name, parts, root)`` (the first pass's results held to a rule or turned
  into a decision: ``(guard, task fields, files written)``; the fields key the filter pass);
* ``build(task)``, in a worker: the task's filter, built once per process and
  configuration (:func:`capaudit.filters.shards.task.worker_filter` caches it);
* ``begin(filt)``, in a worker: before a shard's first caption (counts of its own);
* ``warm(options)``, optional, in a new local worker before its first task: what the
  filter's first shard would load for these options (:func:`warm_worker`).

A filter without an entry here is refused with one line and runs on a registered set.
"""

from __future__ import annotations

import importlib

from capaudit.filters.evidence import EVIDENCE_OPTIONS

__all__ = ["STEPS", "SHARDED_FILTERS", "shard_step", "Driver", "NO_EVIDENCE", "NO_FILES",
           "warm_worker"]

STEPS = {"hallucination": "capaudit.filters.shards.hallucination_step",
         "gender-neutral": "capaudit.filters.shards.gender_neutral_step",
         "gender-balance": "capaudit.filters.shards.gender_balance_step",
         "critique-revise": "capaudit.filters.shards.critique_step"}
SHARDED_FILTERS = tuple(STEPS)

#: what a step hands workers that read nothing beside the shards
NO_EVIDENCE = {"kind": None, "source": None, "path": None, "sha256": None, "namespace": None}
#: worker options without the evidence files: the driver wrote what workers read of them
NO_FILES = dict.fromkeys(EVIDENCE_OPTIONS.values())


def shard_step(name: str):
    """The step module of the filter ``name`` (imported on first use)."""
    return importlib.import_module(STEPS[name])


class Driver:
    """The driver's side of a step that needs nothing but its options (the defaults)."""

    first_pass = None

    def __init__(self, name: str, opts: dict, kind: str | None):
        self.name, self.opts, self.kind = name, opts, kind

    def worker_options(self) -> dict:
        return dict(self.opts)

    def prepare(self, store, root: str) -> dict:
        return dict(NO_EVIDENCE)

    def task_fields(self) -> dict:
        """What every task carries beside the options (known once :meth:`prepare` ran)."""
        return {}

    def after_first(self, run_name: str, parts: list[dict], root: str):
        return None, {}, []


def begin(filt) -> None:
    """Nothing to reset before a shard (a filter that keeps no per-run counts)."""


#: what every shard task imports on a worker's first shard: the passes, the readers and
#: writers of the records, the evidence's columnar file
TASK_MODULES = ("capaudit.filters.shards.coverage", "capaudit.filters.shards.task",
                "capaudit.filters.shards.evidence_file", "capaudit.io.rewrite",
                "capaudit.io.readers", "capaudit.filters.stream")


def warm_worker(filter_and_options: tuple[str, dict]) -> None:
    """A new local worker's warm-up (:attr:`capaudit.runner.step.Step.warm_up`), run while
    the driver plans: the task modules, then the filter's own step's ``warm(options)``."""
    name, options = filter_and_options
    for module in TASK_MODULES:
        importlib.import_module(module)
    warm = getattr(shard_step(name), "warm", None)
    if warm is not None:
        warm(options)
