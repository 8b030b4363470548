"""Which evidence a filter's options give (:func:`capaudit.filters.evidence.given_kind`,
:func:`~capaudit.filters.evidence.evidence_files`), the one map every filter and ``--shards``
read: an empty file option (``--chair-gt ""``, a script's unset variable) is not given, so
``filter run SET`` and ``filter run --shards`` both refuse it in the one line that names the
option, or use the stored source as when the option is left out."""

from __future__ import annotations

import json

from shard_fixtures import CAPTIONS, run_cli, tar_members, write_evidence, write_tar

from capaudit.filters.evidence import evidence_files, given_kind


def test_the_map_by_hand():
    opts = {"evidence": None, "chair_gt": "", "instances": "inst.json", "detections": None}
    assert evidence_files(opts) == {"chair-gt": None, "instances": "inst.json", "detector": None}
    assert given_kind(opts) == "instances"            # "" for chair-gt is passed over
    assert given_kind({**opts, "evidence": "detector"}) == "detector"
    assert given_kind({**opts, "instances": ""}) is None
    assert evidence_files({"chair_gt": "gt.jsonl"}) == {"chair-gt": "gt.jsonl", "instances": None,
                                                        "detector": None}


def _caps(tmp_path):
    src = tmp_path / "caps.jsonl"
    src.write_text("".join(json.dumps({"image_id": i, "caption": c}) + "\n"
                           for i, c, _ in CAPTIONS))
    write_tar(tmp_path / "in" / "a.tar", CAPTIONS)
    db = str(tmp_path / "s.duckdb")
    assert run_cli("sets", "add", "caps", src, "--db", db) == 0
    return db


def _both(tmp_path, db, name, *extra):
    """``filter run`` of the set and of the tar folder: their exit codes."""
    common = ("--filter", "hallucination", *extra, "--db", db)
    return (run_cli("filter", "run", "caps", "--out", name, *common),
            run_cli("filter", "run", "--shards", tmp_path / "in", "--out", tmp_path / name,
                    *common))


def test_an_empty_file_option_is_refused_as_not_given(tmp_path, capsys):
    db = _caps(tmp_path)
    for option in ("--chair-gt", "--instances"):
        capsys.readouterr()
        assert _both(tmp_path, db, "x", option, "") == (2, 2)
        err = capsys.readouterr().err.splitlines()
        want = ("capaudit: error: evidence 'chair-gt' needs a file (fix: pass --chair-gt FILE, "
                "or store one with capaudit annotations add chair-gt FILE)")
        assert err == [want, want]           # the set, then the shards
    capsys.readouterr()
    assert _both(tmp_path, db, "x", "--evidence", "detector", "--detections", "") == (2, 2)
    err = capsys.readouterr().err
    assert err.count("evidence 'detector' needs a file (fix: pass --detections FILE") == 2
    assert not (tmp_path / "x").exists()


def test_an_empty_file_option_takes_the_stored_source(tmp_path):
    db = _caps(tmp_path)
    assert run_cli("annotations", "add", "chair-gt", write_evidence(tmp_path / "gt.jsonl"),
                   "--db", db) == 0
    assert _both(tmp_path, db, "empty", "--chair-gt", "") == (0, 0)
    assert _both(tmp_path, db, "left_out") == (0, 0)
    assert tar_members(tmp_path / "empty" / "a.tar") == tar_members(tmp_path / "left_out" / "a.tar")
    kept = [m[-1].decode() for m in tar_members(tmp_path / "empty" / "a.tar")
            if m[0].endswith(".txt")]
    assert kept == [c for _, _, c in CAPTIONS if c is not None]   # derived by hand
