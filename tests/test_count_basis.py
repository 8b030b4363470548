"""One count, one denominator, one value: the filter's summary and ``audit compare`` (#46, 5).

500 real nic captions of val2014 images, two of them on one image and one under an id no
annotation has, filtered with the CHAIR ground truth and scored independently with the
instance categories. The filter emptied most one-sentence captions. Before: the filter
printed CHAIR_s on its survivors (no count shown) and ``audit compare`` a value on the
parent's captions, while the id without ground truth made the compare guard hide the ids of
every padded (emptied) caption, so recall and CHAIR silently skipped them.
"""

from __future__ import annotations

import json
import re

import pytest

from capaudit.cli.main import main

pytest.importorskip("spacy", reason="the hallucination filter's parse needs the nlp extra")


def _captions(shared, tmp_path):
    rows = [json.loads(line) for _, line in
            zip(range(500), shared("data", "captioners", "nic_val2014_gender.jsonl").open())]
    rows[50] = dict(rows[50], image_id=rows[51]["image_id"])   # two captions of one image
    rows[60] = dict(rows[60], image_id=999_999_999)            # no annotation has this id
    path = tmp_path / "nic500.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_filter_summary_and_compare_print_one_value_on_one_basis(shared, tmp_path, capsys):
    coco = shared("data", "coco2014")
    gt, inst = str(coco / "chair_objects_trainval2014.jsonl"), str(
        coco / "instance_categories_val2014.jsonl")
    db = str(tmp_path / "s.duckdb")
    assert main(["sets", "add", "nic", str(_captions(shared, tmp_path)), "--db", db]) == 0
    capsys.readouterr()
    assert main(["filter", "run", "nic", "--filter", "hallucination", "--chair-gt", gt,
                 "--instances", inst, "--score-evidence", "instances", "--out", "clean",
                 "--db", db]) == 0
    out = " ".join(capsys.readouterr().out.split())
    kept = int(re.search(r"captions 500 in, (\d+) out", out).group(1))
    # 499 captions have instance evidence (498 images); the survivors are the kept ones but
    # the one under id 999999999 (kept: no evidence to judge it)
    m = re.search(r"CHAIR_s ([\d.]+) -> ([\d.]+), .*?; on 499 -> (\d+) captions with evidence",
                  out)
    assert m, out
    before, after, survivors = float(m.group(1)), float(m.group(2)), int(m.group(3))
    assert survivors == kept - 1
    emptied = 499 - survivors
    m = re.search(rf"{emptied} of those 499 captions were emptied by the filter; counted as "
                  r"empty captions, as audit compare nic clean counts them: CHAIR_s "
                  rf"{before:.2f} -> ([\d.]+), ", out)
    assert m, out
    on_parent = float(m.group(1))
    # the same hallucinating captions over all 499: the survivors' rate scaled by hand
    assert on_parent == pytest.approx(after * survivors / 499, abs=0.01)
    assert on_parent < after

    assert main(["audit", "compare", "nic", "clean", "--chair-gt", gt, "--instances", inst,
                 "--metrics", "chair_s,recall", "--n-boot", "50",
                 "--report", str(tmp_path / "r"), "--db", db]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    sets = json.loads((tmp_path / "r" / "metrics.json").read_text())["sets"]
    ind = sets["clean"]["chair_s"]["independent"]
    assert round(ind["value"], 2) == on_parent and ind["before"]["value"] == pytest.approx(
        before, abs=0.005)
    # every emptied caption is scored as an empty caption on its image: the filtered set's
    # recall rests on the parent's 498 annotated images, not on the survivors' only
    assert sets["clean"]["recall"]["n_images"] == sets["nic"]["recall"]["n_images"] == 498
    assert sets["clean"]["recall"]["value"] < sets["nic"]["recall"]["value"]
    assert f"each of the {500 - kept} captions the filter dropped counts as an empty" in shown
    assert f"│ captions │ 500 │ 500 ({500 - kept} empty) │" in shown   # the cell says it too
    assert "clean: 499 images" in shown          # the coverage line counts what is scored
