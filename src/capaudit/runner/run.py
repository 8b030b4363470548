"""``run_step``: a step's tasks on local processes or Ray, its work folder held.

Every step in one order: the workers counted (:func:`.step.worker_budget`), the work folder
held (one run at a time), the tasks planned, each pass run (a failed shard stops the run
with one line unless ``skip_bad`` and the failure is not fatal: it is then left out and
listed), the parts merged. The executor is started when a pass first has work (a run that
resumes with nothing left over URL folders starts no Ray) and the folders every node must
reach are checked as it starts; with a local folder, which only a started cluster can say
its nodes share or not, it is started first, before anything is written; several local workers
of a step with a warm-up (:attr:`.step.Step.warm_up`) are started first too, to warm up while
the driver plans. It is closed whatever happens.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable

from capaudit.errors import InputError
from capaudit.runner.step import RunOptions, Step, worker_budget

__all__ = ["run_step", "run_pass", "largest_first", "shard_failed"]


def run_step(step: Step, opts: RunOptions) -> Any:
    """Plan, run every pass and merge ``step``; returns what its ``merge`` returns."""
    from capaudit.core.storage.urls import is_url
    from capaudit.core.storage.work_folder import work_dir_lock
    from capaudit.executors import get_executor
    from capaudit.executors.base import require_shared

    workers, started = worker_budget(opts.executor, opts.workers, step.sizes, step.worker_mb), []

    def executor():
        """Started at its first use, the folders every node must reach checked at once."""
        if not started:
            started.append(get_executor(opts.executor, workers=workers, address=opts.address))
            for location, what, flag in step.shared:
                require_shared(started[0], location, what=what, flag=flag)
        return started[0]
    try:
        if step.warm_up and workers > 1 and opts.executor == "local":
            executor().warm(*step.warm_up)   # the workers load while the driver plans
        if not all(is_url(location) for location, _, _ in step.shared):
            executor()    # a local folder, refused on a cluster of nodes: before any write
        with work_dir_lock(step.work_dir) if step.work_dir else nullcontext("") as root:
            tasks = step.plan(getattr(root, "location", None) or str(root), workers)
            results, jobs = [], 0     # a later pass may run fewer jobs (the audit's sums)
            for fn in step.passes:   # local workers started once, for every pass
                todo = step.between(tasks, results) if results else tasks
                jobs += len(todo)
                if opts.on_start:
                    opts.on_start(jobs, workers)
                results.append(run_pass(executor(), fn, todo, opts, step.unit) if todo else {})
            for ex in started:       # gone before the merge (the driver's memory)
                ex.close()
            return step.merge(tasks, results)
    finally:
        for ex in started:
            ex.close()


def run_pass(ex, fn: Callable[[Any], dict], todo: list, opts: RunOptions,
             unit: str = "shard") -> dict[int, dict]:
    """``fn`` over ``todo``: the summaries by the task's place in ``todo``, each told to
    ``on_shard`` as it completes. Several local workers are handed the largest shards first
    (:func:`largest_first`); the summaries keep their places, so the merge is the same."""
    place = {id(t): i for i, t in enumerate(todo)}
    done: dict[int, dict] = {}
    order = largest_first(todo) if getattr(ex, "workers", 1) > 1 else todo
    for task, summary in ex.map_unordered(fn, order):
        done[place[id(task)]] = summary
        if opts.on_shard:
            opts.on_shard(summary)
        if summary.get("status") == "failed" and (summary.get("fatal") or not opts.skip_bad):
            raise shard_failed(summary, unit)
    return done


def largest_first(todo: list) -> list:
    """The tasks by their shard's bytes (a task's ``size``), largest first, ties and tasks of
    unknown size in their order: workers take the next task as they finish one, so a large
    shard taken last left one worker computing alone at the end (longest processing time
    first: the last tasks taken are the short ones)."""
    def size(task) -> int:
        n = task.get("size") if isinstance(task, dict) else getattr(task, "size", None)
        return n if isinstance(n, int) else 0
    return sorted(todo, key=lambda t: -size(t))


def shard_failed(summary: dict, unit: str = "shard") -> InputError:
    """The one line of a failed task (``unit``: what the step calls it, :attr:`Step.unit`):
    its error, and its fix; ``--skip-bad-shards`` only where it would leave the task out (a
    fatal failure stops the run whatever it says)."""
    err, fix = summary["error"], summary.get("fix")
    if "(fix:" in err:
        fix = None
    elif summary.get("fatal"):
        fix = fix or "repair it"
    else:
        fix = (f"{fix}; or " if fix else "repair it, or ") + \
            "pass --skip-bad-shards to leave it out and list it"
    return InputError(f"{unit} {summary['shard']} failed: {err}", fix=fix)
