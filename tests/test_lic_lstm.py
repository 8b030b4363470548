"""The faithful LSTM classifier: determinism, it learns a planted signal, and (slow) real data."""

import json
import os
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch (the ml extra) is not installed")

from capaudit.audit.lic.lstm import LSTMClassifier, build_vocab, bucket_batches, encode  # noqa: E402
from capaudit.audit.lic.masking import mask_tokens, tokenize  # noqa: E402
from capaudit.audit.lic.split import balanced_split  # noqa: E402

# torch's threads as `audit lic` sets them (conftest: two spinning threads on busy cores cost ~10x)
pytestmark = pytest.mark.usefixtures("torch_threads")

SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or Path(__file__).resolve().parents[1] / ".." / "shared")


def planted(n=400, seed=0):
    """Captions whose object words reveal the label 90 % of the time; lengths vary."""
    rng = random.Random(seed)
    objs = (["skateboard", "surfboard", "tie", "truck"], ["umbrella", "handbag", "kitchen", "flowers"])
    toks, labels = [], []
    for i in range(n):
        y = i % 2
        side = y if rng.random() < 0.9 else 1 - y
        extra = ["on", "a", "street"][: rng.randint(0, 3)]
        toks.append(["a", "genderword", "with", "a", rng.choice(objs[side])] + extra)
        labels.append(y)
    return toks, labels


def test_vocab_specials_and_order():
    stoi = build_vocab([["b", "a", "b"], ["c", "<unk>"]], max_size=2)
    assert stoi == {"<unk>": 0, "<pad>": 1, "b": 2, "a": 3}
    ids, lens = encode([["b", "zzz"], []], stoi)
    assert ids.tolist() == [[2, 0], [0, 1]] and lens.tolist() == [2, 1]


def test_bucket_batches_cover_every_item_once():
    lengths = torch.tensor([random.Random(i).randint(3, 9) for i in range(300)])
    batches = bucket_batches(lengths, 64, torch.Generator().manual_seed(0))
    flat = torch.cat(batches).sort().values
    assert flat.tolist() == list(range(300)) and len(batches) == 5
    # cut from one length-sorted pool: the batches' length ranges never overlap
    ranges = sorted((int(lengths[b].min()), int(lengths[b].max())) for b in batches)
    assert all(hi <= lo for (_, hi), (lo, _) in zip(ranges, ranges[1:]))


def test_deterministic_and_learns_planted_signal():
    toks, labels = planted()
    tr, te = slice(0, 320), slice(320, 400)
    clf = LSTMClassifier(lr=2e-3, hidden=32, emb=16)
    a = clf.fit_score(toks[tr], labels[tr], toks[te], labels[te], seed=0, epochs=4)
    b = clf.fit_score(toks[tr], labels[tr], toks[te], labels[te], seed=0, epochs=4)
    assert a["score"] == b["score"] and a["accuracy"] == b["accuracy"]
    assert a["accuracy"] > 75 and 0 < a["score"] <= 100


def test_reference_config_defaults():
    cfg = LSTMClassifier().config()
    assert (cfg["emb"], cfg["hidden"], cfg["layers"], cfg["dropout"], cfg["lr"], cfg["batch_size"],
            cfg["max_vocab"]) == (100, 256, 2, 0.5, 5e-5, 64, 25000)
    assert LSTMClassifier.default_epochs == 20


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "data").is_dir(), reason="shared data folder not found")
def test_real_oscar_learns_in_two_epochs():
    """Honest check on real captions with the reference config, only 2 of the 20 epochs."""
    gender = {}
    for line in open(SHARED / "data/coco2014/demographics_val2014.jsonl"):
        r = json.loads(line)
        gender[r["image_id"]] = r["gender"]
    caps = {}
    for line in open(SHARED / "data/captioners/oscar_val2014_gender.jsonl"):
        r = json.loads(line)
        caps[r["image_id"]] = mask_tokens(tokenize(r["caption"]), "genderword")
    s = balanced_split(list(caps), gender, ("male", "female"), seed=0)
    res = LSTMClassifier().fit_score([caps[i] for i in s.train], s.train_labels,
                                     [caps[i] for i in s.test], s.test_labels, seed=0, epochs=2)
    assert res["accuracy"] > 60          # chance is 50 on the balanced test split
    assert 30 < res["score"] < 60        # published 20-epoch LIC_M for oscar: 48.5 +- 1.5
