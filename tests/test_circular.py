"""#34.3: a metric scored with the evidence a filter of the set's lineage used is ``circular``
in every output (terminal, JSON, report, store, leaderboard), whatever its value, with the
independent score beside it. The cases are the issue's: the LLaVA GPT-4 answers and the 890
ShareGPT4V captions filtered with the CHAIR ground truth. The independent score is checked
against an audit that takes the instance categories as its CHAIR ground truth outright, and
the coverage by a plain count of the files."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from capaudit.cli.main import main

LLAVA = ("data", "real", "llava_coco2014_val_gpt4_qa_30x3.jsonl")
SG4V = ("data", "enriched", "sharegpt4v_gpt4v_coco2017_890.json")
GT = ("data", "coco2014", "chair_objects_trainval2014.jsonl")
INSTANCES = ("data", "coco2014", "instance_categories_val2014.jsonl")


@pytest.fixture(scope="module")
def annotated(tmp_path_factory):
    from tests.conftest import shared_path

    path = str(tmp_path_factory.mktemp("annotated") / "c.duckdb")
    for kind, parts in (("chair-gt", GT), ("instances", INSTANCES)):
        assert main(["annotations", "add", kind, str(shared_path(*parts)), "--db", path]) == 0
    return path


@pytest.fixture
def db(annotated, tmp_path):
    """A store with the CHAIR ground truth and the instance categories (a copy per test)."""
    import shutil

    return str(shutil.copy(annotated, tmp_path / "c.duckdb"))


def _filtered(shared, db, name, source, out, *extra):
    assert main(["sets", "add", name, str(shared(*source)), "--db", db]) == 0
    assert main(["filter", "run", name, "--filter", "hallucination", "--evidence", "chair-gt",
                 "--out", out, *extra, "--db", db]) == 0


def _compare(db, tmp_path, capsys, *sets, metrics="chair_s,chair_i"):
    rep = tmp_path / "rep"
    capsys.readouterr()
    assert main(["audit", "compare", *sets, "--metrics", metrics, "--n-boot", "100",
                 "--report", str(rep), "--db", db]) == 0
    out = " ".join(capsys.readouterr().out.split())
    return json.loads((rep / "metrics.json").read_text())["sets"], out, rep


def _instances_as_gt(shared, path):
    """The instance categories written as a CHAIR ground truth file."""
    with open(shared(*INSTANCES), encoding="utf-8") as src, open(path, "w") as dst:
        for line in src:
            r = json.loads(line)
            dst.write(json.dumps({"image_id": r["image_id"], "objects": r["categories"]}) + "\n")
    return path


def test_llava_cg_is_circular_everywhere_with_its_independent_score(shared, db, tmp_path,
                                                                    capsys):
    _filtered(shared, db, "llava", LLAVA, "llava_cg")
    sets, out, rep = _compare(db, tmp_path, capsys, "llava", "llava_cg")
    assert sets["llava"]["chair_s"]["status"] == "ok"   # the parent was never filtered
    sha = hashlib.sha256(shared(*GT).read_bytes()).hexdigest()
    for m in ("chair_s", "chair_i"):
        r = sets["llava_cg"][m]
        assert r["status"] == "circular"
        assert f"CHAIR ground truth (sha256 {sha[:12]})" in r["notes"][0]
    # terminal (the cell and the note) and report say it too; the value is never ranked
    assert "(circular; independent:" in out and "llava_cg CHAIR_s: circular:" in out
    md = (rep / "report.md").read_text()
    assert "llava_cg CHAIR_s: circular: scored with the CHAIR ground truth" in md
    full = json.loads((rep / "metrics.json").read_text())
    assert {(f["set"], f["metric"]) for f in full["flags"]} == \
        {("llava_cg", "chair_s"), ("llava_cg", "chair_i")}           # flagged: never ranked
    assert "llava_cg" not in full["best"].values() and "llava_cg" not in full["worst"].values()
    # the independent score is CHAIR with the instance categories as its ground truth
    gt = _instances_as_gt(shared, tmp_path / "inst_gt.jsonl")
    for name in ("llava_cg", "llava"):
        js = tmp_path / f"{name}.json"
        assert main(["audit", "run", name, "--metrics", "chair_s,chair_i", "--chair-gt",
                     str(gt), "--n-boot", "100", "--json", str(js), "--db", db]) == 0
    own = json.loads((tmp_path / "llava_cg.json").read_text())["sets"]["llava_cg"]
    parent = json.loads((tmp_path / "llava.json").read_text())["sets"]["llava"]
    for m in ("chair_s", "chair_i"):
        ind = sets["llava_cg"][m]["independent"]
        assert own[m]["status"] == "ok"            # other evidence: a measurement
        assert ind["value"] == pytest.approx(own[m]["value"])
        assert ind["n_images"] == own[m]["n_images"] == 30 and ind["status"] == "ok"
        assert ind["before"]["value"] == pytest.approx(parent[m]["value"])
        assert ind["before"]["set"] == "llava"
    # the store holds the status and the independent score with the value
    import capaudit

    rows = capaudit.open(db).query(
        "SELECT metric, extra->>'status', CAST(extra->'independent'->>'value' AS DOUBLE) "
        "FROM metrics WHERE set_name = 'llava_cg' AND run_id = (SELECT min(run_id) FROM "
        "metrics WHERE set_name = 'llava_cg') ORDER BY metric").rows
    assert [(m, s) for m, s, _ in rows if m.startswith("chair")] == \
        [("chair_i", "circular"), ("chair_s", "circular")]
    assert all(v is not None for m, _, v in rows if m.startswith("chair"))


def test_sharegpt4v_890_filtered_with_the_ground_truth_is_circular(shared, db, tmp_path,
                                                                   capsys):
    _filtered(shared, db, "s890", SG4V, "s890_cg")
    sets, out, _ = _compare(db, tmp_path, capsys, "s890", "s890_cg", metrics="chair_s")
    r = sets["s890_cg"]["chair_s"]
    assert r["status"] == "circular" and sets["s890"]["chair_s"]["status"] == "ok"
    # the instance categories cover only some of these train2017 images: counted here
    ids = {int(re.search(r"(\d+)\.jpg$", rec["image"]).group(1))
           for rec in json.loads(shared(*SG4V).read_text())}
    covered = {json.loads(line)["image_id"] for line in open(shared(*INSTANCES))} & ids
    ind = r["independent"]
    assert ind["n_images"] == len(covered) < len(ids) == 890
    assert ind["status"] == f"partial: {len(covered):,} of 890 images"
    assert ind["before"]["n_images"] == len(covered)
    assert ind["value"] < ind["before"]["value"]   # the filter's gain, measured independently
    assert f"n={len(covered)}" in out


def test_identity_not_name_decides(shared, db, tmp_path, capsys):
    """Filtered with another CHAIR ground truth file (same kind, other content): the stored
    one scores it independently, no circular status. The lineage records the file's sha256."""
    other = tmp_path / "gt_other.jsonl"
    lines = shared(*GT).read_text().splitlines()
    other.write_text("\n".join(lines[1:]) + "\n")     # one image less: other content
    assert main(["sets", "add", "llava", str(shared(*LLAVA)), "--db", db]) == 0
    assert main(["filter", "run", "llava", "--filter", "hallucination", "--evidence",
                 "chair-gt", "--chair-gt", str(other), "--out", "llava_o", "--db", db]) == 0
    import capaudit

    opts = next(s.options for s in capaudit.open(db).sets() if s.name == "llava_o")
    assert opts["evidence_sha256"] == hashlib.sha256(other.read_bytes()).hexdigest()
    sets, _, _ = _compare(db, tmp_path, capsys, "llava", "llava_o", metrics="chair_s")
    assert sets["llava_o"]["chair_s"]["status"] == "ok"
    # the same file given on the command line is the filter's evidence again
    rep = tmp_path / "rep2"
    assert main(["audit", "compare", "llava", "llava_o", "--metrics", "chair_s", "--chair-gt",
                 str(other), "--n-boot", "50", "--report", str(rep), "--db", db]) == 0
    got = json.loads((rep / "metrics.json").read_text())["sets"]["llava_o"]["chair_s"]
    assert got["status"] == "circular"


