"""A hostile user's pass over judged runs as steps of the runner (judge/step.py): a work
folder no worker shares with the driver (``memory://``), run settings of the wrong type in
the YAML, a part taken from the work folder while the run holds it. Each was a traceback
(or a folder named ``True`` made in the working directory) before it was fixed."""

from __future__ import annotations

import json
import os

import pytest

from judged_runs import all_outputs, corpus

from capaudit.cli.main import main


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAPAUDIT_CACHE_DIR", str(tmp_path / "cache"))


def _judged(out: dict) -> dict:
    return {k: {p: v["result"][p] for p in ("items", "values", "extra")}
            for k, v in out.items()}


def test_a_memory_work_folder_on_two_workers_judges_as_one_worker(tmp_path, monkeypatch,
                                                                   capsys):
    """Each worker process has a memory:// of its own: the driver read back no part (a
    TypeError traceback); the parts now come back with their summaries, as written."""
    one = all_outputs(tmp_path / "one", which=("factuality",))
    monkeypatch.setenv("CAPAUDIT_CACHE_DIR", str(tmp_path / "cache-two"))
    two = all_outputs(tmp_path / "two", ("--workers", 2, "--work-dir", "memory://hostile/w"),
                      which=("factuality",))
    assert "Traceback" not in capsys.readouterr().err
    assert two["factuality"]["rc"] == 0
    assert _judged(two) == _judged(one)
    assert two["factuality"]["result"]["summary"]["ok"] > 0


BAD_YAML = ["executor: [local]", "executor: true", "executor: 5", "address: [x]",
            "work_dir: [a]", "work_dir: true", "work_dir: 5", "work_dir: ''"]


@pytest.mark.parametrize("yaml", BAD_YAML)
def test_run_settings_of_the_wrong_type_in_the_yaml_are_one_line(yaml, tmp_path, capsys):
    c = corpus(tmp_path / "corpus")
    (tmp_path / "bad.yaml").write_text(yaml + "\n")
    before = set(os.listdir(tmp_path))
    rc = main([str(a) for a in ["audit", "factuality", c["m"], c["n"], "--images", c["img"],
                                "--judge-url", "http://127.0.0.1:9/v1", "--config",
                                tmp_path / "bad.yaml", "--db", tmp_path / "j.duckdb"]])
    err = capsys.readouterr().err
    key = yaml.split(":")[0]
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{key} (--{key.replace('_', '-')}) must be non-empty text" in err
    assert set(os.listdir(tmp_path)) == before   # no folder "True", "5" or "['a']"


def test_numbers_given_as_yaml_text_are_numbers(tmp_path, capsys):
    """``workers: '2'`` passed the range check and was then compared with 1 (a TypeError);
    ``n_boot: '50'`` judges as 50."""
    from capaudit.judge.runner import resolve_config

    (tmp_path / "text.yaml").write_text("workers: '2'\nn_boot: '50'\nseed: '3'\n")
    cfg = resolve_config(tmp_path / "text.yaml", {})
    assert (cfg["workers"], cfg["n_boot"], cfg["seed"]) == (2, 50, 3)
    assert resolve_config(tmp_path / "text.yaml", {}, workers=1)["workers"] == 1  # CLI > YAML


def test_a_part_gone_from_the_work_folder_during_the_run_is_one_line(tmp_path):
    """A set planned as done whose part is removed before the merge: one line naming the
    set, not ``json.loads(None)``."""
    from capaudit.errors import InputError
    from capaudit.io.markers import write_marker
    from capaudit.judge.evidence import Captions
    from capaudit.judge.runner import DEFAULTS, split_run
    from capaudit.judge.step import JudgeStep

    cfg, _ = split_run(DEFAULTS)
    step = JudgeStep("capaudit.judge.factuality", [Captions("m", [1], ["A dog."], "m.jsonl")],
                     None, cfg, str(tmp_path / "w"))
    step.plan(str(tmp_path / "w"), 1)
    folder, task = step.folder, step.tasks[0]
    os.makedirs(folder)
    with open(os.path.join(folder, task.name + ".json"), "w") as fh:
        json.dump({"items": {}, "values": {}, "extra": {}, "summary": {}}, fh)
    write_marker(folder, task.name, step.key, {"input": task.input})
    assert step.plan(str(tmp_path / "w"), 1) == []    # done: nothing to judge
    os.remove(os.path.join(folder, task.name + ".json"))
    with pytest.raises(InputError, match="verdicts of m left the work folder"):
        step.merge(step.tasks, [{}])


