"""``audit leaderboard --all-images``: each set's values on its own images, with n and status,
and nothing ranked (issue 46: sets of two datasets were only refused, the user sent to
``audit compare --all-images``). Every view says "not ranked: different images".

Fixtures as test_foreign_ids builds them: nic's captions of 40 val2014 images (declared
coco2014) and VizWiz results of 100 images (declared vizwiz), 40 of whose ids are the same
numbers. The VizWiz captions are five sentences repeated: 26 distinct words between them
(a person holding a can of soup in a kitchen / blurry photo keyboard / the label medicine
bottle on table / hand remote control / white mug wooden desk with dog), counted by hand.
"""

from __future__ import annotations

import json

import pytest

from test_foreign_ids import _files, _run
from test_leaderboard_status import chromium, open_page

VOCAB = ["--metrics", "vocab", "--n-boot", "50"]
NOT_RANKED = ("not ranked: different images (the sets are images of different datasets "
              "(coco2014, vizwiz))")


def _store(shared, tmp_path, capsys) -> str:
    vz, nic = _files(shared, tmp_path, 40, 60)
    db = str(tmp_path / "s.duckdb")
    for name, path, ns in (("nic", nic, "coco2014"), ("vz", vz, "vizwiz")):
        assert _run(capsys, "sets", "add", name, str(path), "--namespace", ns,
                    "--db", db)[0] == 0
    return db


def _board(capsys, tmp_path, db, *args):
    out = [str(tmp_path / "lb.json"), str(tmp_path / "lb.md"), str(tmp_path / "page")]
    got = _run(capsys, "audit", "leaderboard", *args, *VOCAB, "--json", out[0],
               "--markdown", out[1], "--html", out[2], "--db", db)
    return got, (json.loads((tmp_path / "lb.json").read_text())["leaderboard"]
                 if got[0] == 0 else None)


def test_sets_of_two_datasets_each_on_its_own_images(shared, tmp_path, capsys):
    db = _store(shared, tmp_path, capsys)
    (code, _, err), _ = _board(capsys, tmp_path, db, "nic", "vz")
    assert code == 2 and err.endswith("(fix: rank sets of one dataset; --all-images shows "
                                      "each set on its own images, unranked)")
    (code, out, err), lb = _board(capsys, tmp_path, db, "nic", "vz", "--all-images")
    assert code == 0, err
    k = [c["name"] for c in lb["columns"]].index("vocab")
    assert lb["sets"] == ["nic", "vz"] and lb["values"][1][k] == 26.0   # by hand, above
    assert [row[k] for row in lb["n"]] == [40, 100]              # each on its own images
    assert [row[k] for row in lb["status"]] == ["ok", "ok"]
    assert lb["profiles"] == {} and lb["meta"]["unranked"] == NOT_RANKED
    assert lb["notes"][0] == NOT_RANKED
    md = (tmp_path / "lb.md").read_text()
    assert f"**{NOT_RANKED}**: each set's values on its own images" in md
    assert "| profile |" not in md and "Ranks:" not in md
    assert "| vocab ↑ | complexity | " in md and "26 [26, 26] n=100" in md
    assert "each set on its own images" in out and NOT_RANKED in out
    assert "N-avg" not in out and "rank" not in out.split(NOT_RANKED)[0]
    # nothing averaged, so no "dropped from the average" notes (the ranked board has them)
    assert "from the average" not in out and not any("average" in n for n in lb["notes"])
    assert "from the average" not in md
    code, out, _ = _run(capsys, "query", "SELECT count(*) AS n FROM metrics WHERE grp LIKE "
                        "'leaderboard:%'", "--db", db)
    assert code == 0 and " 0 " in f" {out} "                     # no N-avg stored


def test_all_images_ranks_sets_of_one_dataset_neither(shared, tmp_path, capsys):
    """Asked for, --all-images ranks nothing even where a ranking could be made."""
    db = _store(shared, tmp_path, capsys)
    (code, _, _), lb = _board(capsys, tmp_path, db, "nic", str(tmp_path / "nic.jsonl"),
                              "--all-images")
    assert code == 0 and lb["profiles"] == {}
    assert lb["meta"]["unranked"] == ("not ranked: different images (--all-images: each set "
                                      "on its own images, which need not be the others')")
    (code, out, _), lb = _board(capsys, tmp_path, db, "nic", str(tmp_path / "nic.jsonl"))
    assert code == 0 and lb["profiles"] and lb["meta"]["unranked"] is None
    # ranked, the averaging notes stay: chair_s was not asked for, so no N-avg uses it
    assert "note: dropped from the average: " in out and "chair_s" in out


@pytest.mark.browser
@pytest.mark.slow
def test_page_ranks_nothing(shared, tmp_path, capsys):
    browser = chromium()
    db = _store(shared, tmp_path, capsys)
    (code, _, err), _ = _board(capsys, tmp_path, db, "nic", "vz", "--all-images")
    assert code == 0, err
    with open_page(browser, tmp_path / "page" / "index.html") as page:
        heads = page.eval_on_selector_all("#board thead th", "hs => hs.map(h => h.textContent)")
        cells = page.eval_on_selector_all("#board tbody tr", "rs => rs.map(r => r.innerText)")
        said = page.eval_on_selector("#unranked", "e => e.hidden ? '' : e.textContent")
        hidden = page.eval_on_selector_all("#profilebar, #ranking, #method",
                                           "es => es.map(e => e.hidden)")
        notes = page.eval_on_selector_all("#notes li", "ls => ls.map(l => l.textContent)")
    assert heads == ["set", "vocab ↑"]
    assert said.startswith(NOT_RANKED) and hidden == [True, True, True]
    assert notes and not any(NOT_RANKED in n for n in notes)   # said once, in its box
    assert any("26" in c and "n=100" in c for c in cells)


if __name__ == "__main__":
    pytest.main([__file__])
