"""What ``audit compare``'s report says where the data cannot decide (#34.6): a regression
line only where it means something (R², p and n beside it; the human reference set drawn,
never fitted), an interval on every per-category bar or the reason it has none, an option
the message names that the command accepts, best and worst marked in words. On the six
published captioners and the COCO human captions they were compared with."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from capaudit.cli.main import main

MODELS = ("nic", "sat", "att2in", "updn", "oscar", "nic_plus")
COCO = ("captions_val2014_subset.json", "instance_categories_val2014.jsonl",
        "chair_objects_trainval2014.jsonl", "demographics_val2014.jsonl")


def test_slope_p_value_is_the_t_test_of_the_slope():
    from scipy import stats

    from capaudit.report.plots import regression

    x = np.array([1.0, 2.0, 3.0, 4.0, 6.0])
    y = np.array([1.0, 2.5, 2.0, 5.0, 5.5])
    slope, icpt, r2, p = regression(x, y)
    ref = stats.linregress(x, y)
    assert slope == pytest.approx(ref.slope) and icpt == pytest.approx(ref.intercept)
    assert r2 == pytest.approx(ref.rvalue ** 2) and p == pytest.approx(ref.pvalue)


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    from conftest import shared_path

    tmp = tmp_path_factory.mktemp("cmp")
    db = str(tmp / "c.duckdb")
    coco = [str(shared_path("data", "coco2014", f)) for f in COCO]
    for m in MODELS:
        path = shared_path("data", "captioners", f"{m}_val2014_gender.jsonl")
        assert main(["sets", "add", m, str(path), "--db", db]) == 0
    assert main(["sets", "add", "coco", coco[0], "--db", db]) == 0
    for kind, f in zip(("instances", "chair-gt", "demographics"), coco[1:]):
        assert main(["annotations", "add", kind, f, "--db", db]) == 0
    return tmp, db, coco


def _compare(board, capsys, name, *extra):
    tmp, db, _ = board
    capsys.readouterr()
    code = main(["audit", "compare", "coco", *MODELS, "--metrics",
                 "recall,recall_disparity,chair_s", "--n-boot", "200", "--report",
                 str(tmp / name), "--db", db, *extra])
    out = capsys.readouterr()
    assert code == 0, out.err
    md = (tmp / name / "report.md").read_text()
    return json.loads((tmp / name / "metrics.json").read_text()), md, out.out


@pytest.mark.slow
def test_fit_only_where_the_slope_is_told_apart_from_zero(board, capsys):
    from scipy import stats

    m, md, _ = _compare(board, capsys, "rep")
    for metric in ("recall_disparity", "chair_s"):
        x = [m["sets"][s]["recall"]["value"] for s in MODELS]     # coco: not fitted
        y = [m["sets"][s][metric]["value"] for s in MODELS]
        ref = stats.linregress(x, y)
        line = next(r for r in md.splitlines() if r.startswith(f"{metric} vs recall ("))
        assert f"R² = {ref.rvalue ** 2:.2f}" in line and "6 sets, 1,299 shared images" in line
        assert line.endswith("not fitted: coco (human captions))")
        assert line.startswith(f"{metric} vs recall (no fitted line") == (ref.pvalue >= 0.05)
    assert "recall_disparity vs recall (no fitted line: R² =" in md   # the 0.07 case


@pytest.mark.slow
def test_every_category_bar_has_an_interval_or_its_reason(board, capsys, shared):
    _, md, _ = _compare(board, capsys, "rep2")
    # hand count: the shared images (coco's subset holds them all) of women with a skateboard
    ids = {json.loads(line)["image_id"] for line in
           shared("data", "captioners", "nic_val2014_gender.jsonl").open()}
    ids &= {a["image_id"] for a in
            json.loads(shared("data", "coco2014", COCO[0]).read_text())["annotations"]}
    women = {d["image_id"] for line in shared("data", "coco2014", COCO[3]).open()
             if (d := json.loads(line))["gender"] == "female"}
    skate = sum(1 for line in shared("data", "coco2014", COCO[1]).open()
                if (d := json.loads(line))["image_id"] in ids & women
                and "skateboard" in d["categories"])
    assert 0 < skate < 10
    table = md[md.index("## Recall difference by category"):]
    rows = [r for r in table.splitlines() if r.startswith("| ") and not r.startswith("| category")]
    assert len(rows) == 10
    for r in rows:
        for cell in [c.strip() for c in r.strip("|").split(" | ")][1:]:
            assert re.fullmatch(r"[+−][\d.]+ \[[+−][\d.]+, [+−][\d.]+\]", cell) or \
                cell.startswith("n/a: ") and "(under --min-images 10)" in cell, cell
    skate_row = next(r for r in rows if r.startswith("| skateboard |"))
    assert f"n/a: {skate} images of women (under --min-images 10)" in skate_row
    num = r"([+−][\d.]+)"
    for v, lo, hi in re.findall(fr"{num} \[{num}, {num}\]", table):   # each interval holds its value
        v, lo, hi = (float(t.replace("−", "-")) for t in (v, lo, hi))
        assert lo <= v <= hi
    # the option the chart names is one `audit compare` accepts: lowered, skateboard has a bar
    _, md, _ = _compare(board, capsys, "rep3", "--min-images", str(skate))
    skate_row = next(r for r in md.splitlines() if r.startswith("| skateboard |"))
    assert "n/a" not in skate_row and skate_row.count("[") == 7


@pytest.mark.slow
def test_best_and_worst_marked_in_words_without_colour(board, capsys, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    m, _, out = _compare(board, capsys, "rep4")
    cells = [line for line in out.splitlines() if "│" in line]
    assert "\x1b[" not in out                                  # a pipe: no colour at all
    assert sum(line.count("(best)") for line in cells) == len(m["best"]) >= 1
    assert sum(line.count("(worst)") for line in cells) == len(m["worst"]) >= 1