def _factuality(tmp_path, *extra) -> int:
    c = corpus(tmp_path / "corpus")
    rc = main([str(a) for a in ["audit", "factuality", c["m"], c["n"], "--images", c["img"],
                                "--judge-url", "http://127.0.0.1:9/v1", "--db",
                                tmp_path / "j.duckdb", *extra]])
    return rc


@pytest.mark.parametrize("where", ["disk", "memory"])
def test_a_users_lock_file_in_the_work_folder_is_left_alone(where, tmp_path, capsys):
    """capaudit keeps its lock at WORK/.lock: a user's own .lock there was overwritten with
    a pid and removed after the run (on a disk), or read as a stale lock and removed (on
    object storage). Now: one line, the file as it was, nothing judged."""
    from capaudit.core.storage.folder import Folder

    work = str(tmp_path / "mine") if where == "disk" else "memory://hostile-lock/mine"
    folder = Folder(work).make()
    folder.write_bytes(".lock", b"my notes: do not delete\n")
    folder.write_bytes("notes.txt", b"mine")
    rc = _factuality(tmp_path, "--work-dir", work)
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "did not write" in err, err
    assert folder.read_bytes(".lock") == b"my notes: do not delete\n"
    assert folder.read_bytes("notes.txt") == b"mine"


def test_a_second_judged_run_on_a_held_work_folder_names_a_run(tmp_path, capsys):
    """The line said 'another capaudit enrich' whatever held the folder."""
    import subprocess
    import sys

    from storage_servers import subprocess_env

    work = tmp_path / "w"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom capaudit.core.storage.work_folder "
         "import work_dir_lock\nwith work_dir_lock(sys.argv[1]):\n    print('held', flush=True)"
         "\n    time.sleep(60)", str(work)], stdout=subprocess.PIPE, text=True,
        env=subprocess_env())
    try:
        assert holder.stdout.readline().strip() == "held"
        rc = _factuality(tmp_path, "--work-dir", work)
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err
    assert rc == 2 and f"another capaudit run (pid {holder.pid})" in err, err
    assert err.count("\n") == 1


def test_a_set_the_judge_partly_failed_is_judged_again_by_the_rerun(tmp_path, capsys):
    """The judge server died in the middle of a set: that set's units it did not answer are
    'failed', the next set fails the run. The half-failed set was marked done, so the rerun
    resumed it and stored its failures where an uninterrupted run judged every unit."""
    from test_judge_steps import SETS_M_SENTENCES, _factuality as factuality, _failing_beyond
    from test_judge_steps import own_response_cache

    from capaudit.enrich.testing import FakeOpenAIServer
    from judge_script import scripted_answer

    def own_cache(n: int) -> None:
        own_response_cache(tmp_path, n)
    work = tmp_path / "work"
    own_cache(1)
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc, whole = factuality(tmp_path, srv.base_url, "--work-dir", tmp_path / "o", second="k")
    assert rc == 0 and whole["summary"]["failed"] == 0
    own_cache(2)   # one sentence of m unanswered, then nothing of k: the run fails
    answered = set(SETS_M_SENTENCES) - {"A horse eats grass."}
    with FakeOpenAIServer(answer=_failing_beyond(answered)) as srv:
        assert factuality(tmp_path, srv.base_url, "--work-dir", work, second="k")[0] == 2
    assert "did not answer" in capsys.readouterr().err
    assert not list(work.rglob("*.done.json"))   # m is not done: a unit of it failed
    own_cache(3)
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc, rerun = factuality(tmp_path, srv.base_url, "--work-dir", work, second="k")
    assert rc == 0 and rerun["summary"]["failed"] == 0 and "resumed_sets" not in rerun["summary"]
    for part in ("items", "values", "extra"):
        assert rerun[part] == whole[part]


