"""Every value carries its n and status, and nothing is ranked that the data cannot rank
(#21), on real files: LLaVA's detailed answers (30 COCO val2014 images, 6 of them
gender-labelled) against captioners over 10,780 labelled images; human COCO captions of
which only 30 of 100 images have CHAIR ground truth, audited with --allow-partial.
"""

from __future__ import annotations

import json

import pytest

from capaudit.cli.main import main


def _llava_detail(shared, path):
    rows = [json.loads(line) for line in
            shared("data", "real", "llava_coco2014_val_gpt4_qa_30x3.jsonl").open()]
    detail = [{"image_id": int(r["id"]), "caption": r["output"]} for r in rows
              if r["type"] == "detail"]
    path.write_text("".join(json.dumps(r) + "\n" for r in detail))
    return path, {r["image_id"] for r in detail}


def _gendered(shared, ids) -> int:
    demo = shared("data", "coco2014", "demographics_val2014.jsonl")
    return sum(1 for r in map(json.loads, demo.open())
               if r["image_id"] in ids and r["gender"] in ("male", "female"))


@pytest.fixture
def db(shared, tmp_path):
    path = str(tmp_path / "s.duckdb")
    for kind, name in (("instances", "instance_categories_val2014.jsonl"),
                       ("chair-gt", "chair_objects_trainval2014.jsonl"),
                       ("demographics", "demographics_val2014.jsonl")):
        assert main(["annotations", "add", kind, str(shared("data", "coco2014", name)),
                     "--db", path]) == 0
    return path


def test_six_labelled_images_are_shown_with_n_and_never_ranked(shared, db, tmp_path, capsys):
    llava, ids = _llava_detail(shared, tmp_path / "llava_detail.jsonl")
    labelled = _gendered(shared, ids)
    assert labelled == 6
    for name in ("nic", "oscar", "sat"):
        assert main(["sets", "add", name, str(shared("data", "captioners",
                                                     f"{name}_val2014_gender.jsonl")),
                     "--db", db]) == 0
    assert main(["sets", "add", "llava_detail", str(llava), "--db", db]) == 0
    rep = tmp_path / "rep"
    capsys.readouterr()
    assert main(["audit", "compare", "llava_detail", "nic", "oscar", "sat", "--all-images",
                 "--n-boot", "100", "--report", str(rep), "--db", db]) == 0
    out = " ".join(capsys.readouterr().out.split())
    m = json.loads((rep / "metrics.json").read_text())
    ge = m["sets"]["llava_detail"]["gender_error"]
    assert ge["value"] == 0.0 and ge["ci"] == [0.0, 0.0]
    assert ge["n_images"] == labelled and ge["status"] == "too-few"
    assert m["sets"]["nic"]["gender_error"]["n_images"] == 10_780
    assert m["sets"]["nic"]["gender_error"]["status"] == "ok"
    assert "gender_error" not in m["best"] and "gender_error" not in m["worst"]
    why = "Gender err not ranked: llava_detail rests on 6 images (under --min-n 30)"
    md = (rep / "report.md").read_text()
    for text in (md, out):
        assert why in text
    assert "| 0.00 [0.00, 0.00] n=6 (too-few) |" in md
    html = (rep / "report.html").read_text()
    assert "<td>0.00 [0.00, 0.00] n=6 (too-few)</td>" in html and why in html
    assert "n=6 " in out and "(too-few)" in out      # the table cell, over four lines
    # the stored row carries them too, and so does the DataFrame of the Python API
    import capaudit
    from capaudit.api import comparison_table
    from capaudit.report.compare import compare_sets

    with capaudit.open(db)._open() as store:
        cmp = compare_sets(store, ["llava_detail", "nic"], {"n_boot": 50, "workers": 1},
                           same_images=False)
        extra = store.one("SELECT extra FROM metrics WHERE set_name = 'llava_detail' AND "
                          "metric = 'gender_error' ORDER BY run_id DESC LIMIT 1")[0]
    assert json.loads(extra)["status"] == "too-few" and json.loads(extra)["n_images"] == 6
    df = comparison_table(cmp).to_pandas()
    row = df[(df["set"] == "llava_detail") & (df["metric"] == "gender_error")].iloc[0]
    assert row["n_images"] == 6 and row["status"] == "too-few"
    # four sets, but they share only the 6 images of llava_detail: no line through them
    assert m["basis"]["shared_images"] == 6
    assert ("chair_s vs recall (no fitted line: 4 sets, 6 shared images; a line needs 4 sets "
            "and 30 shared images)") in md


def _partial_human(shared, path, extra: int = 70, real: int = 30):
    """Human COCO captions (COCO JSON) of ``real`` val2014 images, plus ``extra`` images of
    ids no COCO annotation has: the CHAIR ground truth covers 30 of the 100 images."""
    coco = json.loads(shared("data", "coco2014", "captions_val2014_subset.json").read_text())
    images = coco["images"][:real]
    keep = {im["id"] for im in images}
    anns = [a for a in coco["annotations"] if a["image_id"] in keep]
    fake = [{"id": 900_000 + i, "file_name": f"extra_{i}.jpg"} for i in range(extra)]
    anns += [{"image_id": im["id"], "id": 10_000_000 + i, "caption": "A dog on a sofa."}
             for i, im in enumerate(fake)]
    path.write_text(json.dumps({"images": images + fake, "annotations": anns}))
    return path


