"""Judged commands as steps of the runner (#44): the outputs of every judged command with
the default options are those recorded before the move (digests of the ``--json`` result
and of the stored rows, :mod:`judged_runs`), and however the judging is spread (one task,
a task per set, two workers, Ray) the items and values are the same."""

from __future__ import annotations

import pytest

from judged_runs import all_outputs, digest

# recorded on the code before judged runs became steps (branch i44j, parent 3ac2ce4), with
# tests/judged_runs.py as it is: the result of each command and the rows it stored
BEFORE = {"capped": "5906785555859211", "factuality": "aa527b1f1d83bd67",
          "dcscore": "39c2555f1e8994f6", "faithscore": "9c530a78d18f1e3f",
          "capscore": "4a4bd962c70eb148", "capability": "80dd12577631e157",
          "validate": "f9b1c2e0047be6c2", "dry-run": "211b85db1997610f"}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """The default response cache lives in the user cache dir: one per test."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAPAUDIT_CACHE_DIR", str(tmp_path / "cache"))


def test_default_runs_are_byte_identical_to_before_the_move(tmp_path, capsys):
    out = all_outputs(tmp_path / "a")
    capsys.readouterr()
    assert {k: v["rc"] for k, v in out.items()} == dict.fromkeys(out, 0)
    assert out["capped"]["result"]["summary"]["stopped"] == "max-calls 9 reached"
    assert {k: digest(v) for k, v in out.items()} == BEFORE
