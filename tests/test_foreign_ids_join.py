"""Ids that are equal numbers but maybe other images, in ``audit leaderboard`` and in
``audit compare`` of an unassigned set (issue 46, point 1, the part left after
tests/test_foreign_ids.py).

The fixtures are those of test_foreign_ids: a VizWiz results file whose ids are 40 numbers that
nic's val2014 captions also use and 60 that no COCO 2014 image has, and nic's captions of the 40.
"""

from __future__ import annotations

import pytest

from test_foreign_ids import _files, _run

LENGTH = ["--metrics", "length,vocab", "--n-boot", "50"]


def _store(shared, tmp_path, capsys, vz_ns: list[str]) -> tuple[str, list]:
    """nic: all 10,780 images of nic's val2014 captions, declared coco2014; vz: the VizWiz
    results (``vz_ns``: its namespace or none)."""
    vz, coco = _files(shared, tmp_path, 40, 60)
    db = str(tmp_path / "s.duckdb")
    nic = shared("data", "captioners", "nic_val2014_gender.jsonl")
    assert _run(capsys, "sets", "add", "nic", str(nic), "--namespace", "coco2014",
                "--db", db)[0] == 0
    assert _run(capsys, "sets", "add", "vz", str(vz), *vz_ns, "--db", db)[0] == 0
    return db, [vz, coco]


def test_leaderboard_refuses_sets_of_two_datasets(shared, tmp_path, capsys):
    db, _ = _store(shared, tmp_path, capsys, ["--namespace", "vizwiz"])
    code, out, err = _run(capsys, "audit", "leaderboard", "nic", "vz", *LENGTH, "--db", db)
    assert code == 2 and "N-avg" not in out
    assert err == ("capaudit: error: the sets are images of different datasets (nic: coco2014, "
                   "vz: vizwiz): an id names another image in each, so they share no images "
                   "(fix: rank sets of one dataset; --all-images shows each set on its own "
                   "images, unranked)")
    code, out, _ = _run(capsys, "query", "SELECT count(*) AS n FROM runs", "--db", db)
    assert code == 0 and " 0 " in f" {out} "                  # nothing stored


def test_compare_refuses_unassigned_ids_beside_a_named_set(shared, tmp_path, capsys):
    db, (vz, _) = _store(shared, tmp_path, capsys, [])       # vz: ids unassigned
    code, out, err = _run(capsys, "audit", "compare", "nic", "vz", *LENGTH,
                          "--report", str(tmp_path / "r"), "--db", db)
    # before: "compared on the 40 images all 2 sets share", exit 0
    assert code == 2 and "compared on" not in out
    assert err == ("capaudit: error: only 40 of the 100 images of 'vz' (40.0%, below 50%) "
                   "are images of nic (coco2014) or its annotations: its ids are unassigned "
                   "(bare numbers), and so few matches are no evidence that they are the same "
                   "images (fix: if they are coco2014 images, say so: capaudit sets add vz FILE "
                   "--namespace coco2014 --replace; compare sets of one dataset; --all-images "
                   "shows each set on its own images, unranked)")
    code, out, _ = _run(capsys, "audit", "compare", "nic", "vz", *LENGTH, "--all-images",
                        "--report", str(tmp_path / "r"), "--db", db)
    assert code == 0 and "each set scored on all its own images (--all-images; vz: ids " \
        "unassigned" in out
    assert "Vocab not ranked: vz: ids unassigned, not shown to be coco2014 images" in out
    assert out.count("(best)") == 1 and out.count("(worst)") == 1   # the title's legend only
    # the leaderboard: the same line, its own fix
    code, _, err = _run(capsys, "audit", "leaderboard", "nic", "vz", *LENGTH, "--db", db)
    assert code == 2 and "only 40 of the 100 images of 'vz' (40.0%, below 50%)" in err
    assert "--namespace coco2014 --replace; rank sets of one dataset" in err
    # the user's word: declared coco2014, the equal ids join as asked
    assert _run(capsys, "sets", "add", "vz", str(vz), "--namespace", "coco2014", "--replace",
                "--db", db)[0] == 0
    code, out, _ = _run(capsys, "audit", "compare", "nic", "vz", *LENGTH,
                        "--report", str(tmp_path / "r"), "--db", db)
    assert code == 0 and "compared on the 40 images all 2 sets share" in out


def test_unassigned_ids_join_where_the_evidence_says_so(shared, tmp_path, capsys):
    """All of an unassigned set's ids are the named set's (nic's 40 images within nic's
    10,780, as the demo's nic and oscar beside its coco): joined as before; two unassigned
    sets join as before too."""
    db, (vz, coco) = _store(shared, tmp_path, capsys, [])
    assert _run(capsys, "sets", "add", "nic_bare", str(coco), "--db", db)[0] == 0
    code, out, _ = _run(capsys, "audit", "compare", "nic", "nic_bare", *LENGTH,
                        "--report", str(tmp_path / "r"), "--db", db)
    assert code == 0 and "compared on the 40 images all 2 sets share" in out
    code, out, _ = _run(capsys, "audit", "compare", "nic_bare", "vz", *LENGTH,
                        "--report", str(tmp_path / "r2"), "--db", db)
    assert code == 0 and "compared on the 40 images all 2 sets share" in out


if __name__ == "__main__":
    pytest.main([__file__])
