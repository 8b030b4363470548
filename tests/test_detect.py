"""Detectors on real photographs from scikit-image, colours, the oracle, the CLI."""

from __future__ import annotations

import json

import pytest

from capaudit.cli.main import main
from capaudit.enrich.colors import dominant_color
from capaudit.enrich.detectors import DETECTORS, make_detector

skdata = pytest.importorskip("skimage.data")
pytest.importorskip("ai_edge_litert")


def photo(name):
    from PIL import Image

    return Image.fromarray(getattr(skdata, name)())


@pytest.fixture(scope="module")
def ssd():
    return make_detector("ssd-mobilenet", {"min_score": 0.4})


@pytest.mark.parametrize("name,category", [("astronaut", "person"), ("chelsea", "cat"),
                                           ("coffee", "cup")])
def test_ssd_mobilenet_finds_the_obvious_object(ssd, name, category):
    img = photo(name)
    dets = ssd.detect([img], [None])[0]
    assert dets and dets[0].category == category and dets[0].score >= 0.5
    x0, y0, x1, y1 = dets[0].box
    assert 0 <= x0 < x1 <= img.size[0] and 0 <= y0 < y1 <= img.size[1]


def test_shipped_model_is_the_default():
    from capaudit.enrich.detectors.ssd_mobilenet import default_model_dir, load_labels

    labels = load_labels(default_model_dir() / "coco_labels.txt")
    assert len(labels) == 80 and labels[0] == "person" and labels[16] == "cat"


def test_dominant_colour_names():
    from PIL import Image

    img = Image.new("RGB", (100, 100), (250, 250, 250))
    img.paste((200, 20, 20), (10, 10, 50, 50))
    assert dominant_color(img, (10, 10, 50, 50)) == "red"
    assert dominant_color(img) == "white"
    assert dominant_color(Image.new("RGB", (20, 20), (20, 40, 220))) == "blue"
    assert dominant_color(photo("chelsea")) in {"orange", "brown"}
    assert dominant_color(img, (0, 0, 1, 1)) is None


def test_annotations_oracle_from_coco_instances(tmp_path):
    inst = {"images": [{"id": 7}], "categories": [{"id": 1, "name": "person"},
                                                  {"id": 17, "name": "cat"}],
            "annotations": [{"image_id": 7, "category_id": 17, "bbox": [1, 2, 10, 20]}]}
    p = tmp_path / "instances.json"
    p.write_text(json.dumps(inst))
    det = make_detector("annotations", {"path": str(p)})
    [d7], none = det.detect([None, None], [7, 8])
    assert d7.to_dict() == {"category": "cat", "score": 1.0, "box": [1.0, 2.0, 11.0, 22.0]}
    assert none == []


def test_ultralytics_is_lazy_and_needs_local_weights(tmp_path):
    from capaudit.errors import InputError

    assert "ultralytics" in DETECTORS
    with pytest.raises(InputError, match="weights"):
        make_detector("ultralytics", {"weights": str(tmp_path / "missing.pt")})


def _yolo_weights():
    """A local YOLO weights file: $CAPAUDIT_YOLO_WEIGHTS, else one in the shared models."""
    import os
    from pathlib import Path

    env = os.environ.get("CAPAUDIT_YOLO_WEIGHTS")
    if env:
        return Path(env)
    shared = Path(os.environ.get("CAPAUDIT_SHARED") or Path(__file__).resolve().parents[1].parent
                  / "shared") / "models"
    return next(iter(sorted(shared.glob("**/yolo*.pt"))), None) if shared.is_dir() else None


@pytest.mark.parametrize("name,category", [("astronaut", "person"), ("chelsea", "cat"),
                                           ("coffee", "cup")])
def test_ultralytics_runs_when_installed(name, category):
    pytest.importorskip("ultralytics")
    try:
        import torchvision.ops  # noqa: F401  (ultralytics needs its compiled ops)
    except Exception as exc:  # pragma: no cover - depends on environment
        pytest.skip(f"torchvision ops unavailable: {exc}")
    weights = _yolo_weights()
    if weights is None or not weights.exists():
        pytest.skip("no local YOLO weights (set CAPAUDIT_YOLO_WEIGHTS; none may be downloaded)")
    det = make_detector("ultralytics", {"weights": str(weights), "min_score": 0.4})
    img = photo(name)
    dets = det.detect([img], [None])[0]
    assert dets and dets[0].category == category and dets[0].score >= 0.5
    assert [d.score for d in dets] == sorted((d.score for d in dets), reverse=True)
    x0, y0, x1, y1 = dets[0].box
    assert 0 <= x0 < x1 <= img.size[0] and 0 <= y0 < y1 <= img.size[1]
    assert det.model_id == f"ultralytics:{weights.name}"


def test_ultralytics_results_become_detections(tmp_path, monkeypatch):
    """The conversion of ultralytics results (class ids through ``names``, xyxy boxes,
    confidences, sorted by score) checked against a stand-in ``ultralytics`` module, so it
    runs where the package is not installed."""
    import sys
    import types

    class Col(list):
        def tolist(self):
            return list(self)

    calls = {}

    class YOLO:
        def __init__(self, path):
            calls["weights"] = path

        def predict(self, images, conf, device, verbose):
            calls.update(conf=conf, device=device, n=len(images))
            boxes = types.SimpleNamespace(xyxy=Col([[1.0, 2.0, 30.0, 40.0], [5, 6, 7, 8]]),
                                          cls=Col([15.0, 41.0]), conf=Col([0.55, 0.9]))
            return [types.SimpleNamespace(names={15: "cat", 41: "cup"}, boxes=boxes)] * len(images)

    monkeypatch.setitem(sys.modules, "ultralytics", types.SimpleNamespace(YOLO=YOLO))
    weights = tmp_path / "yolov8n.pt"
    weights.write_bytes(b"stand-in")
    det = make_detector("ultralytics", {"weights": str(weights), "min_score": 0.3})
    out = det.detect(["img-a", "img-b"], [1, 2])
    assert calls == {"weights": str(weights), "conf": 0.3, "device": "cpu", "n": 2}
    assert len(out) == 2
    assert [(d.category, d.score, d.box) for d in out[0]] == [
        ("cup", 0.9, (5.0, 6.0, 7.0, 8.0)), ("cat", 0.55, (1.0, 2.0, 30.0, 40.0))]
    assert det.model_id == "ultralytics:yolov8n.pt"


def test_detect_cli_on_images_writes_json(tmp_path, capsys):
    paths = []
    for name in ("chelsea", "coffee"):
        paths.append(tmp_path / f"{name}.png")
        photo(name).save(paths[-1])
    out = tmp_path / "dets.jsonl"
    assert main(["detect", *map(str, paths), "--json", str(out)]) == 0
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["detections"][0]["category"] for r in recs] == ["cat", "cup"]
    assert recs[0]["detections"][0]["color"]
    assert main(["detect"]) == 2
    assert main(["detect", str(paths[0]), "--detector", "ssd-mobilnet"]) == 2
    assert "did you mean 'ssd-mobilenet'" in capsys.readouterr().err