def test_a_rerun_with_another_n_boot_or_seed_resumes_and_bootstraps_afresh(tmp_path, capsys):
    """A part once held its set's values, bootstrapped in its task: a rerun with another
    --n-boot / --seed resumed them and stored the first run's intervals under the new
    configuration. A part holds the verdict rows now and the merge bootstraps every set:
    n_boot and seed left the part's key, so the rerun resumes the done set (no call of
    its sentences, on a fresh response cache) and its intervals are a fresh run's."""
    from test_judge_steps import (SETS_M_SENTENCES, _factuality as factuality, _failing_beyond,
                                  own_response_cache)

    from capaudit.enrich.testing import FakeOpenAIServer
    from judge_script import prompt_text, scripted_answer

    asked = []

    def answer(body):   # the scripted judge, noting each sentence it is asked about
        asked.append(prompt_text(body).split("Sentence: <<", 1)[-1].split(">>", 1)[0])
        return scripted_answer(body)
    work = tmp_path / "work"
    own_response_cache(tmp_path, 1)
    with FakeOpenAIServer(answer=_failing_beyond(set(SETS_M_SENTENCES))) as srv:
        assert factuality(tmp_path, srv.base_url, "--work-dir", work, second="k")[0] == 2
    assert len(list(work.rglob("*.done.json"))) == 1   # m done, under --n-boot 50 --seed 0
    own_response_cache(tmp_path, 2)   # nothing cached: only the part spares m's calls
    with FakeOpenAIServer(answer=answer) as srv:
        rc, rerun = factuality(tmp_path, srv.base_url, "--work-dir", work, "--n-boot", 7,
                               "--seed", 5, second="k")
    assert rc == 0 and rerun["summary"]["resumed_sets"] == 1
    assert srv.calls == rerun["summary"]["calls"] == len(asked) > 0
    assert not set(asked) & set(SETS_M_SENTENCES)   # m: no call at all
    own_response_cache(tmp_path, 3)
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc, whole = factuality(tmp_path, srv.base_url, "--work-dir", tmp_path / "o",
                               "--n-boot", 7, "--seed", 5, second="k")
        assert rc == 0 and srv.calls == len(asked) + len(SETS_M_SENTENCES)
        rc, first = factuality(tmp_path, srv.base_url, "--work-dir", tmp_path / "o",
                               second="k")
    capsys.readouterr()
    for part in ("items", "values", "extra"):
        assert rerun[part] == whole[part]
    # the test can fail: m's intervals under the first run's --n-boot 50 are not these
    assert rc == 0 and first["values"]["m"] != whole["values"]["m"]


def test_a_stored_run_with_failed_units_leaves_no_lock_behind(tmp_path, capsys):
    """A set with failed units writes no part, so its key folder was never made and
    remove_work returned before the lock: ``<store>.work/…/.lock`` stayed after the run
    was stored."""
    from test_judge_steps import _factuality as factuality, own_response_cache

    from capaudit.enrich.testing import FakeOpenAIServer
    from judge_script import prompt_text, scripted_answer

    def answer(body):   # a sentence of both sets: each has a failed unit
        bad = "Sentence: <<A man rides a surfboard on a wave.>>" in prompt_text(body)
        return {"status": 400} if bad else scripted_answer(body)
    own_response_cache(tmp_path, 1)
    with FakeOpenAIServer(answer=answer) as srv:
        rc, out = factuality(tmp_path, srv.base_url)
    assert "stored as run 1" in capsys.readouterr().out
    assert rc == 0 and out["summary"]["failed"] >= 2
    assert not (tmp_path / "j.duckdb.work").exists()


def test_a_bad_annotation_row_is_one_line_naming_the_file_and_no_flag_the_command_lacks(
        tmp_path, capsys):
    """A bad annotation row said 'shard m failed: … pass --skip-bad-shards': judged
    commands have no such flag, and the failure is fatal whatever it would say. The
    annotations are read before any task now (``capability.check``): the line names the
    file and row; a task's failure (the judge did not answer) names its set."""
    c = corpus(tmp_path / "corpus")
    (tmp_path / "el.jsonl").write_text(json.dumps({"image_id": "x", "dimension": "object",
                                                   "element": "horse"}) + "\n")
    (tmp_path / "quick.yaml").write_text("judge:\n  max_retries: 0\n")

    def capability(annotations) -> str:
        rc = main([str(a) for a in ["audit", "capability", c["m"], "--annotations",
                                    annotations, "--judge-url", "http://127.0.0.1:9/v1",
                                    "--db", tmp_path / "j.duckdb", "--config",
                                    tmp_path / "quick.yaml"]])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1, err
        assert "skip-bad-shards" not in err and "shard" not in err, err
        return err
    err = capability(tmp_path / "el.jsonl")
    assert "el.jsonl, row 1: image_id is not an integer" in err, err
    err = capability(c["el"])
    assert "set m failed: the judge did not answer at http://127.0.0.1:9/v1" in err, err


