"""Local workers warmed up while the driver plans (``Step.warm_up``, issue #43: 2 workers
against one), and ended at once when they owe nothing: on real spawned processes."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
from pathlib import Path

import pytest

from capaudit.errors import InputError
from capaudit.runner.run import run_step
from capaudit.runner.step import RunOptions, Step


class _TornDown:
    """Writes ``torn down`` to its file when the interpreter frees it at a normal exit."""

    def __init__(self, path: Path):
        self.fd, self.write = os.open(path, os.O_WRONLY | os.O_CREAT), os.write

    def __del__(self):
        self.write(self.fd, b"torn down")


_HELD: list = []


def note_warm_up(folder: str) -> None:
    """A warm-up: a file per worker; an exit handler's file; an object the interpreter's
    tear-down would free."""
    import atexit

    pid = os.getpid()
    with open(Path(folder, f"warm-{pid}"), "a") as fh:
        fh.write("warmed\n")
    atexit.register(Path(folder, f"exit-{pid}").write_text, "exited")
    _HELD.append(_TornDown(Path(folder, f"torn-{pid}")))


def failing_warm_up(folder: str) -> None:
    raise ValueError("the warm-up's own bug")


def tripled(task: dict) -> dict:
    """The task: which warm-ups its worker ran before it, and a line printed."""
    warm = Path(task["folder"], f"warm-{os.getpid()}")
    print(f"task {task['name']} ran", flush=False)
    return {"shard": task["name"], "status": "done", "value": 3 * task["value"],
            "warmed": warm.read_text().count("warmed") if warm.exists() else 0,
            "pid": os.getpid()}


def needs_its_model(task: dict) -> dict:
    raise InputError("the model is not installed", fix="install it")


class _Warmed(Step):
    passes = (tripled,)

    def __init__(self, folder: Path, warm_up=note_warm_up, passes=None):
        self.folder, self.work_dir, self.children = folder, folder / "work", None
        self.warm_up = (warm_up, str(folder))
        self.passes = passes or self.passes

    def plan(self, root: str, workers: int) -> list[dict]:
        self.children = len(mp.active_children())     # started before the plan
        return [{"name": f"s{i}", "value": v, "folder": str(self.folder)}
                for i, v in enumerate([1, 2, 3, 4, 5])]

    def merge(self, tasks, results):
        return [results[0][i] for i in range(len(tasks))]


def test_each_worker_warms_up_once_before_its_first_task_and_exits_at_once(tmp_path, capfd):
    """Two workers are started before the plan; each that took a task ran the warm-up exactly
    once before it (a worker still starting when the work is done may never finish its
    own); the results are the tasks' own, in their places; every line a task printed
    reaches the output; the workers are gone when the run returns, their exit handlers run
    but not the interpreter's tear-down (which freed a model object by object)."""
    step = _Warmed(tmp_path)
    got = run_step(step, RunOptions(workers=2))
    assert step.children == 2
    assert [s["value"] for s in got] == [3, 6, 9, 12, 15]
    assert all(s["warmed"] == 1 for s in got)
    pids = {s["pid"] for s in got}
    assert {f"warm-{p}" for p in pids} <= {p.name for p in tmp_path.glob("warm-*")}
    assert mp.active_children() == []
    assert all(Path(tmp_path, f"exit-{p}").read_text() == "exited" for p in pids)
    assert {Path(tmp_path, f"torn-{p}").read_bytes() for p in pids} == {b""}
    printed = capfd.readouterr().out
    assert all(f"task s{i} ran" in printed for i in range(5))


def test_one_worker_runs_in_process_without_the_warm_up(tmp_path):
    step = _Warmed(tmp_path)
    got = run_step(step, RunOptions(workers=1))
    assert [s["value"] for s in got] == [3, 6, 9, 12, 15] and step.children == 0
    assert all(s["warmed"] == 0 for s in got) and not list(tmp_path.glob("warm-*"))


def _all_reaped(seconds: float = 2) -> bool:
    """No child process left, given a terminated one a moment to be reaped (checking at
    once raced the reaping about one run in three)."""
    import time

    ended = time.monotonic() + seconds
    while mp.active_children() and time.monotonic() < ended:
        time.sleep(0.05)
    return mp.active_children() == []


