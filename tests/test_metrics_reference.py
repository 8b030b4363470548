"""Every metric equals the reference implementation's value on every shared caption file."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
DATA = SHARED / "data"
REF = SHARED / "references" / "reference_metrics_visible.json"
pytestmark = pytest.mark.skipif(not (DATA.is_dir() and REF.is_file()),
                                reason=f"shared data not found at {SHARED} (set CAPAUDIT_SHARED)")

METRICS = ["chair_s", "chair_i", "recall", "gender_error", "vocab", "length"]
COCO_KEY = "coco_human_val2014_subset"


def _sets() -> list[str]:
    if not DATA.is_dir():
        return []
    return sorted(p.stem for p in (DATA / "captioners").glob("*.jsonl")) + [COCO_KEY]


@lru_cache(maxsize=1)
def annotations():
    from capaudit.io.annotation_files import Annotations, load_chair_gt, load_demographics, load_instances
    coco = DATA / "coco2014"
    inst, counts = load_instances(coco / "instance_categories_val2014.jsonl")
    gender, skin = load_demographics(coco / "demographics_val2014.jsonl")
    return Annotations(instances=inst, instance_counts=counts,
                       chair_gt=load_chair_gt(coco / "chair_objects_trainval2014.jsonl"),
                       gender=gender, skin_tone=skin)


def load_set(name: str) -> tuple[list[int], list[str]]:
    if name == COCO_KEY:
        data = json.loads((DATA / "coco2014" / "captions_val2014_subset.json").read_text("utf-8"))
        rows = data["annotations"]
    else:
        with open(DATA / "captioners" / f"{name}.jsonl", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
    return [r["image_id"] for r in rows], [r["caption"] for r in rows]


@pytest.mark.parametrize("name", _sets())
def test_metrics_equal_reference(name):
    from capaudit.audit.engine import audit_captions
    ref = json.loads(REF.read_text("utf-8"))["reference_values"][name]
    ids, caps = load_set(name)
    assert len(caps) == ref["n"]
    res = audit_captions(ids, caps, annotations(), n_boot=200, seed=0, workers=2)
    for metric in METRICS:
        r = res.results[metric]
        assert r.skipped is None
        assert abs(r.value - ref[metric]) < 0.01, (metric, r.value, ref[metric])
        if ref[metric] > 0:  # a degenerate 0/0 set (no hallucination) has a point interval
            assert r.ci_low <= r.value <= r.ci_high, (metric, r)
    rd = res.results["recall_disparity"]
    assert rd.value is not None and rd.extra["m"] == len(rd.extra["per_category"]) > 0
    assert res.details.num_rows == len(caps)
