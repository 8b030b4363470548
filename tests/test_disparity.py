"""``audit disparity``: every metric by gender and by skin tone, on the shared nic captions."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from capaudit.audit.disparity import audit_disparity
from capaudit.audit.engine import audit_captions
from capaudit.errors import InputError
from capaudit.io.annotation_files import (
    Annotations,
    load_chair_gt,
    load_demographics,
    load_instances,
)


@pytest.fixture(scope="module")
def nic(request):
    from tests.conftest import shared_path

    coco = shared_path("data", "coco2014")
    inst, counts = load_instances(coco / "instance_categories_val2014.jsonl")
    gender, skin = load_demographics(coco / "demographics_val2014.jsonl")
    ann = Annotations(instances=inst, instance_counts=counts,
                      chair_gt=load_chair_gt(coco / "chair_objects_trainval2014.jsonl"),
                      gender=gender, skin_tone=skin)
    rows = [json.loads(line) for line in
            shared_path("data", "captioners", "nic_val2014_gender.jsonl").open()]
    ref = json.loads(shared_path("references", "reference_metrics_visible.json").read_text())
    return ([r["image_id"] for r in rows], [r["caption"] for r in rows], ann,
            ref["reference_values"]["nic_val2014_gender"])


@pytest.fixture(scope="module")
def by_gender(nic):
    ids, caps, ann, _ = nic
    return audit_disparity(ids, caps, ann, by="gender", n_boot=300, seed=3, workers=1)


@pytest.mark.parametrize("metric", ["gender_error", "length", "chair_s", "recall"])
def test_groups_recombine_to_the_reference_value(nic, by_gender, metric):
    """Every nic image is gender-labelled, so the caption-weighted mean of the two groups
    is the whole set's value, which the reference code gives."""
    *_, ref = nic
    per = by_gender.results[metric]
    a, b = per["male"], per["female"]
    assert (a.value * a.n + b.value * b.n) / (a.n + b.n) == pytest.approx(ref[metric], abs=0.01)
    assert per["male-female"].value == pytest.approx(a.value - b.value, abs=1e-12)


def test_groups_follow_the_labels_and_intervals_hold_their_values(nic, by_gender):
    ids, _, ann, _ = nic
    want = Counter(ann.gender[i] for i in ids)
    assert by_gender.meta["captions"] == {"male": want["male"], "female": want["female"]}
    assert by_gender.meta["unlabelled_captions"] == 0
    for metric, per in by_gender.results.items():
        for r in per.values():
            if not r.skipped:
                assert r.ci_low <= r.value <= r.ci_high, metric
    # captions of women's images get the wrong gender far more often (Burns et al.)
    gap = by_gender.results["gender_error"]["male-female"]
    assert gap.ci_high < 0
    assert by_gender.results["recall_disparity"]["male-female"].skipped


def test_vocab_is_compared_on_equal_numbers_of_images(nic, by_gender):
    ids, caps, ann, _ = nic
    imgs = by_gender.meta["images"]["equal images"]
    assert imgs["male"] == imgs["female"] == len({i for i in ids if ann.gender[i] == "female"})
    # the smaller group is whole: its vocabulary is the plain audit's on its captions
    fem = [(i, c) for i, c in zip(ids, caps) if ann.gender[i] == "female"]
    plain = audit_captions([i for i, _ in fem], [c for _, c in fem], ann, metrics=["vocab"],
                           n_boot=0, workers=1)
    assert by_gender.results["vocab"]["female"].value == plain.results["vocab"].value
    again = audit_disparity(ids, caps, ann, by="gender", metrics=["vocab"], n_boot=300, seed=3,
                            workers=1)
    assert again.results["vocab"]["male"].value == by_gender.results["vocab"]["male"].value