def _compare_partial(shared, db, tmp_path, capsys, metrics: str, **sizes):
    """``audit compare human_part nic --allow-partial`` with a report: (terminal text, folder)."""
    human = _partial_human(shared, tmp_path / "human_part.json", **sizes)
    assert main(["sets", "add", "human_part", str(human), "--db", db]) == 0
    assert main(["sets", "add", "nic", str(shared("data", "captioners",
                                                  "nic_val2014_gender.jsonl")), "--db", db]) == 0
    rep = tmp_path / "rep"
    capsys.readouterr()
    assert main(["audit", "compare", "human_part", "nic", "--all-images", "--allow-partial",
                 "--metrics", metrics, "--n-boot", "50", "--report", str(rep),
                 "--db", db]) == 0
    return " ".join(capsys.readouterr().out.split()), rep


def test_partial_chair_is_partial_everywhere_never_by_construction(shared, db, tmp_path,
                                                                    capsys):
    out, rep = _compare_partial(shared, db, tmp_path, capsys, "chair_s,length")
    m = json.loads((rep / "metrics.json").read_text())
    cs = m["sets"]["human_part"]["chair_s"]
    assert cs["status"] == "partial" and "partial: 30 of 100 images" in cs["notes"]
    assert cs["coverage"] == {"chair_gt": 0.3} and cs["n_images"] == 30
    assert not m["flags"]                       # the ground truth does not cover the set
    md = (rep / "report.md").read_text()
    for text in (md, out):
        assert "by construction" not in text
        assert "human_part CHAIR_s: partial: 30 of 100 images" in text
    assert "(partial: 30 of 100 images)" in md
    # length reads no annotation: a full-set value
    assert m["sets"]["human_part"]["length"]["status"] == "ok"


def test_partial_and_too_few_both_shown(shared, db, tmp_path, capsys):
    """20 of 100 images covered: too-few is the headline status (never ranked), and the
    partial coverage still shows in the cell, the JSON, the notes and the DataFrame."""
    out, rep = _compare_partial(shared, db, tmp_path, capsys, "chair_s", extra=80, real=20)
    cs = json.loads((rep / "metrics.json").read_text())["sets"]["human_part"]["chair_s"]
    assert cs["status"] == "partial; too-few" and cs["n_images"] == 20
    md = (rep / "report.md").read_text()
    assert "n=20 (partial: 20 of 100 images; too-few) |" in md
    assert "(partial: 20 of 100 images; too-few)" in out
    assert "by construction" not in md + out
    import capaudit
    from capaudit.api import comparison_table
    from capaudit.report.compare import compare_sets

    with capaudit.open(db)._open() as store:
        cmp = compare_sets(store, ["human_part", "nic"], {"n_boot": 20, "workers": 1,
                                                          "allow_partial": True},
                           same_images=False)
    df = comparison_table(cmp).to_pandas()
    row = df[(df["set"] == "human_part") & (df["metric"] == "chair_s")].iloc[0]
    assert row["n_images"] == 20 and row["status"] == "partial; too-few"


def test_by_construction_is_said_by_audit_run_too(shared, db, tmp_path, capsys):
    """Fully covered human COCO captions: CHAIR is 0 by construction, and ``audit run`` (the
    JSON, the table, the notes) says so as compare does; it is no longer compare's alone."""
    human = _partial_human(shared, tmp_path / "human.json", extra=0)
    js = tmp_path / "run.json"
    capsys.readouterr()
    assert main(["audit", "run", str(human), "--metrics", "chair_s,length", "--n-boot", "20",
                 "--json", str(js), "--db", db]) == 0
    out = " ".join(capsys.readouterr().out.split())
    cs = json.loads(js.read_text())["sets"]["human"]["chair_s"]
    assert cs["value"] == 0.0 and cs["status"] == "by-construction"
    assert "CHAIR ground truth includes the objects parsed from these human captions" in out


def test_a_filtered_set_is_circular_whatever_its_value(shared, db, tmp_path, capsys):
    """nic filtered with the CHAIR ground truth and scored with it: CHAIR_s is ``circular``
    in both modes (0 in reference mode, > 0 corrected: the value does not decide it), never
    ``by-construction`` (that is for the human captions the ground truth was built from)."""
    nic = tmp_path / "nic.jsonl"
    nic.write_text("".join(line for _, line in zip(range(300), shared(
        "data", "captioners", "nic_val2014_gender.jsonl").open())))
    assert main(["sets", "add", "nic", str(nic), "--db", db]) == 0
    assert main(["filter", "run", "nic", "--filter", "hallucination", "--evidence", "chair-gt",
                 "--object-mode", "reference", "--non-visual", "judge", "--out", "nic_gt",
                 "--db", db]) == 0
    rep = tmp_path / "rep"
    capsys.readouterr()
    assert main(["audit", "compare", "nic", "nic_gt", "--metrics", "chair_s", "--corrected",
                 "--n-boot", "50", "--report", str(rep), "--db", db]) == 0
    out = " ".join(capsys.readouterr().out.split())
    m = json.loads((rep / "metrics.json").read_text())["sets"]
    assert m["nic_gt"]["chair_s"]["value"] == 0 and m["nic_gt"]["chair_s"]["status"] == "circular"
    corr = m["nic_gt"]["chair_s_corrected"]
    assert corr["value"] > 0 and corr["status"] == "circular"
    assert m["nic"]["chair_s"]["status"] == "ok"          # the parent was not filtered
    md = (rep / "report.md").read_text()
    for text in (md, out):
        assert "nic_gt CHAIR_s: circular: scored with the CHAIR ground truth" in text
        assert "by construction" not in text
