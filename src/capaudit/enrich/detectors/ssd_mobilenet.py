"""SSD-MobileNet-v2 (COCO, quantised, Coral build) run with ``ai-edge-litert``.

Why this default: 6 MB, CPU only, no torch, ships with the package
(``capaudit/data/models/ssd_mobilenet_v2_coco``), and its post-processing
(NMS, top 20 boxes) is inside the graph. Input is uint8 300x300 RGB; boxes
come back normalised as (ymin, xmin, ymax, xmax) and are scaled here to the
original image's pixels.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np

from capaudit.enrich.detectors.base import Detection, Detector
from capaudit.errors import InputError, require

MODEL_FILE = "mobilenet_ssd_v2_coco_quant_postprocess.tflite"
LABELS_FILE = "coco_labels.txt"


def default_model_dir() -> Path:
    return Path(str(resources.files("capaudit") / "data" / "models" / "ssd_mobilenet_v2_coco"))


def load_labels(path: Path) -> dict[int, str]:
    """``coco_labels.txt``: ``ID  name`` per line (ids are the model's class indices)."""
    labels = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.strip().split(maxsplit=1)
        if len(parts) == 2 and parts[0].isdigit():
            labels[int(parts[0])] = parts[1].strip()
    return labels


class SSDMobileNetDetector(Detector):
    name = "ssd-mobilenet"

    def __init__(self, model_path: str | None = None, labels_path: str | None = None,
                 min_score: float = 0.4, num_threads: int = 1):
        litert = require("ai_edge_litert.interpreter", "detect", "the ssd-mobilenet detector")
        model = Path(model_path) if model_path else default_model_dir() / MODEL_FILE
        labels = Path(labels_path) if labels_path else model.parent / LABELS_FILE
        for p in (model, labels):
            if not p.exists():
                raise InputError("detector file not found", path=p,
                                 fix="reinstall capaudit or pass model_path/labels_path")
        self.labels = load_labels(labels)
        self.min_score = float(min_score)
        self.model_id = f"ssd_mobilenet_v2_coco:{model.name}"
        self.weights_path = model
        self.interp = litert.Interpreter(model_path=str(model), num_threads=num_threads)
        self.interp.allocate_tensors()
        inp = self.interp.get_input_details()[0]
        self.input_index = inp["index"]
        self.height, self.width = int(inp["shape"][1]), int(inp["shape"][2])
        outs = self.interp.get_output_details()
        # the PostProcess op's outputs: boxes, classes, scores, count (in this order)
        self.out_idx = [d["index"] for d in sorted(outs, key=lambda d: d["name"])]

    def detect_one(self, image) -> list[Detection]:
        w, h = image.size
        arr = np.asarray(image.convert("RGB").resize((self.width, self.height)), dtype=np.uint8)
        self.interp.set_tensor(self.input_index, arr[None])
        self.interp.invoke()
        boxes, classes, scores, count = (self.interp.get_tensor(i) for i in self.out_idx)
        dets = []
        for k in range(int(count[0])):
            score = float(scores[0, k])
            if score < self.min_score:
                continue
            y0, x0, y1, x1 = (float(np.clip(v, 0.0, 1.0)) for v in boxes[0, k])
            cat = self.labels.get(int(classes[0, k]), f"class_{int(classes[0, k])}")
            dets.append(Detection(cat, score, (x0 * w, y0 * h, x1 * w, y1 * h)))
        return sorted(dets, key=lambda d: -d.score)

    def detect(self, images, image_ids=None):
        return [self.detect_one(img) for img in images]
