"""Optional OCR for FuseCap-style attributes (off by default).

Why optional: OCR engines are heavy system dependencies and most COCO images
have no legible text. ``tesseract`` uses ``pytesseract`` (and the tesseract
binary) when installed; the import is lazy and a missing engine is a clear
error only when ``ocr: tesseract`` is asked for.
"""

from __future__ import annotations

from capaudit.core.registry import Registry
from capaudit.errors import require

OCR: Registry = Registry("ocr engine")


class TesseractOCR:
    name = "tesseract"

    def __init__(self, min_chars: int = 3):
        self.tess = require("pytesseract", "detect", "OCR (also install the tesseract binary)")
        self.min_chars = min_chars

    def read(self, image) -> list[str]:
        text = self.tess.image_to_string(image.convert("RGB"))
        return [t for t in (" ".join(line.split()) for line in text.splitlines())
                if len(t) >= self.min_chars]


OCR.register("tesseract", TesseractOCR, version="1", description="pytesseract + tesseract")
