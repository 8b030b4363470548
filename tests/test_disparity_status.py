"""A gap whose smaller group has under ``--min-n`` images is ``too-few`` in every view (#21):
the ``audit disparity`` table and JSON, the store's rows, and ``audit compare --disparity``'s
terminal table and report. On 400 nic and oscar captions of COCO val2014 images."""

from __future__ import annotations

import json

from capaudit.cli.main import main

COCO = ("instance_categories_val2014.jsonl", "chair_objects_trainval2014.jsonl",
        "demographics_val2014.jsonl")


def _files(shared, tmp_path):
    nic_rows = [json.loads(line) for _, line in
                zip(range(400), shared("data", "captioners", "nic_val2014_gender.jsonl").open())]
    ids = {r["image_id"] for r in nic_rows}
    oscar_rows = [r for r in map(json.loads, shared("data", "captioners",
                                                    "oscar_val2014_gender.jsonl").open())
                  if r["image_id"] in ids]
    out = []
    for name, rows in (("nic", nic_rows), ("oscar", oscar_rows)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        out.append(path)
    tones: dict = {}
    for line in shared("data", "coco2014", COCO[2]).open():
        d = json.loads(line)
        if d["image_id"] in ids:
            tones[d["skin_tone"]] = tones.get(d["skin_tone"], 0) + 1
    return out, tones


def _ann(shared) -> list[str]:
    coco = shared("data", "coco2014")
    return ["--instances", str(coco / COCO[0]), "--chair-gt", str(coco / COCO[1]),
            "--demographics", str(coco / COCO[2])]


def test_disparity_gap_on_too_few_images_is_too_few(shared, tmp_path, capsys):
    (nic, _), tones = _files(shared, tmp_path)
    dark, light = tones["dark"], tones["light"]          # 31 and 292 of the 400 images
    assert dark < 50 <= light
    db, out = tmp_path / "d.duckdb", tmp_path / "d.json"
    capsys.readouterr()
    assert main(["audit", "disparity", str(nic), "--by", "skin_tone", "--metrics", "recall",
                 "--n-boot", "50", "--min-n", "50", "--json", str(out), *_ann(shared),
                 "--db", str(db)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    recall = json.loads(out.read_text())["sets"]["nic"]["metrics"]["recall"]
    note = f"too few: {dark:,} images (under --min-n 50)"
    assert recall["light-dark"]["n_images"] == dark
    assert recall["light-dark"]["status"] == "too-few" and recall["light-dark"]["notes"] == [note]
    assert recall["dark"]["status"] == "too-few" and recall["light"]["status"] == "ok"
    assert "(too-few)" in text
    from capaudit.store import Store

    with Store(db) as st:
        extra = st.sql("SELECT extra FROM metrics WHERE metric = 'recall' "
                       "AND grp = 'skin_tone:light-dark'")[0][0]
    assert json.loads(extra)["status"] == "too-few" and json.loads(extra)["n_images"] == dark


def test_compare_disparity_marks_too_few_in_terminal_and_report(shared, tmp_path, capsys):
    (nic, oscar), tones = _files(shared, tmp_path)
    db = str(tmp_path / "c.duckdb")
    for path in (nic, oscar):
        assert main(["sets", "add", path.stem, str(path), "--db", db]) == 0
    capsys.readouterr()
    assert main(["audit", "compare", "nic", "oscar", "--metrics", "recall",
                 "--disparity", "gender,skin_tone", "--n-boot", "50", "--min-n", "50",
                 "--report", str(tmp_path / "rep"), *_ann(shared), "--db", db]) == 0
    out = capsys.readouterr().out
    md = (tmp_path / "rep" / "report.md").read_text()
    gaps = md.split("## Gaps between groups of images")[1].split("\n## ")[0]
    row = next(line for line in gaps.splitlines() if line.startswith("| nic | recall |"))
    gender, skin = [c.strip() for c in row.strip().strip("|").split("|")[2:]]
    assert skin.endswith(f"n={tones['dark']:,} (too-few)")
    assert "too-few" not in gender          # the smaller gender group has over 50 images
    assert "(too-few)" in out and max(map(len, out.splitlines())) <= 80
