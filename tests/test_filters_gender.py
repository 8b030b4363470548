"""gender-neutral and gender-balance filters on real captions and labels."""

from __future__ import annotations

import json
from collections import Counter
from itertools import islice

import pytest

from capaudit.filters.base import CaptionDoc
from capaudit.filters.gender import GenderNeutralFilter, neutralize
from capaudit.filters.gender_balance import GenderBalanceFilter
from capaudit.filters.runner import apply_filter
from capaudit.text.gender import predict_gender
from capaudit.text.tokenize import tokenize


@pytest.fixture(scope="module")
def labels():
    from capaudit.io.annotation_files import load_demographics
    from tests.conftest import shared_path

    return load_demographics(shared_path("data", "coco2014", "demographics_val2014.jsonl"))[0]


def _docs(path, n):
    with open(path, encoding="utf-8") as fh:
        recs = [json.loads(line) for line in islice(fh, n)]
    return [CaptionDoc(i, r["image_id"], r["caption"]) for i, r in enumerate(recs)]


@pytest.mark.parametrize("src, want", [
    ("A man riding a surfboard .", "A person riding a surfboard ."),
    ("a woman holding her phone next to her .", "a person holding their phone next to them ."),
    ("a male surfer and an actress", "a surfer and an actor"),
    ("she is holding a man's umbrella", "they are holding a person's umbrella"),
    ("two women and a girl", "two people and a child"),
    ("a policeman on a horse", "a police officer on a horse"),
])
def test_neutralize_keeps_grammar(src, want):
    assert neutralize(src)[0] == want


def test_neutral_always_removes_predicted_gender(shared):
    docs = _docs(shared("data", "captioners", "sat_val2014_gender.jsonl"), 300)
    out = apply_filter(GenderNeutralFilter(labels={}, when="always"), docs)
    caps = out.captions.column("caption").to_pylist()
    assert len(caps) == len(docs)  # nothing is dropped, only revised
    assert {predict_gender(tokenize(c)) for c in caps} == {"neutral"}
    s = out.summary
    assert s.sentences_in == s.kept + s.dropped and s.dropped == 0
    n_gendered = sum(predict_gender(tokenize(d.caption)) != "neutral" for d in docs)
    assert s.actions["revise"] >= n_gendered > 0
    i = out.log["action"].index("revise")
    assert out.log["original"][i] == docs[i].caption.strip() and out.log["revised"][i]


def test_neutral_contradicted_only_touches_wrong_words(shared, labels):
    docs = _docs(shared("data", "captioners", "nic_val2014_gender.jsonl"), 400)
    out = apply_filter(GenderNeutralFilter(labels=labels, when="contradicted"), docs)
    revised = [i for i, a in enumerate(out.log["action"]) if a == "revise"]
    assert revised
    for i in revised:
        d = docs[i]
        pred, lab = predict_gender(tokenize(d.caption)), labels.get(d.image_id)
        assert lab is not None and pred != lab  # contradicted (or mixed) captions only
        assert "contradicts label" in out.log["reason"][i]
    kept_same = [i for i, a in enumerate(out.log["action"]) if a == "keep"]
    caps = out.captions.column("caption").to_pylist()
    assert all(caps[i] == docs[i].caption for i in kept_same)


def test_neutral_needs_labels_unless_always():
    from capaudit.errors import InputError

    with pytest.raises(InputError, match="--demographics"):
        GenderNeutralFilter(when="unknown").setup(None)
    with pytest.raises(InputError, match="--when"):
        GenderNeutralFilter(when="sometimes")


def test_balance_overall(shared, labels):
    docs = _docs(shared("data", "captioners", "updn_val2014_gender.jsonl"), 1000)
    f = GenderBalanceFilter(labels=labels, seed=1)
    out = apply_filter(f, docs)
    ids = out.captions.column("image_id").to_pylist()
    after = Counter(labels[i] for i in ids if labels.get(i) in ("male", "female"))
    assert after["male"] == after["female"] > 0
    bal = out.summary.as_dict()["balance"]
    assert bal["images_after"] == {"man": after["male"], "woman": after["female"]}
    s = out.summary
    assert s.sentences_in == s.kept + s.dropped == len(docs)
    assert s.dropped == bal["images_removed"]  # one caption per image here
    again = apply_filter(GenderBalanceFilter(labels=labels, seed=1), docs)
    assert again.captions.column("image_id").to_pylist() == ids  # seeded


def test_balance_per_object_reduces_skew(shared, labels):
    from capaudit.io.annotation_files import load_instances

    inst = load_instances(shared("data", "coco2014", "instance_categories_val2014.jsonl"))[0]
    docs = _docs(shared("data", "captioners", "oscar_val2014_gender.jsonl"), 1500)
    f = GenderBalanceFilter(labels=labels, objects=inst, by="object", tolerance=0.1,
                            min_images=20)
    out = apply_filter(f, docs)
    co = out.summary.extra["cooccurrence"]

    def worst(table):
        return max(abs(v["man_share"] - 0.5) for v in table.values()
                   if v["man_share"] is not None and v["man"] + v["woman"] >= 20)

    assert worst(co["after"]) < worst(co["before"])
    s = out.summary
    assert s.sentences_in == s.kept + s.dropped and s.dropped > 0