def test_chunked_disparity_equals_the_single_chunk_one_exactly(nic, by_gender):
    """Streaming (as ``audit disparity`` reads a target) only changes what is held in
    memory: chunks of 997 captions, cut across images and groups, give the same values,
    n, intervals and image counts, bit for bit, as the whole set in one chunk."""
    ids, caps, ann, _ = nic
    chunked = audit_disparity(ids, caps, ann, by="gender", n_boot=300, seed=3, workers=1,
                              chunk_size=997)
    assert len(caps) > 5 * 997
    assert chunked.meta == by_gender.meta
    assert chunked.to_dict() == by_gender.to_dict()
    assert any(r.ci_low is not None for per in chunked.results.values() for r in per.values())


def test_by_skin_tone_leaves_out_unlabelled_images(nic):
    ids, caps, ann, _ = nic
    d = audit_disparity(ids, caps, ann, by="skin_tone", n_boot=200, seed=0, workers=1)
    want = Counter(ann.skin_tone.get(i) for i in ids)
    assert d.meta["captions"] == {"light": want["light"], "dark": want["dark"]}
    assert d.meta["unlabelled_captions"] == want[None] > 0
    assert d.results["recall_disparity"]["light"].value is not None  # within each group
    plain = audit_captions([i for i in ids if ann.skin_tone.get(i) == "dark"],
                           [c for i, c in zip(ids, caps) if ann.skin_tone.get(i) == "dark"],
                           ann, metrics=["chair_s"], n_boot=0, workers=1)
    assert d.results["chair_s"]["dark"].value == plain.results["chair_s"].value


def test_bad_groupings_are_one_clear_error(nic):
    ids, caps, ann, _ = nic
    with pytest.raises(InputError, match="unknown grouping"):
        audit_disparity(ids, caps, ann, by="age")
    with pytest.raises(InputError, match="no gender labels"):
        audit_disparity(ids, caps, Annotations(), by="gender")


def test_cli_stores_group_rows_and_writes_json(tmp_path, capsys):
    from capaudit.cli.main import main
    from capaudit.demo import build_demo
    from capaudit.store import Store

    db = tmp_path / "demo.duckdb"
    build_demo(db, run_audit=False)
    out = tmp_path / "d.json"
    assert main(["audit", "disparity", "nic", "--by", "skin_tone", "--n-boot", "100",
                 "--metrics", "chair_s,gender_error", "--json", str(out), "--db", str(db)]) == 0
    payload = json.loads(out.read_text())
    assert list(payload["sets"]["nic"]["metrics"]) == ["chair_s", "gender_error"]
    light_dark = payload["sets"]["nic"]["metrics"]["chair_s"]["light-dark"]
    with Store(db) as st:
        rows = dict(st.sql("SELECT grp, value FROM metrics WHERE metric = 'chair_s' "
                           "AND set_name = 'nic'"))
    assert set(rows) == {"skin_tone=light", "skin_tone=dark", "skin_tone:light-dark"}
    assert rows["skin_tone:light-dark"] == pytest.approx(light_dark["value"])
    assert rows["skin_tone=light"] - rows["skin_tone=dark"] == pytest.approx(light_dark["value"])
    assert (tmp_path / "d.json.provenance.json").exists()


