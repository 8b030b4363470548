"""CLIP metrics against a direct computation with a tiny random CLIP built from a config
(no weights are downloaded or shipped; the real numbers need the user's model)."""

from __future__ import annotations

import numpy as np
import pytest

from capaudit.errors import InputError

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("torch_threads")]
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

IDS = [1, 2, 3, 4]
SHORT = ["a dog on a mat", "two cats", "a red bus", "a man with a hat", "a dog"]
LONG = " ".join(["a dog runs on the grass near a tree."] * 4)   # ~150 char tokens


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    from lotus_fixtures import tiny_clip, tiny_images

    root = tmp_path_factory.mktemp("clip")
    return tiny_clip(root / "model"), tiny_images(root / "images", IDS)


def _direct(model_dir, images_dir, captions, image_ids, windows=None):
    """CLIP-S from transformers' own calls: the arithmetic the scorer must reproduce."""
    from PIL import Image
    from transformers import CLIPModel, CLIPTokenizer

    from lotus_fixtures import _processor_class

    model = CLIPModel.from_pretrained(model_dir).eval()
    tok = CLIPTokenizer.from_pretrained(model_dir)
    proc = _processor_class().from_pretrained(model_dir)
    imgs = {i: Image.open(images_dir / f"COCO_val2014_{i:012d}.jpg").convert("RGB") for i in IDS}

    def unit(x):
        x = getattr(x, "pooler_output", x)
        return torch.nn.functional.normalize(x, dim=-1)[0]

    with torch.no_grad():
        iv = {i: unit(model.get_image_features(**proc(images=[im], return_tensors="pt")))
              for i, im in imgs.items()}
        out = []
        for k, (c, i) in enumerate(zip(captions, image_ids)):
            seqs = windows[k] if windows and windows[k] else \
                [tok(c, truncation=True, max_length=77)["input_ids"]]
            cos = np.mean([float(unit(model.get_text_features(
                input_ids=torch.tensor([s]))) @ iv[i]) for s in seqs])
            out.append(100 * max(cos, 0.0))
        text = [unit(model.get_text_features(input_ids=torch.tensor(
            [tok(c, truncation=True, max_length=77)["input_ids"]]))).numpy() for c in captions]
    return np.array(out), np.stack(text), {i: v.numpy() for i, v in iv.items()}


def test_clipscore_truncate_counts_and_matches_direct(clip_dir):
    from capaudit.metrics.features.clip import ClipScorer

    model_dir, images = clip_dir
    caps, ids = SHORT[:4] + [LONG], [1, 2, 3, 4, 1]
    r = ClipScorer(str(model_dir), "truncate").score(caps, ids, images)
    direct, _, _ = _direct(model_dir, images, caps, ids)
    np.testing.assert_allclose(r.clipscore, direct, rtol=1e-4, atol=1e-4)
    assert r.meta["long_captions"] == 1 and r.meta["truncated"] == 1   # counted, not silent
    assert np.isnan(r.clipscore_long).all()        # 77 positions + truncate: no long score


def test_chunk_windows_sentence_aligned_and_averaged(clip_dir):
    from capaudit.metrics.features.clip import ClipScorer

    model_dir, images = clip_dir
    sc = ClipScorer(str(model_dir), "chunk")
    wins = sc.windows(LONG)
    assert len(wins) > 1 and all(len(w) <= 77 for w in wins)
    text = [sc.tokenizer.decode(w, skip_special_tokens=True).replace(" ", "") for w in wins]
    assert all(t.endswith(".") for t in text)      # windows end at sentence ends
    r = sc.score([SHORT[0], LONG], [1, 2], images)
    direct, _, _ = _direct(model_dir, images, [SHORT[0], LONG], [1, 2], windows=[None, wins])
    np.testing.assert_allclose(r.clipscore, direct, rtol=1e-4, atol=1e-4)
    assert r.meta["chunked"] == 1 and r.meta["truncated"] == 0
    assert np.isnan(r.clipscore_long[0]) and r.clipscore_long[1] == pytest.approx(direct[1], 1e-4)


def test_retrieval_ranks_match_a_direct_sort(clip_dir):
    from capaudit.metrics.features.clip import ClipScorer, retrieval_ranks

    model_dir, images = clip_dir
    caps, ids = SHORT[:4], [1, 2, 3, 4]
    r = ClipScorer(str(model_dir)).score(caps, ids, images)
    _, text, iv = _direct(model_dir, images, caps, ids)
    sim = text @ np.stack([iv[i] for i in IDS]).T
    expect = [1 + int((sim[k] > sim[k, IDS.index(i)]).sum()) for k, i in enumerate(ids)]
    assert retrieval_ranks(r.text, ids, r.images).tolist() == expect


def test_metrics_through_the_engine_and_image_cache(clip_dir, store, monkeypatch):
    from capaudit.audit.engine import audit_captions
    from capaudit.metrics.features.inputs import prepare

    model_dir, images = clip_dir
    caps, ids = SHORT[:4] + [SHORT[4]], [1, 2, 3, 4, 1]
    cfg = {"clip_model": str(model_dir), "images": str(images), "workers": 1}
    prepare(store, cfg)
    res = audit_captions(ids, caps, None, metrics=["clipscore", "clip_recall_at_1", "clip_mrr",
                                                   "clipscore_long"],
                         n_boot=50, workers=1, config=cfg).results
    direct, text, iv = _direct(model_dir, images, caps, ids)
    assert res["clipscore"].value == pytest.approx(direct.mean(), rel=1e-4)
    sim = text @ np.stack([iv[i] for i in IDS]).T
    ranks = np.array([1 + (sim[k] > sim[k, IDS.index(i)]).sum() for k, i in enumerate(ids)])
    assert res["clip_recall_at_1"].value == pytest.approx(100 * (ranks == 1).mean())
    assert res["clip_mrr"].value == pytest.approx((1 / ranks).mean())
    assert "positions" in res["clipscore_long"].skipped    # 77 positions, no chunking
    # image embeddings are cached in the store, keyed by model and image hash
    n = store.one("SELECT count(*) FROM image_embeddings")[0]
    assert n == 4
    sc = cfg["_lotus"].scorer
    monkeypatch.setattr(sc.model, "get_image_features",
                        lambda **kw: (_ for _ in ()).throw(AssertionError("recomputed")))
    paths = sorted(images.glob("*.jpg"))
    again = sc.image_embeddings(paths, store)
    np.testing.assert_allclose(again[0], iv[1], rtol=1e-5, atol=1e-6)


def test_a_path_that_is_not_a_clip_model_is_one_line(tmp_path):
    from capaudit.metrics.features.clip import ClipScorer

    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(InputError, match="is not a CLIP model"):
        ClipScorer(str(tmp_path))
    with pytest.raises(InputError, match="is not a CLIP model"):
        ClipScorer(str(tmp_path / "missing"))
