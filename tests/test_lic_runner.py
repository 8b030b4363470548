"""run_lic: LIC_M/LIC_D/LIC over seeds, the cache (a rerun trains nothing), and the CLI function."""

import json
import random
import re

import pytest

pytest.importorskip("torch", reason="torch (the ml extra) is not installed")

from capaudit.audit.lic import lstm as lstm_mod  # noqa: E402
from capaudit.audit.lic.runner import run_lic  # noqa: E402
from capaudit.errors import InputError  # noqa: E402

FAST = {"hidden": 16, "emb": 8, "lr": 3e-3}


def synthetic(n=200, seed=0):
    rng = random.Random(seed)
    objs = (["skateboard", "surfboard", "tie"], ["umbrella", "handbag", "kitchen"])
    caps, human, labels = {}, {}, {}
    for i in range(1, n + 1):
        y = int(i % 3 == 0)          # 1/3 female: the split must balance
        labels[i] = ("male", "female")[y]
        caps[i] = f"a {('man', 'woman')[y]} with a {rng.choice(objs[y])}"
        human[i] = [f"a person near a {rng.choice(objs[y if rng.random() < 0.7 else 1 - y])}"
                    for _ in range(5)]
    return caps, human, labels


class DictCache:
    def __init__(self):
        self.d, self.puts = {}, 0

    def get(self, key):
        return self.d.get(key)

    def put(self, key, value):
        self.puts += 1
        self.d[key] = json.loads(json.dumps(value))


def test_lic_m_d_and_cache_hit_trains_nothing(monkeypatch):
    caps, human, labels = synthetic()
    cache = DictCache()
    kw = dict(classifier="lstm", seeds=(0, 12), epochs=1, device="cpu", cache=cache, progress=False,
              classifier_options=FAST)
    a = run_lic(caps, labels, human, **kw)
    assert set(a["lic_m"]["seeds"]) == {0, 12} and cache.puts == 2
    assert len(a["details"][0]["lic_d_per_caption"]) == 5
    for s in (0, 12):
        assert a["lic"]["seeds"][s] == pytest.approx(a["lic_m"]["seeds"][s] - a["lic_d"]["seeds"][s])

    def boom(*args, **kwargs):
        raise AssertionError("trained despite a cache hit")

    monkeypatch.setattr(lstm_mod.LSTMClassifier, "fit_score", boom)
    b = run_lic(caps, labels, human, **kw)
    assert b["lic_m"] == a["lic_m"] and b["lic"] == a["lic"] and cache.puts == 2
    assert all(d["cached"] for d in b["details"].values())
    # a different caption set is a different key
    caps2 = dict(caps)
    caps2[1] = "a dog"
    with pytest.raises(AssertionError):
        run_lic(caps2, labels, human, **kw)


def test_without_reference_and_skin_tone():
    """Skin tone here follows the object word exactly (dark: umbrella, handbag, kitchen;
    light: skateboard, surfboard, tie), so a classifier trained on the masked captions
    separates them: accuracy 100 on the test split, and LIC_M, the mean confidence of the
    correct predictions, far above the 50 that accuracy alone guarantees. The split balances
    the groups: every third of the 200 images is dark (66), so 66 + 66 captions."""
    caps, _, labels = synthetic()
    skin = {i: ("light", "dark")[labels[i] == "female"] for i in labels}
    r = run_lic(caps, skin, None, seeds=(0,), epochs=20, device="cpu", progress=False,
                attribute="skin_tone", classifier_options=FAST)
    assert r["lic_d"] is None and r["lic"] is None
    assert r["lic_m"]["std"] is None and r["config"]["attribute"] == "skin_tone"
    d = r["details"][0]
    assert d["n_train"] + d["n_test"] == 2 * 66
    assert d["accuracy_m"] == 100.0
    assert 80 < r["lic_m"]["value"] == d["lic_m"] <= 100


def test_captions_that_say_nothing_leak_half_at_half_confidence():
    """Every caption the same: the classifier gives one prediction for all, right on exactly
    half of the balanced test split (accuracy 50), so LIC_M = 50 x its confidence, between 25
    and 50; trained on balanced labels that confidence tends to 1/2, so LIC_M to 25."""
    caps, _, labels = synthetic()
    skin = {i: ("light", "dark")[labels[i] == "female"] for i in labels}
    same = {i: "a person with a thing" for i in caps}
    r = run_lic(same, skin, None, seeds=(0,), epochs=20, device="cpu", progress=False,
                attribute="skin_tone", classifier_options=FAST)
    assert r["details"][0]["accuracy_m"] == 50.0
    assert 25 <= r["lic_m"]["value"] < 27


def test_input_errors():
    caps, human, labels = synthetic()
    with pytest.raises(InputError):
        run_lic(caps, {}, None, seeds=(0,), epochs=1, progress=False)
    with pytest.raises(InputError):
        run_lic(caps, labels, {10**6: ["x"]}, seeds=(0,), epochs=1, progress=False)
    with pytest.raises(InputError):
        run_lic(caps, labels, None, classifier="lstn", seeds=(0,), epochs=1, progress=False)


def test_cli_function_writes_json(tmp_path, capsys):
    typer = pytest.importorskip("typer")  # noqa: F841
    from capaudit.cli.audit_lic import lic_command

    caps, human, labels = synthetic(n=90)
    target = tmp_path / "model.jsonl"
    target.write_text("".join(json.dumps({"image_id": i, "caption": c}) + "\n" for i, c in caps.items()))
    ref = tmp_path / "human.json"
    ref.write_text(json.dumps({"images": [{"id": i} for i in human],
                               "annotations": [{"image_id": i, "id": k, "caption": c}
                                               for i, cs in human.items() for k, c in enumerate(cs)]}))
    demo = tmp_path / "demo.jsonl"
    demo.write_text("".join(json.dumps({"image_id": i, "gender": g, "skin_tone": None}) + "\n"
                            for i, g in labels.items()))
    out = tmp_path / "lic.json"
    lic_command(str(target), reference=str(ref), demographics=demo, classifier="lstm", seeds=1, epochs=1,
                attribute="gender", json_out=out, db=tmp_path / "c.duckdb", device="cpu",
                align_vocab=True, model_path=None, max_length=64, no_cache=False, threads=None)
    printed = capsys.readouterr()
    err = " ".join(printed.err.split())
    # before training: how many images and why, the threads and a calibrated estimate
    assert "LIC on 90 images: of the 90 captioned images, 90 have a gender label and 90 of " \
           "those have human captions in the reference set" in err
    assert "torch threads: " in err and re.search(r"estimated \d+ s", err)
    # one seed: its value, and no "mean ± std" claiming a spread of 0.00
    assert "mean ± std" not in printed.out and "0.00 ±" not in printed.out
    assert "one seed: no spread" in printed.out
    res = json.loads(out.read_text())["sets"]["model"]
    assert set(res) >= {"lic_m", "lic_d", "lic"}
    assert set(res["lic_m"]) == {"value", "std", "seeds"} and list(res["lic_m"]["seeds"]) == ["0"]
    with pytest.raises(InputError):
        lic_command(str(target), reference=None, demographics=None, classifier="lstm", seeds=1, epochs=1,
                    attribute="gender", json_out=None, db=None, device="cpu", align_vocab=True,
                    model_path=None, max_length=64, no_cache=True)
