"""benchmarks/detector_evidence.py on scikit-image photos keyed to made-up COCO-style ids,
with hand-written instances and captions (the real figure needs a COCO copy)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_detector_evidence_on_known_photos(tmp_path):
    pytest.importorskip("ai_edge_litert")
    skdata = pytest.importorskip("skimage.data")
    from PIL import Image

    spec = importlib.util.spec_from_file_location("detector_evidence",
                                                  REPO / "benchmarks" / "detector_evidence.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    names = {11: "astronaut", 12: "chelsea", 13: "coffee"}
    for iid, photo in names.items():
        Image.fromarray(getattr(skdata, photo)()).convert("RGB").save(
            tmp_path / f"COCO_val2014_{iid:012d}.jpg")
    # hand-written instances (what the photos show) and captions, one with a made-up dog
    coco = {11: frozenset({"person"}), 12: frozenset({"cat"}), 13: frozenset({"cup", "spoon"})}
    rows = [(11, "An astronaut holding a helmet."), (12, "A cat lying next to a dog."),
            (13, "A cup of coffee on a saucer.")]
    out = mod.evaluate(sorted(tmp_path.glob("*.jpg")), coco, rows, "ssd-mobilenet", 0.5)
    assert out["images"] == 3 and out["captions"] == 3
    for c in ("person", "cat", "cup"):   # the detector sees what the photos show
        assert out["per_category"][c]["recall"] == 1.0, c
    # with COCO evidence by hand: mentions person; cat, dog (hallucinated); cup -> CHAIR_s 1/3
    assert out["coco_evidence"]["chair_s"]["value"] == pytest.approx(100 / 3)
    # the detector finds person, cat and cup too, and no dog: the same CHAIR_s
    assert out["detector_evidence"]["chair_s"]["value"] == pytest.approx(100 / 3)
