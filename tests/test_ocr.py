"""OCR engine (tesseract) on rendered text; skips where pytesseract or the binary is absent."""

from __future__ import annotations

import pytest

pytesseract = pytest.importorskip("pytesseract")


def _has_binary() -> bool:
    try:
        pytesseract.get_tesseract_version()
        return True
    except Exception:
        return False


needs_binary = pytest.mark.skipif(not _has_binary(), reason="tesseract binary not installed (Debian: "
                                 "apt-get install -y tesseract-ocr; .ci/run installs it as root)")


def _sign(lines: list[str], size=(640, 220)):
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", size, (250, 250, 245))
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=44)
    for k, text in enumerate(lines):
        draw.text((30, 30 + 80 * k), text, fill=(10, 10, 10), font=font)
    return img


@needs_binary
def test_reads_rendered_lines_in_order():
    from capaudit.enrich.ocr import OCR

    ocr = OCR.get("tesseract")()
    assert ocr.read(_sign(["STOP AHEAD", "Main Street 42"])) == ["STOP AHEAD", "Main Street 42"]


@needs_binary
def test_blank_and_noise_images_give_no_text():
    import numpy as np
    from PIL import Image

    from capaudit.enrich.ocr import OCR

    ocr = OCR.get("tesseract")()
    assert ocr.read(Image.new("RGB", (320, 240), (120, 160, 200))) == []
    noise = (np.random.default_rng(0).random((240, 320, 3)) * 255).astype("uint8")
    assert ocr.read(Image.fromarray(noise)) == []


def test_missing_binary_is_one_clear_error(monkeypatch):
    from capaudit.enrich.ocr import TesseractOCR
    from capaudit.errors import InputError

    def boom():
        raise pytesseract.TesseractNotFoundError()

    monkeypatch.setattr(pytesseract, "get_tesseract_version", boom)
    with pytest.raises(InputError, match="apt-get install tesseract-ocr"):
        TesseractOCR()


@needs_binary
def test_fusecap_enrichment_carries_ocr_lines(tmp_path):
    """``ocr: tesseract`` in an enrich config: the sign's text reaches the provenance."""
    import json

    from capaudit.enrich.runner import run_enrich
    from capaudit.enrich.testing import FakeOpenAIServer
    from capaudit.io.ingest import add_caption_set
    from capaudit.enrich.shards_build import build_shards
    from capaudit.store import Store
    from test_enrich_fixtures import base_config, make_captions, make_images

    ids = make_images(tmp_path / "images", 2)
    _sign(["STOP AHEAD"]).save(tmp_path / "images" / f"COCO_val2014_{ids[0]:012d}.jpg",
                               quality=95)
    caps = make_captions(tmp_path / "captions.json", ids, 1)
    with Store(tmp_path / "t.duckdb") as store:
        add_caption_set(store, "coco", caps, "coco")
        table = store.captions("coco")
    build_shards(tmp_path / "images", table, tmp_path / "shards", shard_size=2, set_name="coco")
    with FakeOpenAIServer() as srv:
        cfg = base_config(srv.base_url)
        cfg["ocr"] = "tesseract"
        s = run_enrich(tmp_path / "shards", tmp_path / "work", "fusecap", cfg)
    assert not s["failures"]
    by_id = {int(i): json.loads(m) for i, m in zip(s["table"].column("image_id").to_pylist(),
                                                   s["table"].column("meta").to_pylist())}
    assert by_id[ids[0]]["ocr"] == ["STOP AHEAD"]
    assert by_id[ids[1]]["ocr"] == []
