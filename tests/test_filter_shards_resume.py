"""``filter run --shards`` as a long job (#31): a run killed (SIGKILL, a real process) at
several points resumes to the same bytes; a changed shard is redone; a corrupt shard stops
the run with one line or is skipped and listed; an existing ``--out`` follows the one
writer's rules (nothing capaudit did not write is replaced)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shard_fixtures import records_json, run_cli, split_json, write_evidence, write_tar

REPO = Path(__file__).resolve().parents[1]


def _chair_gt(shared):
    return shared("data", "coco2014", "chair_objects_trainval2014.jsonl")


def _args(src, out, gt, db, *extra):
    return ["filter", "run", "--shards", str(src), "--out", str(out), "--filter",
            "hallucination", "--chair-gt", str(gt), "--db", str(db), *map(str, extra)]


def _outputs(out: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if not p.name.startswith(".")}


def _kill_when(cmd: list[str], work: Path, folder: str, n: int, cwd: Path) -> None:
    """Start ``cmd``, SIGKILL it once ``n`` markers are in ``work/*folder*`` (or it ends):
    ``coverage-`` (the coverage pass's markers, in the work folder) or ``claims`` (a shard's
    claim, written as its filtering starts, beside the outputs: ``work`` is then the log
    folder)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "capaudit.cli.main", *cmd], cwd=cwd,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        found = [p for d in work.glob(f"*{folder}*") if d.is_dir() for p in d.glob("*.json")]
        if len(found) >= n:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait()


@pytest.fixture
def corpus(shared, tmp_path):
    split_json(records_json(shared, 84), tmp_path / "in", 7)
    return tmp_path / "in"


def test_sigkill_at_several_points_then_resume_gives_the_same_output(corpus, shared, tmp_path):
    gt = _chair_gt(shared)
    assert run_cli(*_args(corpus, tmp_path / "ref", gt, tmp_path / "ref.duckdb")) == 0
    want = _outputs(tmp_path / "ref")
    work = tmp_path / "work"
    cmd = _args(corpus, tmp_path / "out", gt, tmp_path / "s.duckdb", "--work-dir", work)
    # killed in the coverage pass, then twice in the filter pass (after 2 and 5 shards)
    logs = tmp_path / "out.log"
    for where, folder, n in ((work, "coverage-", 3), (logs, ".claims", 1),
                             (logs, ".claims", 4)):
        _kill_when(cmd, where, folder, n, tmp_path)
    assert not (tmp_path / "out.summary.json").exists()          # no run finished yet
    assert run_cli(*cmd) == 0
    assert _outputs(tmp_path / "out") == want
    summary = json.loads((tmp_path / "out.summary.json").read_text())["summary"]
    ref = json.loads((tmp_path / "ref.summary.json").read_text())["summary"]
    assert summary["shards"]["resumed"] >= 1                     # the kills' work was kept
    for key in ("captions_in", "captions_out", "sentences_in", "sentences_dropped", "actions",
                "reasons", "records"):
        assert summary[key] == ref[key]
    leftovers = [p.name for p in (tmp_path / "out").iterdir() if ".tmp-" in p.name]
    assert leftovers == []


def test_a_changed_shard_is_redone_and_the_rest_resumed(corpus, shared, tmp_path):
    gt = _chair_gt(shared)
    cmd = _args(corpus, tmp_path / "out", gt, tmp_path / "s.duckdb", "--work-dir",
                tmp_path / "work", "--keep-work")
    assert run_cli(*cmd) == 0
    part = corpus / "part-3.json"
    recs = json.loads(part.read_text())
    recs[0]["conversations"][1]["value"] = "A giraffe stands on the moon."
    part.write_text(json.dumps(recs, indent=1))
    assert run_cli(*cmd) == 0
    summary = json.loads((tmp_path / "out.summary.json").read_text())["summary"]
    assert summary["shards"]["filtered"] == 1 and summary["shards"]["resumed"] == 6
    first = json.loads((tmp_path / "out" / "part-3.json").read_text())[0]
    assert first["id"] == recs[1]["id"]   # the new record 0 lost its only sentence: it went


def test_corrupt_shard_stops_with_one_line_or_is_skipped(tmp_path, capsys):
    write_tar(tmp_path / "in" / "a-0.tar")
    write_tar(tmp_path / "in" / "a-1.tar")
    data = (tmp_path / "in" / "a-1.tar").read_bytes()
    (tmp_path / "in" / "a-1.tar").write_bytes(data[:5000])          # cut inside a member
    gt = write_evidence(tmp_path / "gt.jsonl")
    capsys.readouterr()
    assert run_cli(*_args(tmp_path / "in", tmp_path / "out", gt, tmp_path / "s.duckdb")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a-1.tar" in err[0] and "--skip-bad-shards" in err[0]
    assert not (tmp_path / "out" / "a-0.tar").exists()   # the guard's pass stopped it first
    assert run_cli(*_args(tmp_path / "in", tmp_path / "out", gt, tmp_path / "s.duckdb",
                          "--skip-bad-shards")) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "skipped a-1.tar" in printed and "1 failed" in printed
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".capaudit-files.json",
                                                                    "a-0.tar"]


def test_an_existing_out_follows_the_one_writers_rules(tmp_path, capsys):
    write_tar(tmp_path / "in" / "a.tar")
    gt = write_evidence(tmp_path / "gt.jsonl")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.tar").write_bytes(b"the user's own file")
    (tmp_path / "out" / "notes.txt").write_text("keep me")
    assert run_cli(*_args(tmp_path / "in", tmp_path / "out", gt, tmp_path / "s.duckdb")) == 2
    assert "capaudit did not write it" in capsys.readouterr().err
    assert (tmp_path / "out" / "a.tar").read_bytes() == b"the user's own file"
    (tmp_path / "out" / "a.tar").unlink()
    assert run_cli(*_args(tmp_path / "in", tmp_path / "out", gt, tmp_path / "s.duckdb")) == 0
    first = (tmp_path / "out" / "a.tar").read_bytes()
    # a second run over capaudit's own output (its manifest lists it) replaces it
    assert run_cli(*_args(tmp_path / "in", tmp_path / "out", gt, tmp_path / "s2.duckdb",
                          "--action", "flag")) == 0
    assert (tmp_path / "out" / "a.tar").read_bytes() != first
    assert (tmp_path / "out" / "notes.txt").read_text() == "keep me"
    capsys.readouterr()
    # the input folder itself, or a folder holding it, is never the output
    assert run_cli(*_args(tmp_path / "in", tmp_path / "in", gt, tmp_path / "s.duckdb")) == 2
    assert "write over them" in capsys.readouterr().err
    assert run_cli(*_args(tmp_path / "in", tmp_path, gt, tmp_path / "s.duckdb")) == 2
