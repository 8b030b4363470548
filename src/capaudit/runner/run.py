"""``run_step``: a step's tasks on local processes or Ray, its work folder held.

Every step in one order: the workers counted (:func:`.step.worker_budget`), the executor
started, the folders every node must reach checked (before anything is written), the work
folder held (one run at a time), the tasks planned, each pass run (a failed shard stops the
run with one line unless ``skip_bad`` and the failure is not fatal: it is then left out and
listed), the parts merged; the executor closed whatever happens.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable

from capaudit.errors import InputError
from capaudit.runner.step import RunOptions, Step, worker_budget

__all__ = ["run_step", "run_pass", "shard_failed"]


def run_step(step: Step, opts: RunOptions) -> Any:
    """Plan, run every pass and merge ``step``; returns what its ``merge`` returns."""
    from capaudit.core.storage.work_folder import work_dir_lock
    from capaudit.executors import get_executor
    from capaudit.executors.base import require_shared

    workers = worker_budget(opts.executor, opts.workers, step.sizes, step.worker_mb)
    ex = get_executor(opts.executor, workers=workers, address=opts.address)
    try:
        for location, what, flag in step.shared:
            require_shared(ex, location, what=what, flag=flag)
        with work_dir_lock(step.work_dir) if step.work_dir else nullcontext("") as root:
            tasks = step.plan(getattr(root, "location", None) or str(root), workers)
            if opts.on_start:
                opts.on_start(len(tasks) * len(step.passes), workers)
            results: list[dict[int, dict]] = []
            for fn in step.passes:   # local workers started once, for every pass
                results.append(run_pass(ex, fn, step.between(tasks, results) if results
                                        else tasks, opts))
            ex.close()               # and gone before the merge (the driver's memory)
            return step.merge(tasks, results)
    finally:
        ex.close()


def run_pass(ex, fn: Callable[[Any], dict], todo: list, opts: RunOptions) -> dict[int, dict]:
    """``fn`` over ``todo``: the summaries by the task's place in ``todo``, each told to
    ``on_shard`` as it completes."""
    place = {id(t): i for i, t in enumerate(todo)}
    done: dict[int, dict] = {}
    for task, summary in ex.map_unordered(fn, todo):
        done[place[id(task)]] = summary
        if opts.on_shard:
            opts.on_shard(summary)
        if summary.get("status") == "failed" and (summary.get("fatal") or not opts.skip_bad):
            raise shard_failed(summary)
    return done


def shard_failed(summary: dict) -> InputError:
    """The one line of a failed shard: its error, and its fix or ``--skip-bad-shards``."""
    err, fix = summary["error"], summary.get("fix")
    return InputError(f"shard {summary['shard']} failed: {err}", fix=None if "(fix:" in err
                      else (f"{fix}; or " if fix else "repair it, or ")
                      + "pass --skip-bad-shards to leave it out and list it")
