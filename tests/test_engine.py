"""Engine: reference CHAIR word lists, details table, skipped metrics, determinism."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from capaudit.audit.engine import audit_captions, chair_words
from capaudit.io.annotation_files import Annotations

SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
EXAMPLE = SHARED / "references" / "chair_maxlinn_example"
GT = SHARED / "data" / "coco2014" / "chair_objects_trainval2014.jsonl"


@pytest.mark.skipif(not (EXAMPLE.is_dir() and GT.is_file()),
                    reason=f"shared reference example not found at {EXAMPLE} (set CAPAUDIT_SHARED)")
def test_chair_words_match_the_reference_output():
    from capaudit.io.annotation_files import load_chair_gt
    rows = [json.loads(line) for line in (EXAMPLE / "example_inputs.jsonl").read_text("utf-8").splitlines()
            if line.strip()]
    ref = json.loads((EXAMPLE / "reference_outputs.json").read_text("utf-8"))["sentences"]
    got = chair_words([r["caption"] for r in rows], [r["image_id"] for r in rows], load_chair_gt(GT))
    assert len(got) == len(ref) == 2
    for g, r in zip(got, ref):
        assert g["mscoco_generated_words"] == r["mscoco_generated_words"]
        assert g["mscoco_hallucinated_words"] == [list(x) for x in r["mscoco_hallucinated_words"]]
        assert set(g["mscoco_gt_words"]) == set(r["mscoco_gt_words"])
        assert g["words"] == r["words"]
        assert g["metrics"] == pytest.approx(r["metrics"])


def _toy():
    ids = [1, 1, 2, 3, None]
    caps = ["A man riding a horse.", "A woman on a horse next to a dog.", "A cat on a sofa.",
            "Two dogs and a frisbee.", "A red bus."]
    ann = Annotations(instances={1: frozenset({"person", "horse"}), 2: frozenset({"cat", "couch"}),
                                 3: frozenset({"dog"})},
                      chair_gt={1: frozenset({"person", "horse"}), 2: frozenset({"cat", "couch"}),
                                3: frozenset({"dog"})},
                      gender={1: "male"})
    return ids, caps, ann


def test_toy_values_and_details():
    ids, caps, ann = _toy()
    res = audit_captions(ids, caps, ann, n_boot=50, workers=1, min_images=1)
    r = res.results
    assert r["chair_s"].value == pytest.approx(100 * 2 / 4)       # dog (img 1), frisbee (img 3)
    assert r["chair_i"].value == pytest.approx(100 * 2 / 9)
    assert r["chair_s"].n == 4                                     # no-image caption left out
    assert r["recall"].value == pytest.approx(100 * (1 + 1 + 1 + 1) / 4)
    assert r["gender_error"].value == pytest.approx(50.0) and r["gender_error"].n == 2
    assert r["length"].value == pytest.approx(np.mean([6, 10, 6, 6, 4]))
    assert r["recall_disparity"].skipped  # no woman-labelled image
    d = res.details.to_pydict()
    assert d["image_id"] == [1, 1, 2, 3, None]
    assert d["mentioned"][1] == ["person", "dog", "horse"]  # distinct, category order
    assert d["hallucinated"][1] == ["dog"] and d["chair_s"][1] is True
    assert d["gender"] == ["male", "female", "neutral", "neutral", "neutral"]
    assert d["recall"][4] is None


def test_missing_annotations_are_skipped_not_fatal():
    ids, caps, _ = _toy()
    res = audit_captions(ids, caps, Annotations(), n_boot=20, workers=1)
    # by hand: a man riding horse . woman on next to dog cat sofa two dogs and frisbee red bus
    assert res.results["vocab"].value == 18
    assert res.results["length"].value == pytest.approx((6 + 10 + 6 + 6 + 4) / 5)
    for m in ("chair_s", "chair_i", "recall", "gender_error", "recall_disparity"):
        assert res.results[m].value is None and res.results[m].skipped
    assert set(res.skipped) == {"chair_s", "chair_i", "recall", "gender_error", "recall_disparity"}


def test_bootstrap_is_seeded_and_corrected_mode_is_beside():
    ids, caps, ann = _toy()
    a = audit_captions(ids * 20, caps * 20, ann, n_boot=100, seed=3, workers=1, corrected=True)
    b = audit_captions(ids * 20, caps * 20, ann, n_boot=100, seed=3, workers=2, corrected=True)
    for k in a.results:
        assert (a.results[k].ci_low, a.results[k].ci_high) == (b.results[k].ci_low, b.results[k].ci_high)
    # 'bus' is found only in corrected mode, and only for the image-less caption
    assert a.results["chair_i_corrected"].value == a.results["chair_i"].value
    assert "chair_s_corrected" in a.results and a.results["chair_s"].extra["mode"] == "reference"


def test_details_query_in_duckdb():
    duckdb = pytest.importorskip("duckdb")
    ids, caps, ann = _toy()
    details = audit_captions(ids, caps, ann, n_boot=0, workers=1).details
    con = duckdb.connect()
    con.register("details", details)
    n = con.execute("select count(*) from details where list_contains(mentioned, 'dog')").fetchall()[0][0]
    assert n == 2
