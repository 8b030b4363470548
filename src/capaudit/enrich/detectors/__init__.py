"""Object detectors (category, score, box); see :mod:`.base`."""

from capaudit.enrich.detectors.base import DETECTORS, Detection, make_detector

__all__ = ["DETECTORS", "Detection", "make_detector"]
