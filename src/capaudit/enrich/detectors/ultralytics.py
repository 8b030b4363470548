"""Ultralytics (YOLO) detector from a local weights file; the ``yolo`` extra.

Why optional and lazy: ultralytics pulls torchvision, which must not be a
hard dependency (it can break a pinned torch/transformers pair). Nothing is
imported until this detector is instantiated; no weights are downloaded:
``weights`` must be a local file.
"""

from __future__ import annotations

from pathlib import Path

from capaudit.enrich.detectors.base import Detection, Detector
from capaudit.errors import InputError, require


class UltralyticsDetector(Detector):
    name = "ultralytics"

    def __init__(self, weights: str | None = None, min_score: float = 0.4, device: str = "cpu"):
        if not weights or not Path(weights).exists():
            raise InputError("the ultralytics detector needs a local weights file",
                             path=weights, fix="pass --detector-weights PATH (e.g. yolov8n.pt)")
        ul = require("ultralytics", "yolo", "the ultralytics detector")
        self.model = ul.YOLO(str(weights))
        self.min_score, self.device = float(min_score), device
        self.model_id = f"ultralytics:{Path(weights).name}"
        self.weights_path = Path(weights)

    def detect(self, images, image_ids=None):
        results = self.model.predict(images, conf=self.min_score, device=self.device,
                                     verbose=False)
        out = []
        for res in results:
            names = res.names
            dets = [Detection(names[int(c)], float(s), tuple(float(v) for v in b))
                    for b, c, s in zip(res.boxes.xyxy.tolist(), res.boxes.cls.tolist(),
                                       res.boxes.conf.tolist())]
            out.append(sorted(dets, key=lambda d: -d.score))
        return out
