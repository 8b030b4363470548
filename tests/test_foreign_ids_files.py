"""Caption files given to ``audit compare`` / ``audit leaderboard`` (not stored sets) are
judged by namespace as stored sets are (issue 46, point 1, the part left after
tests/test_foreign_ids_join.py).

A file's namespace is what ``sets add`` would give it: ``COCO_val2014_...jpg`` image names
(the way LLaVA's released COCO files name their images) and CHAIR's own output are coco2014,
a VizWiz results file (``[{"image_id": int, "caption": str}]``) is bare numbers, unassigned.
The fixtures are test_foreign_ids': VizWiz results of 40 ids that nic's val2014 captions also
use and 60 that no COCO 2014 image has; nic's captions of the 40.
"""

from __future__ import annotations

import json

import pytest

from test_foreign_ids import _files, _run

LENGTH = ["--metrics", "length,vocab", "--n-boot", "50"]


def _coco_named(tmp_path, bare):
    """nic's captions of the 40 images, each image named by its COCO file name."""
    named = tmp_path / "nic_names.jsonl"
    named.write_text("".join(
        json.dumps({"image": f"COCO_val2014_{r['image_id']:012d}.jpg", "caption": r["caption"]})
        + "\n" for r in map(json.loads, bare.read_text().splitlines())))
    return named


def _compare(capsys, tmp_path, db, *args):
    return _run(capsys, "audit", "compare", *map(str, args), *LENGTH,
                "--report", str(tmp_path / "r"), "--db", db)


def test_a_file_of_unassigned_ids_beside_a_coco_file(shared, tmp_path, capsys):
    vz, bare = _files(shared, tmp_path, 40, 60)
    named = _coco_named(tmp_path, bare)
    db = str(tmp_path / "s.duckdb")
    code, out, err = _compare(capsys, tmp_path, db, named, vz)
    # before: "compared on the 40 images all 2 sets share", exit 0
    assert code == 2 and "compared on" not in out
    assert err == (f"capaudit: error: only 40 of the 100 images of '{vz}' (40.0%, below 50%) "
                   f"are images of {named} (coco2014) or its annotations: its ids are "
                   "unassigned (bare numbers), and so few matches are no evidence that they "
                   "are the same images (fix: register the file with the dataset of its images "
                   f"and compare the set: capaudit sets add vizwiz_val_results {vz} --namespace "
                   "coco2014 if they are coco2014 images, or --namespace vizwiz, nocaps, ... if "
                   "not; compare sets of one dataset; --all-images shows each set on its own "
                   "images, unranked)")
    code, out, _ = _compare(capsys, tmp_path, db, named, vz, "--all-images")
    assert code == 0 and "each set scored on all its own images (--all-images;" in out
    assert "Vocab not ranked: " in out   # the file's path, then why (the path may wrap)
    assert "ids unassigned, not shown to be coco2014 images" in out.split("Vocab not ranked")[1]
    assert out.count("(best)") == 1 and out.count("(worst)") == 1   # the title's legend only
    code, out, err = _run(capsys, "audit", "leaderboard", str(named), str(vz), *LENGTH,
                          "--db", db)
    assert code == 2 and "N-avg" not in out
    assert f"only 40 of the 100 images of '{vz}' (40.0%, below 50%)" in err
    assert "--namespace vizwiz, nocaps, ... if not; rank sets of one dataset" in err


def test_a_file_beside_a_set_of_another_dataset(shared, tmp_path, capsys):
    vz, bare = _files(shared, tmp_path, 40, 60)
    named = _coco_named(tmp_path, bare)
    db = str(tmp_path / "s.duckdb")
    assert _run(capsys, "sets", "add", "vz", str(vz), "--namespace", "vizwiz", "--db", db)[0] == 0
    code, out, err = _compare(capsys, tmp_path, db, named, "vz")
    assert code == 2 and "compared on" not in out    # before: joined on the 40 equal ids
    assert err == (f"capaudit: error: the sets are images of different datasets ({named}: "
                   "coco2014, vz: vizwiz): an id names another image in each, so they share "
                   "no images (fix: compare sets of one dataset; --all-images shows each set "
                   "on its own images, unranked)")
    # CHAIR's own output (a real one) is coco2014 images
    chair = shared("references", "chair_maxlinn_example", "reference_outputs.json")
    code, out, err = _compare(capsys, tmp_path, db, "vz", chair)
    assert code == 2 and f"(vz: vizwiz, {chair}: coco2014)" in err
    code, out, err = _run(capsys, "audit", "leaderboard", "vz", str(named), *LENGTH, "--db", db)
    assert code == 2 and "the sets are images of different datasets" in err


def test_files_whose_ids_may_join_still_join(shared, tmp_path, capsys):
    """A file of bare numbers all of which are the COCO file's images; two files of bare
    numbers: joined as before (the user's own ids)."""
    vz, bare = _files(shared, tmp_path, 40, 60)
    named = _coco_named(tmp_path, bare)
    db = str(tmp_path / "s.duckdb")
    for a, b in ((named, bare), (bare, vz)):
        code, out, _ = _compare(capsys, tmp_path, db, a, b)
        assert code == 0 and "compared on the 40 images all 2 sets share" in out


if __name__ == "__main__":
    pytest.main([__file__])
