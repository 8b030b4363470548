"""``audit compare`` that cannot mislead: common images, equal samples, marks only outside
the noise, circular values flagged, a filtered set on its parent's images, LIC visible,
plots and a terminal table that fit."""

from __future__ import annotations

import json
import re

import pytest

from capaudit.report.compare import Comparison, rank
from capaudit.audit.engine import AuditResult
from capaudit.metrics.base import MetricResult
from capaudit.cli.main import main


def _cmp(values: dict[str, tuple], metric="chair_s") -> Comparison:
    res = {n: AuditResult({metric: MetricResult(v, 100, lo, hi)}, None, None)
           for n, (v, lo, hi) in values.items()}
    return Comparison(list(values), [metric], res)


def test_marks_only_where_intervals_do_not_overlap():
    # lower CHAIR is better; a's interval overlaps b's, c stands apart: c is worst, no best
    cmp = _cmp({"a": (5.0, 4.0, 6.0), "b": (6.5, 5.5, 7.5), "c": (20.0, 18.0, 22.0)})
    rank(cmp)
    assert cmp.best == {} and cmp.worst == {"chair_s": "c"}
    assert cmp.unmarked == {"chair_s": "best"}
    cmp = _cmp({"a": (5.0, 4.0, 5.4), "b": (6.5, 5.5, 7.5), "c": (20.0, 18.0, 22.0)})
    rank(cmp)
    assert cmp.best == {"chair_s": "a"} and cmp.worst == {"chair_s": "c"}
    # a value without an interval is never marked, nor is anything it could overlap
    cmp = _cmp({"a": (5.0, None, None), "b": (20.0, 18.0, 22.0)})
    rank(cmp)
    assert cmp.best == {} and cmp.worst == {}
    # a flagged value takes no part: b vs c decides
    cmp = _cmp({"a": (0.0, 0.0, 0.0), "b": (6.5, 5.5, 7.5), "c": (20.0, 18.0, 22.0)})
    cmp.flags[("a", "chair_s")] = "by construction"
    rank(cmp)
    assert cmp.best == {"chair_s": "b"} and cmp.worst == {"chair_s": "c"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("demo")
    db = tmp / "demo.duckdb"
    assert main(["demo", "--db", str(db), "--report", str(tmp / "rep")]) == 0
    return tmp, str(db)


def _reference_vocab() -> int:
    """coco's vocabulary on all its 5,005 demo captions by the reference's own tokenization,
    NLTK's word tokenizer on the lowercased caption (``preserve_line``: see text/tokenize.py),
    with NLTK itself rather than capaudit's tokenizer."""
    from nltk.tokenize import word_tokenize

    from capaudit.api import demo_file

    captions = [a["caption"] for a in
                json.loads(demo_file("coco_captions.json").read_text())["annotations"]]
    assert len(captions) == 5005
    return len({tok for c in captions for tok in word_tokenize(c.lower(), preserve_line=True)})


def _metrics(rep):
    return json.loads((rep / "metrics.json").read_text())


@pytest.mark.slow
def test_demo_compare_on_shared_images_equal_vocab_and_flags(demo, capsys):
    tmp, db = demo
    rep = tmp / "rep"
    m = _metrics(rep)
    basis = m["basis"]
    assert basis["same_images"] and basis["shared_images"] == 1000
    assert basis["captions"] == {"coco": 5005, "oscar": 1000, "nic": 1000}
    # vocabulary on 1,000 captions per set: coco's 5,005 captions no longer count 5 times over
    assert basis["equal_captions"] == 1000
    coco_vocab = m["sets"]["coco"]["vocab"]
    assert coco_vocab["n"] == 1000
    from capaudit.store import Store
    with Store(db, read_only=True) as st:
        all_caps = st.one("SELECT value FROM metrics WHERE set_name = 'coco' AND metric = "
                          "'vocab' AND grp = 'all'")[0]
    assert all_caps == _reference_vocab() and coco_vocab["value"] < all_caps   # 2,875
    # human captions' CHAIR against a ground truth built from them: flagged, never best
    flagged = {(f["set"], f["metric"]) for f in m["flags"]}
    assert flagged == {("coco", "chair_s"), ("coco", "chair_i")}
    assert m["best"]["chair_s"] == "oscar" and m["worst"]["chair_s"] == "nic"
    md = (rep / "report.md").read_text()
    assert "0.00 [0.00, 0.00] n=1,000 (by construction)" in md and "not computed (use --lic)" in md
    row = next(l for l in md.splitlines() if l.startswith("| coco |"))
    assert "(best)" not in row.split("|")[-3]   # the CHAIR_s cell of coco
    # every mark in the report is outside all other intervals (checked from the numbers)
    for metric, name in m["best"].items():
        lo, hi = m["sets"][name][metric]["ci"]
        for other in m["sets"]:
            if other != name:
                olo, ohi = m["sets"][other][metric]["ci"]
                assert hi < olo or lo > ohi, (metric, name, other)
    # HTML: definitions are plain, only best/worst cells carry their colours
    html = (rep / "report.html").read_text()
    assert html.count("class='best'") == len(m["best"])
    assert html.count("class='worst'") == len(m["worst"])
    assert "<i>chair_s</i>:" in html and "color:green" not in html
    # three sets: error bars but no fitted line (and no R²)
    # coco's human captions are drawn, never fitted (#34.6): 2 captioning sets remain
    assert "R² =" not in md and "no fitted line: 2 sets" in md
    assert "not fitted: coco (human captions)" in md


def _rows(db, name):
    from capaudit.store import Store
    with Store(db, read_only=True) as st:
        t = st.captions(name, "image_id, caption")
    return list(zip(t.column("image_id").to_pylist(), t.column("caption").to_pylist()))


def _write(path, rows):
    path.write_text("".join(json.dumps({"image_id": i, "caption": c}) + "\n" for i, c in rows))
    return str(path)


@pytest.mark.slow
def test_same_images_by_default_and_all_images(demo, tmp_path):
    _, db = demo
    oscar, nic = _rows(db, "oscar"), _rows(db, "nic")
    part = _write(tmp_path / "nic300.jsonl", nic[:300])
    keep = {i for i, _ in nic[:300]}
    oscar300 = _write(tmp_path / "oscar300.jsonl", [r for r in oscar if r[0] in keep])
    common = ["--n-boot", "50", "--db", db]
    assert main(["audit", "compare", "oscar", part, "--report", str(tmp_path / "a"), *common]) == 0
    a = _metrics(tmp_path / "a")
    assert a["basis"]["images"] == {"oscar": 300, "nic300": 300}
    # oscar on the shared images is exactly oscar audited on those images alone
    assert main(["audit", "run", oscar300, "--json", str(tmp_path / "o.json"), *common]) == 0
    alone = json.loads((tmp_path / "o.json").read_text())["sets"]["oscar300"]
    for metric in ("recall", "chair_s", "length", "gender_error"):
        assert a["sets"]["oscar"][metric]["value"] == pytest.approx(alone[metric]["value"]), metric
    # --all-images: each on its own images; vocab then on 300 captions each
    assert main(["audit", "compare", "oscar", part, "--all-images", "--report",
                 str(tmp_path / "b"), *common]) == 0
    b = _metrics(tmp_path / "b")
    assert b["basis"]["images"] == {"oscar": 1000, "nic300": 300}
    assert b["basis"]["equal_captions"] == 300 and b["sets"]["oscar"]["vocab"]["n"] == 300
    # sets that share nothing cannot be forced onto common images
    other = _write(tmp_path / "other.jsonl", [(10**9, "a dog on a couch")])
    assert main(["audit", "compare", "oscar", other, "--same-images", "--report",
                 str(tmp_path / "c"), *common]) == 2


@pytest.mark.slow
def test_filtered_set_is_ranked_on_its_parents_images(demo, tmp_path, capsys):
    _, db = demo
    assert main(["filter", "run", "nic", "--filter", "hallucination", "--evidence", "chair-gt",
                 "--out", "nic_nohal2", "--db", db]) == 0
    assert main(["audit", "run", "nic_nohal2", "nic", "--n-boot", "20", "--json",
                 str(tmp_path / "own.json"), "--db", db]) == 0
    own = json.loads((tmp_path / "own.json").read_text())["sets"]
    rep = tmp_path / "rep"
    capsys.readouterr()
    assert main(["audit", "compare", "nic", "nic_nohal2", "--report", str(rep), "--n-boot", "100",
                 "--db", db]) == 0
    out = capsys.readouterr().out
    m = _metrics(rep)
    assert m["basis"]["on_parent"] == {"nic_nohal2": "nic"}
    got = m["sets"]["nic_nohal2"]["recall"]["value"]
    # dropped captions mention nothing: own recall x own n / parent's n (hand derivation)
    want = own["nic_nohal2"]["recall"]["value"] * own["nic_nohal2"]["recall"]["n"] / \
        own["nic"]["recall"]["n"]
    assert got == pytest.approx(want)
    assert own["nic_nohal2"]["recall"]["value"] > own["nic"]["recall"]["value"] > got
    assert m["best"].get("recall") != "nic_nohal2"
    # cleaned with the CHAIR ground truth, its CHAIR against that ground truth is 0 by
    # construction: flagged, not best
    assert {(f["set"], f["metric"]) for f in m["flags"]} == {("nic_nohal2", "chair_s"),
                                                             ("nic_nohal2", "chair_i")}
    assert m["sets"]["nic_nohal2"]["chair_s"]["value"] == 0.0 and "chair_s" not in m["best"]
    assert "scored on its parent nic's images" in out.replace("\n", " ")


@pytest.mark.slow
def test_terminal_table_fits_80_columns_with_corrected(demo, tmp_path, capsys, monkeypatch):
    _, db = demo
    monkeypatch.setenv("COLUMNS", "80")
    from rich.console import Console

    from capaudit.cli import common
    monkeypatch.setattr(common, "console", Console(width=80))
    assert main(["audit", "compare", "coco", "oscar", "nic", "--corrected", "--n-boot", "20",
                 "--report", str(tmp_path / "r"), "--db", db]) == 0
    out = capsys.readouterr().out
    assert max(len(l) for l in out.splitlines()) <= 80
    assert "CHAIR_s ↓" in out and "CHAIR_s corr. ↓" in out and "not computed" in out


@pytest.mark.slow
def test_four_sets_get_a_fitted_line(demo, tmp_path):
    _, db = demo
    nic = _rows(db, "nic")
    short = _write(tmp_path / "nic_short.jsonl", [(i, " ".join(c.split()[:4])) for i, c in nic])
    rep = tmp_path / "rep"
    assert main(["audit", "compare", "coco", "oscar", "nic", short, "--n-boot", "20", "--report",
                 str(rep), "--db", db]) == 0
    md = (rep / "report.md").read_text()
    # coco holds human captions: drawn, never fitted (#34.6), so 3 captioning sets remain
    assert re.search(r"chair_s vs recall \(no fitted line: 3 sets", md)
    assert re.search(r"gender_error vs recall \(no fitted line: 3 sets, 1,000 shared images; "
                     r"a line needs 4 sets .*not fitted: coco \(human captions\)\)", md)


def test_report_rows_survive_a_pipe_and_markup_in_a_set_name(tmp_path):
    from capaudit.report.basis import Basis
    from capaudit.report.write import _html, _md_table

    name = "[bold red]evil|name"
    cmp = _cmp({"oscar": (5.0, 4.0, 5.4), name: (20.0, 18.0, 22.0)})
    cmp.basis = Basis(True, 10, {"oscar": 10, name: 10}, {"oscar": 10, name: 10},
                      {"oscar": 10, name: 10}, {"oscar": 10, name: 10})
    rank(cmp)
    md = _md_table(cmp)
    html = _html(md, tmp_path)
    row = next(r for r in html.split("<tr>") if "evil" in r)
    # one cell per column: set, captions, images, CHAIR_s
    assert row.count("<td>") == 4 and "<td>[bold red]evil|name</td>" in row
    assert "class='worst'>20.00 [18.00, 22.00] n=100 (worst)" in row


@pytest.mark.slow
def test_rows_of_a_compare_on_part_of_a_set_never_stand_for_the_whole_set(demo, tmp_path):
    # was: amplification read the latest row of each metric from any run, so oscar's recall
    # came from a compare scored on 300 of its 1,000 images
    from capaudit.audit.amplification import stored_results
    from capaudit.store import Store

    _, db = demo
    nic = _rows(db, "nic")
    part = _write(tmp_path / "nic300.jsonl", nic[:300])
    common = ["--n-boot", "20", "--db", db]
    assert main(["audit", "run", "oscar", "--json", str(tmp_path / "w.json"), *common]) == 0
    whole = json.loads((tmp_path / "w.json").read_text())["sets"]["oscar"]
    assert main(["audit", "compare", "oscar", part, "--report", str(tmp_path / "p"), *common]) == 0
    on_part = _metrics(tmp_path / "p")["sets"]["oscar"]
    assert on_part["recall"]["value"] != pytest.approx(whole["recall"]["value"])
    st = Store(db, read_only=True)
    try:
        stored = stored_results(st, "oscar")
    finally:
        st.close()
    for metric in ("recall", "chair_s", "length"):
        assert stored[metric].value == pytest.approx(whole[metric]["value"]), metric