def test_a_failed_warm_up_is_left_to_the_tasks(tmp_path):
    """A warm-up only does early what the tasks do: its failure changes no result, and a
    task that meets the error itself stops the run with its one line, as without it."""
    got = run_step(_Warmed(tmp_path, failing_warm_up), RunOptions(workers=2))
    assert [s["value"] for s in got] == [3, 6, 9, 12, 15]
    with pytest.raises(InputError, match="the model is not installed") as err:
        run_step(_Warmed(tmp_path, failing_warm_up, (needs_its_model,)),
                 RunOptions(workers=2))
    assert err.value.fix == "install it" and _all_reaped()


@pytest.mark.parametrize("given, parses", [({}, True), (
    {"object_mode": "reference", "non_visual": "judge"}, False)])
def test_the_filter_steps_warm_up_loads_the_parser_only_when_its_options_parse(given, parses):
    """In a fresh process as a worker starts: the default hallucination filter's warm-up
    loads spaCy (its setup would), reference mode judged by the word rules does not."""
    pytest.importorskip("spacy")
    from capaudit.filters.options import filter_options
    from capaudit.filters.shards.steps import shard_step

    opts = filter_options("hallucination", given)
    worker_opts = shard_step("hallucination").Driver("hallucination", opts,
                                                     "chair-gt").worker_options()
    probe = ("import json, sys\n"
             "from capaudit.filters.shards.steps import warm_worker\n"
             "from capaudit.filters.spacy_pipeline import _nlp\n"
             "warm_worker(json.loads(sys.argv[1]))\n"
             "print(json.dumps([_nlp.cache_info().currsize, 'spacy' in sys.modules,\n"
             "                  'capaudit.filters.shards.coverage' in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", probe, json.dumps(["hallucination",
                                                                   worker_opts])],
                         capture_output=True, text=True, check=True, env=os.environ)
    assert json.loads(out.stdout) == [int(parses), parses, True]


def slow_warm_up(folder: str) -> None:
    import time

    time.sleep(5)
    Path(folder, f"warmed-{os.getpid()}").write_text("the warm-up ran to its end")


class _PlanFails(_Warmed):
    def plan(self, root: str, workers: int) -> list[dict]:
        raise InputError("the output folder holds a file capaudit did not write")


def test_workers_warming_up_for_a_plan_that_fails_are_ended_with_the_runs_one_line(tmp_path):
    """The plan's one line, and the workers still warming up ended, not waited for."""
    with pytest.raises(InputError, match="holds a file capaudit did not write"):
        run_step(_PlanFails(tmp_path, slow_warm_up), RunOptions(workers=2))
    assert _all_reaped() and not list(tmp_path.glob("warmed-*"))   # the warm-up lasts 5 s


def test_only_a_run_that_starts_afresh_warms_its_workers_up(tmp_path):
    """A rerun (its work folder left by an earlier run) may find every shard done: its
    workers are not made to load a parser; a URL work folder is not looked up."""
    from capaudit.filters.shards.run import fresh_warm_up
    from capaudit.filters.shards.steps import warm_worker

    opts = {"object_mode": "corrected"}
    assert fresh_warm_up(str(tmp_path / "work"), "hallucination", opts) == (
        warm_worker, ("hallucination", opts))
    (tmp_path / "work").mkdir()
    assert fresh_warm_up(str(tmp_path / "work"), "hallucination", opts) is None
    assert fresh_warm_up("s3://bucket/work", "hallucination", opts) is not None


_DRIVER = '''\
import atexit, os, sys
from pathlib import Path

FOLDER = Path(sys.argv[1])
# module level: run again in each spawned worker (as __mp_main__) before the pool's
# initializer, as the CLI's modules register close_open_stores at import
atexit.register(Path(FOLDER, f"main-{os.getpid()}").write_text, "exited")


def nothing(_):
    pass


def pid(_):
    return os.getpid()


if __name__ == "__main__":
    from capaudit.executors.local import LocalExecutor

    pool = LocalExecutor(2)
    pool.warm(nothing, None)
    workers = sorted({p for _, p in pool.map_unordered(pid, range(6))})
    pool.close()
    print(os.getpid(), *workers)
'''


def test_exit_handlers_the_main_module_registered_run_in_each_worker(tmp_path):
    """A handler registered before the pool's initializer (the main module re-run in the
    worker as ``__mp_main__``: the CLI's ``close_open_stores``) runs at the worker's exit,
    as the driver's does: the fast exit calls every handler, not only the later ones."""
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    out = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True,
                         text=True, check=True, env=os.environ, cwd=tmp_path)
    driver, *workers = out.stdout.split()
    assert workers and driver not in workers and out.stderr == ""
    assert (tmp_path / f"main-{driver}").read_text() == "exited"
    assert all((tmp_path / f"main-{p}").read_text() == "exited" for p in workers)
