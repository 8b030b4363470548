"""The one runner of sharded work (``capaudit.runner``): the worker budget each step declares,
and a step's plan, passes, failure rule and merge, on a step written here (in process)."""

from __future__ import annotations

import os

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
    assert started == [(6, 1)] and len(seen) == 6  # 3 shards x 2 passes, 1 worker
    assert step.planned_in == str((tmp_path / "work").resolve())


def test_a_failed_shard_stops_the_run_in_one_line_unless_skipped(tmp_path):
    with pytest.raises(InputError, match=r"shard s1 failed: a negative value.*make it "
                                         r"positive; or pass --skip-bad-shards"):
        run_step(_Toy([1, -2, 3], tmp_path / "w1"), RunOptions())
    got = run_step(_Toy([1, -2, 3], tmp_path / "w2"), RunOptions(skip_bad=True))
    assert got == [3, 7]                           # s1 left out of the second pass