def test_a_kill_between_a_part_and_its_marker_never_resumes_the_wrong_part(tmp_path,
                                                                           monkeypatch, capsys):
    """A set judged again over a new input overwrote its part before the old marker was
    removed: killed between the two, the old input's marker stood over the new input's
    part, and a rerun over the old input resumed those verdicts (of another set)."""
    from test_judge_steps import _factuality as factuality, own_response_cache

    import capaudit.io.markers as markers
    from capaudit.enrich.testing import FakeOpenAIServer
    from judge_script import scripted_answer

    work = tmp_path / "work"
    own_response_cache(tmp_path, 1)
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        rc, whole = factuality(tmp_path, srv.base_url, "--work-dir", tmp_path / "o")
        assert rc == 0
        with monkeypatch.context() as m:   # m and n marked done, then the run fails (no store)
            m.setattr("capaudit.judge.runner.store_judged",
                      lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
            assert factuality(tmp_path, srv.base_url, "--work-dir", work)[0] == 130

        def killed(*a, **k):
            raise KeyboardInterrupt   # the kill: the part of k written, its marker not
        with monkeypatch.context() as m:
            m.setattr(markers, "write_marker", killed)
            assert factuality(tmp_path, srv.base_url, "--work-dir", work, second="k")[0] == 130
        rc, rerun = factuality(tmp_path, srv.base_url, "--work-dir", work)
    capsys.readouterr()
    assert rc == 0 and rerun["summary"].get("resumed_sets") == 1   # m alone; n judged again
    for part in ("items", "values", "extra"):
        assert rerun[part] == whole[part]


def test_a_lock_released_between_the_check_and_the_read_is_taken(monkeypatch):
    """Run A removed its remote .lock after run B found it there and before B read it: B
    read nothing and said the folder held a .lock capaudit did not write."""
    import socket
    import time

    from capaudit.core.storage.folder import Folder
    from capaudit.core.storage.work_folder import remote_lock

    url = "memory://hostile-race/w"
    folder = Folder(url).make()
    folder.write_bytes(".lock", json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                            "token": "a" * 16, "beat": time.time()}).encode())
    read = Folder.read_bytes

    def released_then_read(self, name):
        if name == ".lock":
            Folder.remove(self, ".lock")   # run A ends just now
        return read(self, name)
    monkeypatch.setattr(Folder, "read_bytes", released_then_read)
    with remote_lock(url):
        monkeypatch.setattr(Folder, "read_bytes", read)
        assert json.loads(folder.read_bytes(".lock"))["pid"] == os.getpid()
        assert json.loads(folder.read_bytes(".lock"))["token"] != "a" * 16
    assert folder.read_bytes(".lock") is None


