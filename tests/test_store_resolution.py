"""``demo`` and ``audit lic`` find their store the way every command does (--db, else
$CAPAUDIT_DB, else the default), and the demo never replaces a store that holds real sets."""

from __future__ import annotations

import json

from capaudit.cli.common import DB_ENV, db_path
from capaudit.cli.main import main
from capaudit.demo import DEMO_DIR, build_demo


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


def test_audit_lic_opens_its_store_once_through_capaudit_db(tmp_path, monkeypatch, capsys):
    import capaudit.audit.lic.runner as lic_runner
    from capaudit.store import Store

    db = tmp_path / "demo.duckdb"
    build_demo(db, run_audit=False)["store"].close()
    opened, seen = [], {}
    init = Store.__init__

    def counting_init(self, path, *a, **k):
        opened.append(str(path))
        init(self, path, *a, **k)

    def fake_run_lic(model, labels, human, **kw):
        seen.update(model=model, labels=labels, human=human, cache=kw["cache"])
        seeds = {int(s): 50.0 for s in kw["seeds"]}
        one = {"value": 50.0, "std": 0.0, "seeds": seeds}
        return {"lic_m": one, "lic_d": one, "lic": {**one, "value": 0.0},
                "n_images": len(model), "config": {}}

    monkeypatch.setattr(Store, "__init__", counting_init)
    monkeypatch.setattr(lic_runner, "run_lic", fake_run_lic)
    monkeypatch.setenv(DB_ENV, str(db))
    assert main(["audit", "lic", "oscar", "--reference", "coco", "--seeds", "2"]) == 0, \
        capsys.readouterr().err
    assert opened == [str(db)]  # labels, both set names and the cache: one open
    assert seen["cache"] is not None and seen["human"]
    assert set(seen["labels"].values()) == {"male", "female"}  # the stored demographics
