"""What a step declares to the runner, and how many local workers its shards are worth.

A step (datatrove's ``PipelineStep``) holds its shards' sizes, its default megabytes per local
worker, the folders every node must reach, its work folder, its ``plan`` (a task per shard,
made while the work folder is held), its ``passes`` (module-level task functions, run in order:
what a Ray task can carry) and its ``merge`` of the parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["Step", "RunOptions", "worker_budget", "shard_bytes", "once_per_worker"]

# shard megabytes that make one more local worker worth starting, read here alone (each step
# declares its default); 0: every worker asked for, whatever the load and the size
WORKER_MB_ENV = "CAPAUDIT_WORKER_MB"
_BUILT: dict = {}   # this worker process's models, indexes, evidence: built once, by key


@dataclass(frozen=True)
class RunOptions:
    """How a step's tasks run. ``on_start(jobs, workers)`` as each pass is planned (``jobs``:
    of every pass planned so far, a total that grows); ``on_shard(summary)`` as each job
    completes."""

    executor: str = "local"
    workers: int = 1
    address: str | None = None
    skip_bad: bool = False
    on_shard: Callable[[dict], Any] | None = None
    on_start: Callable[[int, int], Any] | None = None

    def __post_init__(self):
        from capaudit.executors.base import check_address

        check_address(self.executor, self.address)   # an address the executor would ignore


class Step:
    """The protocol, with its defaults. ``sizes``: the shards' bytes (None: not known, one
    worker's worth); ``shared``: ``(location, what, flag)`` of each folder every node of a
    cluster must reach; ``work_dir``: the folder this run holds alone ("": none held)."""

    unit: str = "shard"   # what a task's failure line calls it ("shard NAME failed: ...")
    worker_mb: float | None = None   # None: the workers asked for (work not measured in bytes)
    sizes: Sequence[int | None] = ()
    shared: Sequence[tuple[str, str, str]] = ()
    work_dir: str | Path = ""
    passes: Sequence[Callable[[Any], dict]] = ()
    #: ``(fn, arg)``: ``fn(arg)`` in each local worker as it starts (a module-level function,
    #: a picklable argument), the lazy loads its first task would pay (imports, a model) done
    #: while the driver plans; the workers are then started before the plan. None: none.
    warm_up: tuple[Callable[[Any], Any], Any] | None = None

    def plan(self, root: str, workers: int) -> list:
        """A task per shard (``root``: the work folder, held by this run)."""
        raise NotImplementedError

    def between(self, tasks: list, results: list[dict[int, dict]]) -> list:
        """The tasks of the second pass: those the first did not fail."""
        return [t for i, t in enumerate(tasks)
                if results[0].get(i, {}).get("status", "failed") != "failed"]

    def merge(self, tasks: list, results: list[dict[int, dict]]) -> Any:
        """The run's result from each pass's summaries (keyed by the place of the task in
        the list that pass ran: ``tasks`` for the first)."""
        raise NotImplementedError


def worker_budget(executor: str, asked: int, sizes: Sequence[int | None],
                  worker_mb: float | None) -> int:
    """Local workers worth starting (:func:`capaudit.core.config.worker_count`: idle cores,
    one per ``CAPAUDIT_WORKER_MB`` of shards, default ``worker_mb``, no more than the shards);
    a Ray cluster's cores are its own, and a step whose work is not its bytes (``worker_mb``
    None: requests, models) gets the workers asked for."""
    from capaudit.core.ranges import env_number

    per_mb = 0 if worker_mb is None else env_number(WORKER_MB_ENV, worker_mb, 0, 1e6)
    if executor != "local" or per_mb == 0:
        return asked
    from capaudit.core.config import worker_count

    size = sum(int(per_mb * 2 ** 20) if n is None else n for n in sizes)
    return min(len(sizes) or 1, worker_count(asked, size, int(per_mb * 2 ** 20)))


def shard_bytes(entries: Sequence) -> list[int | None]:
    """Sizes of listed shards (entries with ``size``) or of paths on this disk."""
    return [e.stat().st_size if isinstance(e, Path) else getattr(e, "size", None)
            for e in entries]


def once_per_worker(key, build: Callable[[], Any]) -> Any:
    """What a task needs that outlives it (a model, the evidence), built once per worker
    process and key."""
    if key not in _BUILT:
        _BUILT[key] = build()
    return _BUILT[key]