def test_capabilitys_files_reach_a_cluster_of_nodes_as_their_content(tmp_path, monkeypatch):
    """A task read --annotations/--qa at their path: on nodes sharing no disk each task
    failed 'annotation file not found' (and, later, a local path was refused on such a
    cluster). The driver now reads them once and each task carries their content: local
    files are judged on two nodes that never see them (removed before the run), and no
    file but the work folder is declared to the cluster."""
    import capaudit.executors as executors
    from test_runner import _Cluster

    from capaudit.judge.evidence import Captions
    from capaudit.judge.runner import DEFAULTS, split_run
    from capaudit.judge.step import JudgeStep
    from capaudit.runner.run import run_step
    from capaudit.runner.step import RunOptions

    monkeypatch.setattr(executors, "get_executor", lambda name, workers, **kw: _Cluster())
    row = {"image_id": 1, "dimension": "object", "element": "dog"}
    (tmp_path / "el.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "qa.jsonl").write_text(json.dumps({**row, "correct": True}) + "\n")
    cfg, _ = split_run({**DEFAULTS, "annotations": str(tmp_path / "el.jsonl"),
                        "qa": str(tmp_path / "qa.jsonl"), "n_boot": 5,
                        "judge": {**DEFAULTS["judge"], "dry_run": True, "model": "m"}})
    step = JudgeStep("capaudit.judge.capability", [Captions("m", [1], ["A dog."], "m"),
                                                   Captions("n", [1], ["A cat."], "n")],
                     None, cfg, "memory://hostile-nodes/w")
    assert [flag for _, _, flag in step.shared] == []   # a dry run: not even a work folder
    judged = JudgeStep("capaudit.judge.capability", [], None,
                       {**cfg, "judge": DEFAULTS["judge"]}, "memory://hostile-nodes/w")
    assert [flag for _, _, flag in judged.shared] == ["--work-dir"]
    (tmp_path / "el.jsonl").unlink()
    (tmp_path / "qa.jsonl").unlink()
    out, summary = run_step(step, RunOptions(executor="cluster", workers=2))
    assert [r["text"] for r in out.items["m"]] == ["dog"] == [r["text"] for r in out.items["n"]]
    assert summary["est_calls"] == 2


@pytest.mark.parametrize("spread", [("--workers", 2), ("--executor", "ray")])
def test_a_dry_run_counts_in_this_process(spread, tmp_path, monkeypatch, capsys):
    """A dry run only counts tokens: it started worker processes (``--workers 2``) or Ray
    (``--executor ray``) to do so."""
    import capaudit.executors as executors
    from capaudit.executors.local import LocalExecutor

    started = []

    def get_executor(name, workers=1, **kw):
        started.append((name, workers))
        return LocalExecutor(1)
    monkeypatch.setattr(executors, "get_executor", get_executor)
    assert _factuality(tmp_path, "--dry-run", *spread) == 0
    assert "dry run" in capsys.readouterr().out
    assert started == [("local", 1)]


@pytest.mark.parametrize("dry", [(), ("--dry-run",)])
def test_an_unknown_executor_is_one_line_dry_run_or_not(dry, tmp_path, capsys):
    assert _factuality(tmp_path, "--executor", "nope", *dry) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope" in err and "Traceback" not in err, err


def test_a_work_folder_an_older_capaudit_left_is_judged_again_not_merged(tmp_path,
                                                                         monkeypatch):
    """Before chunks, a part held a set's items and values (``{"items", "values", "extra",
    "summary"}``) under a key of the module, judge, prompts and configuration alone; a
    part now holds rows. A run killed before the upgrade left such a part with its
    marker: the rerun resumed it and the merge died on ``KeyError: 'parts'``. The key now
    names what a part holds, so that folder is not this run's."""
    from capaudit.io.markers import config_hash, write_marker
    from capaudit.judge.evidence import Captions
    from capaudit.judge.runner import DEFAULTS, split_run
    from capaudit.judge.step import JudgeStep

    cfg, _ = split_run(DEFAULTS)
    step = JudgeStep("capaudit.judge.capscore", [Captions("m", [1], ["A dog."], "m.jsonl")],
                     None, cfg, str(tmp_path / "w"))
    [task] = step.plan(str(tmp_path / "w"), 1)
    # the key caf56b0 computed: config_hash of these four alone (judge/step._key then)
    new = json.loads(json.dumps(task.input))
    import capaudit.io.markers as markers
    seen = []
    with monkeypatch.context() as patch:
        patch.setattr(markers, "config_hash", lambda d: seen.append(d) or config_hash(d))
        JudgeStep("capaudit.judge.capscore", [], None, cfg, str(tmp_path / "w"))
    # caf56b0's key (checked equal on its code): no "part", the whole configuration (n_boot
    # and seed were in it then)
    old_key = config_hash({**{k: v for k, v in seen[0].items() if k != "part"},
                           "cfg": {k: v for k, v in cfg.items() if k != "judge"}})
    assert old_key != step.key
    folder = os.path.join(str(tmp_path / "w"), old_key)
    os.makedirs(folder)
    with open(os.path.join(folder, task.name + ".json"), "w") as fh:
        json.dump({"items": {"m": []}, "values": {"m": {}}, "extra": {}, "summary": {}}, fh)
    write_marker(folder, task.name, old_key, {"input": new})
    again = JudgeStep("capaudit.judge.capscore", [Captions("m", [1], ["A dog."], "m.jsonl")],
                      None, cfg, str(tmp_path / "w"))
    assert [t.name for t in again.plan(str(tmp_path / "w"), 1)] == [task.name]