def test_a_descendant_and_an_older_lineage_are_circular_too(shared, db, tmp_path, capsys):
    _filtered(shared, db, "llava", LLAVA, "llava_cg")
    assert main(["filter", "run", "llava_cg", "--filter", "gender-neutral", "--when", "always",
                 "--out", "llava_cg_n", "--db", db]) == 0
    js = tmp_path / "r.json"
    assert main(["audit", "run", "llava_cg_n", "--metrics", "chair_s", "--n-boot", "50",
                 "--json", str(js), "--db", db]) == 0
    r = json.loads(js.read_text())["sets"]["llava_cg_n"]["chair_s"]
    assert r["status"] == "circular" and "filter of 'llava_cg'" in r["notes"][0]
    # a store written before the identity was recorded: matched by the stored source's sha
    import capaudit

    with capaudit.open(db)._open() as store:
        store.con.execute("UPDATE caption_sets SET options = json_object('filter', "
                          "'hallucination', 'evidence', 'chair-gt', 'evidence_source', "
                          "'store:chair-gt') WHERE name = 'llava_cg'")
    assert main(["audit", "run", "llava_cg", "--metrics", "chair_s", "--n-boot", "50",
                 "--json", str(js), "--db", db]) == 0
    assert json.loads(js.read_text())["sets"]["llava_cg"]["chair_s"]["status"] == "circular"


def test_leaderboard_shows_circular_and_ranks_nothing_on_it(shared, db, tmp_path, capsys):
    _filtered(shared, db, "llava", LLAVA, "llava_cg")
    md = tmp_path / "lb.md"
    assert main(["audit", "leaderboard", "llava", "llava_cg", "--metrics", "chair_s,length",
                 "--n-boot", "50", "--markdown", str(md), "--db", db]) == 0
    text = md.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| chair_s"))
    assert "(not averaged)" in row and row.count("circular; independent:") == 1
    assert "dropped from the average: chair_s (circular for llava_cg" in text
