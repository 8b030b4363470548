"""What a step declares to the runner, and how many local workers a step's shards are worth.

A step is a small object (datatrove's ``PipelineStep`` with the executor's markers): its
shards' sizes, its default megabytes per local worker, the folders every node must reach,
its work folder, its ``plan`` (one task per shard, made while the work folder is held), its
``passes`` (module-level task functions, run in order over the tasks: what a Ray task can
carry) and its ``merge`` of the parts. Audit (``audit.shards.step``), the sharded filters
(``filters.shards.step``), enrich and detect (``enrich``) are steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["Step", "RunOptions", "worker_budget", "WORKER_MB_ENV"]

# shard megabytes that make one more local worker worth starting, read here alone; each step
# declares its own default (an audit's accumulators are heavy, a filter streams); 0: every
# worker asked for, whatever the load and the size (the tests of the process pool)
WORKER_MB_ENV = "CAPAUDIT_WORKER_MB"


@dataclass(frozen=True)
class RunOptions:
    """How a step's tasks run: executor, workers asked for, cluster, failure rule, progress."""

    executor: str = "local"
    workers: int = 1
    address: str | None = None
    skip_bad: bool = False
    on_shard: Callable[[dict], Any] | None = None


class Step:
    """The protocol, with its defaults. ``sizes``: the shards' sizes in bytes (None: not
    known, counted as one worker's worth); ``shared``: ``(location, what, flag)`` of the
    folders every node of a cluster must reach; ``work_dir``: the folder held for the run."""

    worker_mb: float | None = None   # None: the workers asked for (work not measured in bytes)
    sizes: Sequence[int | None] = ()
    shared: Sequence[tuple[str, str, str]] = ()
    work_dir: str | Path = ""
    passes: Sequence[Callable[[Any], dict]] = ()

    def plan(self, root: str, workers: int) -> list:
        """One task per shard (``root``: the work folder, held by this run)."""
        raise NotImplementedError

    def between(self, tasks: list, results: list[dict[int, dict]]) -> list:
        """The tasks of the next pass: by default those the last pass did not fail."""
        return [t for i, t in enumerate(tasks) if i in results[-1]
                and results[-1][i]["status"] != "failed"]

    def merge(self, tasks: list, results: list[dict[int, dict]]) -> Any:
        """The run's result from each pass's summaries (by the task's place in ``tasks``)."""
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
