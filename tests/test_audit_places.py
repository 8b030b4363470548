"""Where an audit's output goes: a single set's table is its audit (not a "compare"), and
work folders and caches land beside the store or in the user cache dir, never in the
working directory (issue 23)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from capaudit.cli.main import main


def _oscar(shared, n):
    path = shared("data", "captioners", "oscar_val2014_gender.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()[:n]]


def test_single_set_audit_is_titled_as_its_audit(shared, tmp_path, capsys):
    src = tmp_path / "oscar.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in _oscar(shared, 80)))
    args = ["audit", "run", str(src), "--metrics", "vocab,length", "--n-boot", "20",
            "--db", str(tmp_path / "a.duckdb")]
    assert main(args) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "capaudit audit of oscar (95% bootstrap intervals)" in out
    assert "capaudit compare" not in out and "best in green" not in out


def _shards(folder: Path, rows, n_shards=2) -> Path:
    folder.mkdir(parents=True)
    step = -(-len(rows) // n_shards)
    for s in range(n_shards):
        part = rows[s * step:(s + 1) * step]
        pq.write_table(pa.table({"key": [str(r["image_id"]) for r in part],
                                 "caption": [r["caption"] for r in part]}),
                       folder / f"{s:05d}.parquet")
    return folder


def test_sharded_audit_works_beside_the_store_and_cleans_up(shared, tmp_path, capsys,
                                                            monkeypatch):
    """Run from an empty working directory: nothing lands there. --keep-work leaves
    STORE.work/NAME.audit-work (as a killed run does); the next run resumes from it and
    removes it; a --work-dir with a file of the user's keeps that file."""
    cwd, home = tmp_path / "cwd", tmp_path / "store"
    cwd.mkdir()
    home.mkdir()
    monkeypatch.chdir(cwd)
    folder = _shards(tmp_path / "oscar", _oscar(shared, 200))
    db = home / "r.duckdb"
    args = ["audit", "run", "--shards", str(folder), "--metrics", "vocab,length",
            "--n-boot", "20", "--db", str(db)]
    assert main(args + ["--keep-work"]) == 0
    work = home / "r.duckdb.work" / "oscar.audit-work"
    assert len(list(work.glob("*/*.done.json"))) == 2
    assert "work folder kept" in capsys.readouterr().out
    assert main(args) == 0                       # resumes both shards, then removes the folder
    assert "2 shards: 0 audited, 2 resumed" in " ".join(capsys.readouterr().out.split())
    assert not (home / "r.duckdb.work").exists()
    assert list(cwd.iterdir()) == []
    mine = tmp_path / "w" / "notes.txt"
    mine.parent.mkdir()
    mine.write_text("mine")
    assert main(args + ["--work-dir", str(mine.parent)]) == 0
    assert sorted(p.name for p in mine.parent.iterdir()) == ["notes.txt"]
    assert mine.read_text() == "mine"


def test_judge_cache_goes_to_the_user_cache_dir(tmp_path, monkeypatch):
    from capaudit.enrich.testing import FakeOpenAIServer

    cwd, cache = tmp_path / "cwd", tmp_path / "cache"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("CAPAUDIT_CACHE_DIR", str(cache))
    monkeypatch.setenv("JUDGE_KEY", "sk-test")
    caps, refs = tmp_path / "m.jsonl", tmp_path / "h.jsonl"
    caps.write_text(json.dumps({"image_id": 1, "caption": "A horse stands."}) + "\n")
    refs.write_text(json.dumps({"image_id": 1, "caption": "A brown horse stands."}) + "\n")
    with FakeOpenAIServer() as srv:
        code = main([str(a) for a in ["audit", "factuality", caps, "--evidence",
                                      "reference-captions", "--reference", refs, "--judge-url",
                                      srv.base_url, "--api-key-env", "JUDGE_KEY", "--n-boot",
                                      10, "--db", tmp_path / "j.duckdb"]])
    assert code == 0
    assert list(cwd.iterdir()) == []                      # was: ./.capaudit_cache/judge.sqlite
    assert (cache / "judge.sqlite").is_file()
