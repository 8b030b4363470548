"""The one runner of sharded work (``capaudit.runner``): the worker budget each step declares,
and a step's plan, passes, failure rule and merge, on a step written here (in process)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capaudit.errors import InputError
from capaudit.runner.run import run_step
from capaudit.runner.step import RunOptions, Step, worker_budget

MB = 2 ** 20


def test_each_step_declares_its_megabytes_per_worker_and_the_env_overrides_them(monkeypatch):
    """10 MB of shards in 3 files on an idle machine of 4 cores: an audit (64 MB a worker)
    starts 1 worker, a filter (4 MB) 2 (10 // 4), a step whose work is not bytes the 8 asked
    for; CAPAUDIT_WORKER_MB, read in one place, overrides a byte-measured step's default."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.delenv("CAPAUDIT_WORKER_MB", raising=False)
    sizes = [4 * MB, 4 * MB, 2 * MB]
    assert worker_budget("local", 8, sizes, 64.0) == 1
    assert worker_budget("local", 8, sizes, 4.0) == 2
    assert worker_budget("local", 8, sizes, None) == 8
    assert worker_budget("ray", 8, sizes, 64.0) == 8          # a cluster's cores are its own
    assert worker_budget("local", 8, [None, None, None], 4.0) == 3   # unknown: 1 worker each
    monkeypatch.setenv("CAPAUDIT_WORKER_MB", "2")
    assert worker_budget("local", 8, sizes, 64.0) == 3         # 5 by size, 3 shards
    assert worker_budget("local", 8, sizes, None) == 8
    monkeypatch.setenv("CAPAUDIT_WORKER_MB", "0")
    assert worker_budget("local", 8, sizes, 4.0) == 8


def double(task: dict) -> dict:
    if task["value"] < 0:
        return {"shard": task["name"], "status": "failed", "error": "a negative value",
                "fix": "make it positive"}
    return {"shard": task["name"], "status": "done", "value": 2 * task["value"]}


def add_one(task: dict) -> dict:
    return {"shard": task["name"], "status": "done", "value": task["value"] + 1}


class _Toy(Step):
    """Two passes: doubled, then each shard the first pass did not fail plus one."""

    passes = (double, add_one)

    def __init__(self, values: list[int], work):
        self.values, self.work_dir, self.planned_in = values, work, None

    def plan(self, root: str, workers: int) -> list[dict]:
        self.planned_in = root
        return [{"name": f"s{i}", "value": v} for i, v in enumerate(self.values)]

    def between(self, tasks, results):
        ok = super().between(tasks, results)
        return [{**t, "value": results[0][tasks.index(t)]["value"]} for t in ok]

    def merge(self, tasks, results):
        return [s["value"] for _, s in sorted(results[1].items())]


def test_a_step_is_planned_in_its_held_work_folder_run_pass_by_pass_and_merged(tmp_path):
    seen, started = [], []
    step = _Toy([1, 2, 3], tmp_path / "work")
    got = run_step(step, RunOptions(on_shard=seen.append,
                                    on_start=lambda n, w: started.append((n, w))))
    assert got == [3, 5, 7]                        # 2v + 1, in shard order
    assert started == [(3, 1), (6, 1)] and len(seen) == 6  # the jobs planned as each pass is
    #                                                     planned: 3, then 3 more; 1 worker
    assert step.planned_in == str((tmp_path / "work").resolve())


def test_a_failed_shard_stops_the_run_in_one_line_unless_skipped(tmp_path):
    with pytest.raises(InputError, match=r"shard s1 failed: a negative value.*make it "
                                         r"positive; or pass --skip-bad-shards"):
        run_step(_Toy([1, -2, 3], tmp_path / "w1"), RunOptions())
    started = []
    got = run_step(_Toy([1, -2, 3], tmp_path / "w2"), RunOptions(
        skip_bad=True, on_start=lambda n, w: started.append(n)))
    assert got == [3, 7]                           # s1 left out of the second pass
    assert started == [3, 5]                       # which has 2 jobs, not 3


def write_tripled(task: dict) -> dict:
    Path(task["root"], task["name"]).write_text(str(3 * task["value"]))
    return {"shard": task["name"], "status": "done"}


class _Resumable(Step):
    """One pass; a shard whose output is in the work folder is done: not planned again."""

    passes = (write_tripled,)

    def __init__(self, values: list[int], work, shared=()):
        self.values, self.work_dir, self.shared = values, work, shared

    def plan(self, root: str, workers: int) -> list[dict]:
        self.root = Path(root)
        return [{"name": f"s{i}", "value": v, "root": root} for i, v in enumerate(self.values)
                if not (self.root / f"s{i}").exists()]

    def merge(self, tasks, results):
        return [(self.root / f"s{i}").read_text() for i in range(len(self.values))]


class _Cluster:
    """An executor of two nodes sharing no disk (as Ray reports them), run in process."""

    starts = 0

    def __init__(self, workers: int = 1, **_):
        type(self).starts += 1

    def nodes(self) -> int:
        return 2

    def map_unordered(self, fn, tasks):
        for task in tasks:
            yield task, fn(task)

    def close(self) -> None:
        pass


@pytest.fixture()
def cluster(monkeypatch):
    """``--executor cluster``: :class:`_Cluster`, its starts counted."""
    import capaudit.executors as executors

    monkeypatch.setattr(_Cluster, "starts", 0)
    monkeypatch.setattr(executors, "get_executor", lambda name, workers, **kw: _Cluster(workers))
    return RunOptions(executor="cluster")


def test_a_run_with_nothing_left_starts_no_executor(tmp_path, cluster):
    """Resumed with every shard done, a run plans, finds nothing to do and merges what the
    first run wrote without starting the executor; its folders are URLs, which the
    cluster's nodes reach whatever their number."""
    shared = (("s3://bucket/w", "work folder", "--work-dir"),)
    first = run_step(_Resumable([1, 2], tmp_path / "w", shared), cluster)
    assert _Cluster.starts == 1
    again = run_step(_Resumable([1, 2], tmp_path / "w", shared), cluster)
    assert again == first == ["3", "6"] and _Cluster.starts == 1


def test_a_local_folder_on_several_nodes_is_refused_before_anything_is_written(tmp_path,
                                                                               cluster):
    """Only a started cluster can say how many nodes it has, so with a local folder it is
    started first: the refusal comes before the work folder is made."""
    shared = ((str(tmp_path / "w"), "work folder", "--work-dir"),)
    with pytest.raises(InputError, match="2 nodes"):
        run_step(_Resumable([1], tmp_path / "w", shared), cluster)
    assert _Cluster.starts == 1 and not (tmp_path / "w").exists()


class _TwoWorkers:
    """Two local workers, in process: the order tasks are handed over is kept, and results
    come back in the reverse order (as unordered as a pool may give them)."""

    workers = 2

    def __init__(self):
        self.handed: list = []

    def map_unordered(self, fn, tasks):
        self.handed = [t["rel"] for t in tasks]
        yield from reversed([(t, fn(t)) for t in tasks])


def test_several_workers_take_the_largest_shards_first_and_results_keep_their_places():
    """Shards of 1, 3, None (unknown), 3 and 9 bytes: handed over 9, 3, 3 (ties in their
    order), 1, then the unknown; each summary is still found at its task's place, and one
    worker takes them in their order."""
    from capaudit.runner.run import run_pass

    todo = [{"rel": r, "size": n} for r, n in (("a", 1), ("b", 3), ("c", None), ("d", 3),
                                               ("e", 9))]
    ex = _TwoWorkers()
    got = run_pass(ex, lambda t: {"shard": t["rel"]}, todo, RunOptions())
    assert ex.handed == ["e", "b", "d", "a", "c"]
    assert {i: s["shard"] for i, s in got.items()} == {0: "a", 1: "b", 2: "c", 3: "d", 4: "e"}
    ex.workers = 1
    run_pass(ex, lambda t: {"shard": t["rel"]}, todo, RunOptions())
    assert ex.handed == ["a", "b", "c", "d", "e"]
