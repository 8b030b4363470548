"""``demo`` and ``audit lic`` find their store the way every command does (--db, else
$CAPAUDIT_DB, else the default), and the demo never replaces a store that holds real sets."""

from __future__ import annotations

import json

from capaudit.cli.common import DB_ENV, db_path
from capaudit.cli.main import main
from capaudit.cli.query import DEMO_DIR, build_demo


def test_db_path_order(tmp_path, monkeypatch):
    monkeypatch.delenv(DB_ENV, raising=False)
    assert db_path(None, default="d.duckdb").name == "d.duckdb"
    monkeypatch.setenv(DB_ENV, str(tmp_path / "env.duckdb"))
    assert db_path(None, default="d.duckdb") == tmp_path / "env.duckdb"
    assert db_path(tmp_path / "flag.duckdb") == tmp_path / "flag.duckdb"


def test_demo_refuses_a_store_with_other_sets(tmp_path, monkeypatch, capsys):
    real = tmp_path / "real.duckdb"
    cap = tmp_path / "mine.jsonl"
    cap.write_text(json.dumps({"image_id": 1, "caption": "a dog on a sofa"}) + "\n")
    assert main(["sets", "add", "mine", str(cap), "--db", str(real)]) == 0
    before = real.stat().st_size
    monkeypatch.setenv(DB_ENV, str(real))  # the demo takes $CAPAUDIT_DB ...
    capsys.readouterr()
    assert main(["demo", "--report", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err
    assert "mine" in err and "--db" in err  # ... but does not wipe a real store
    assert real.exists() and real.stat().st_size == before
    assert main(["sets", "show", "mine", "--db", str(real)]) == 0


def test_demo_store_is_rebuilt_in_place(tmp_path):
    db = tmp_path / "demo.duckdb"
    first = build_demo(db, run_audit=False)["store"]
    assert all(str(s.source_path).startswith(str(DEMO_DIR)) for s in first.list_sets())
    first.close()
    again = build_demo(db, run_audit=False)["store"]  # a demo store may be replaced
    assert sorted(s.name for s in again.list_sets()) == ["coco", "nic", "oscar"]
    again.close()


def test_demo_refuses_a_file_that_is_not_a_store(tmp_path, monkeypatch, capsys):
    junk = tmp_path / "notes.duckdb"
    junk.write_text("my notes")
    assert main(["demo", "--db", str(junk), "--report", str(tmp_path / "rep")]) == 2
    assert junk.read_text() == "my notes"