def test_compare_with_disparity_reports_and_stores_the_same_gaps(tmp_path, capsys):
    from capaudit.cli.main import main
    from capaudit.demo import build_demo
    from capaudit.store import Store

    db = tmp_path / "demo.duckdb"
    build_demo(db, run_audit=False)
    common = ["--n-boot", "100", "--seed", "4", "--db", str(db)]
    assert main(["audit", "compare", "oscar", "nic", "--disparity", "gender,skin_tone",
                 "--report", str(tmp_path / "rep"), *common]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Gaps between groups of images" in md and "| male − female | light − dark |" in md
    gaps = md.split("## Gaps between groups of images")[1].split("\n## ")[0]
    assert gaps.count("| nic | ") == gaps.count("| oscar | ") == 7  # one row per metric
    # each gap with the images of its smaller group (#21)
    row = next(line for line in gaps.splitlines() if line.startswith("| nic | gender_error |"))
    assert all(re.search(r"\] n=[\d,]+$", c.strip()) for c in row.strip("|").split("|")[2:])
    assert main(["audit", "disparity", "nic", "--by", "gender", *common]) == 0
    with Store(db) as st:
        runs = st.sql("SELECT run_id, value FROM metrics WHERE set_name = 'nic' AND "
                      "metric = 'gender_error' AND grp = 'gender:male-female' ORDER BY run_id")
    assert len(runs) == 2 and runs[0][1] == runs[1][1]  # compare and disparity agree exactly
    assert f"{runs[0][1]:+.2f}" in md
    assert main(["audit", "compare", "nic", "--disparity", "age", *common]) == 2


def _group_rates(ids, flags, labels) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per group: (flagged captions, captions) of each image, counted caption by caption."""
    per: dict[str, dict[int, list[int]]] = {"male": {}, "female": {}}
    for iid, flag in zip(ids, flags):
        counts = per[labels[iid]].setdefault(iid, [0, 0])
        counts[0] += bool(flag)
        counts[1] += 1
    return {g: (np.array([c[0] for c in imgs.values()], float),
                np.array([c[1] for c in imgs.values()], float)) for g, imgs in per.items()}


def _plain_bootstrap(flagged: np.ndarray, captions: np.ndarray, rng, n_boot: int = 1000):
    """100 x flagged / captions over images drawn with replacement, one replicate at a time."""
    out = np.empty(n_boot)
    for b in range(n_boot):
        pick = rng.integers(0, len(flagged), len(flagged))
        out[b] = 100 * flagged[pick].sum() / captions[pick].sum()
    return out


def test_readme_figures_on_nic(nic):
    """The README's disparity figures (defaults: 1,000 resamples, seed 0) are what the code
    gives, and the code's are what a plain computation gives: each group's rate counted caption
    by caption from the per-caption predictions (whose total is the reference code's gender
    error, ``test_groups_recombine_to_the_reference_value``), and the gap's interval from an
    image bootstrap of each group written here with its own generator. Two bootstraps agree
    within Monte-Carlo error: over 20 generators the 2.5th/97.5th percentiles of 1,000
    replicates have a standard deviation of ~0.065, ~0.09 for the difference of two, so 0.2
    allows ~2 of them; a 90% interval (~0.27 narrower on each side) would fail."""
    ids, caps, ann, _ = nic
    d = audit_disparity(ids, caps, ann, by="gender", metrics=["gender_error", "chair_s"])
    ge, cs = d.results["gender_error"], d.results["chair_s"]
    details = audit_captions(ids, caps, ann, metrics=["gender_error", "chair_s"], n_boot=0,
                             workers=1).details.to_pydict()
    errors = [p != "neutral" and p != ann.gender[i] for i, p in zip(ids, details["gender"])]
    by_image = _group_rates(ids, errors, ann.gender)
    rate = {g: 100 * f.sum() / n.sum() for g, (f, n) in by_image.items()}
    assert ge["male"].value == pytest.approx(rate["male"], abs=1e-9)
    assert ge["female"].value == pytest.approx(rate["female"], abs=1e-9)
    gap = ge["male-female"]
    assert gap.value == pytest.approx(rate["male"] - rate["female"], abs=1e-9)
    rng = np.random.default_rng(2024)
    reps = _plain_bootstrap(*by_image["male"], rng) - _plain_bootstrap(*by_image["female"], rng)
    low, high = np.quantile(reps, [0.025, 0.975])
    assert gap.ci_low == pytest.approx(low, abs=0.2) and gap.ci_high == pytest.approx(high, abs=0.2)
    chair = {g: 100 * f.sum() / n.sum()
             for g, (f, n) in _group_rates(ids, details["chair_s"], ann.gender).items()}
    assert cs["male"].value == pytest.approx(chair["male"], abs=1e-9)
    assert cs["female"].value == pytest.approx(chair["female"], abs=1e-9)
    # the README shows these same numbers
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    said = (f"gender error {ge['male'].value:.2f} on men's images vs {ge['female'].value:.2f} "
            f"on women's (gap {gap.value:.2f}, 95% CI [{gap.ci_low:.1f}, {gap.ci_high:.1f}]); "
            f"CHAIR_s {cs['male'].value:.2f} vs {cs['female'].value:.2f}").replace("-", "\u2212")
    assert said in " ".join(readme.split())
