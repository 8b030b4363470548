"""Detector contract and registry.

Why a tiny contract: FuseCap-style fusion only needs "what is where, how
sure": category (COCO name), score in [0, 1] and a box in pixel coordinates
``[x0, y0, x1, y1]`` of the original image (``None`` when the source has no
boxes, as for category-only annotations). Detectors take decoded PIL images
plus the sample's image id, so an oracle can look up ground truth by id.
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from capaudit.core.registry import Registry


@dataclass(frozen=True)
class Detection:
    category: str
    score: float
    box: tuple[float, float, float, float] | None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["score"] = round(float(self.score), 4)
        d["box"] = [round(float(v), 1) for v in self.box] if self.box is not None else None
        return d


class Detector:
    """Base class: ``detect(images, image_ids) -> list[list[Detection]]``."""

    name = "base"
    model_id = ""

    def detect(self, images: list, image_ids: list[int | None]) -> list[list[Detection]]:
        raise NotImplementedError


def decode_image(data: bytes):
    """Bytes -> RGB PIL image (detectors and colours want RGB)."""
    from PIL import Image

    img = Image.open(io.BytesIO(data))
    return img.convert("RGB")


DETECTORS: Registry = Registry("detector")
DETECTORS.register("ssd-mobilenet", "capaudit.enrich.detectors.ssd_mobilenet:SSDMobileNetDetector",
                   version="1", extra="detect",
                   description="COCO SSD-MobileNet-v2 (shipped), ai-edge-litert, CPU, no torch")
DETECTORS.register("ultralytics", "capaudit.enrich.detectors.ultralytics:UltralyticsDetector",
                   version="1", extra="yolo", description="a local ultralytics weights file")
DETECTORS.register("annotations", "capaudit.enrich.detectors.annotations:AnnotationDetector",
                   version="1", description="COCO instances as an oracle (ablations)")


def make_detector(name: str, options: Mapping[str, Any] | None = None) -> Detector:
    return DETECTORS.get(name)(**dict(options or {}))
