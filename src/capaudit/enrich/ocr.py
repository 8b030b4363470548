"""Optional OCR for FuseCap-style attributes (off by default).

Why optional: OCR engines are heavy system dependencies and most COCO images
have no legible text. ``tesseract`` uses ``pytesseract`` (the ``ocr`` extra)
and the tesseract binary (``apt-get install tesseract-ocr``); both are checked
when the engine is built, so a missing one is one clear line before any shard
runs, not an error per image.

What comes back is the legible lines of text: whitespace collapsed, lines
shorter than ``min_chars`` or without a letter or digit dropped (tesseract
returns stray punctuation on textures), and words below ``min_conf``
confidence removed (``image_to_data`` gives per-word confidence; FuseCap's
prompt should not be fed guesses).
"""

from __future__ import annotations

from capaudit.core.registry import Registry
from capaudit.errors import InputError, require

OCR: Registry = Registry("ocr engine")


class TesseractOCR:
    name = "tesseract"

    def __init__(self, min_chars: int = 3, min_conf: float = 60.0, lang: str = "eng"):
        self.tess = require("pytesseract", "ocr", "OCR (also install the tesseract binary)")
        try:
            self.tess.get_tesseract_version()
        except Exception:  # pytesseract's TesseractNotFoundError and OSError alike
            raise InputError("the tesseract binary was not found (OCR asked for)",
                             fix="apt-get install tesseract-ocr, or drop --ocr") from None
        self.min_chars, self.min_conf, self.lang = int(min_chars), float(min_conf), lang

    def read(self, image) -> list[str]:
        """Legible text lines of a PIL image, top to bottom."""
        data = self.tess.image_to_data(image.convert("RGB"), lang=self.lang,
                                       output_type=self.tess.Output.DICT)
        lines: dict[tuple, list[str]] = {}
        for i, word in enumerate(data["text"]):
            word = (word or "").strip()
            if not word or float(data["conf"][i]) < self.min_conf:
                continue
            key = (data["block_num"][i], data["par_num"][i], data["line_num"][i])
            lines.setdefault(key, []).append(word)
        out = []
        for key in sorted(lines):
            text = " ".join(lines[key])
            if len(text) >= self.min_chars and any(ch.isalnum() for ch in text):
                out.append(text)
        return out


OCR.register("tesseract", TesseractOCR, version="1", extra="ocr",
             description="pytesseract + the tesseract binary")
