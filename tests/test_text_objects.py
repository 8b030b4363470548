"""Object mentions (reference and corrected modes), singularization, gender words, CHAIR GT."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from capaudit.text.gender import predict_gender
from capaudit.text.records import build_records
from capaudit.text.singularize import singularize, singularize_corrected

SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
COCO = SHARED / "data" / "coco2014"
needs_shared = pytest.mark.skipif(not COCO.is_dir(), reason=f"shared data not found at {COCO} "
                                  "(set CAPAUDIT_SHARED)")


def cats(caption: str, mode: str = "reference") -> list[str]:
    rec = build_records([caption], mode=mode, workers=1)
    return [m.category for m in rec.mentions(0)]


def test_singularize_reference_exceptions():
    assert singularize("dogs") == "dog"
    assert singularize("bus") == "bu"            # the reference's miss, kept
    assert singularize("jeans") == "jean"
    for w in ("as", "christmas", "cookies", "veggies", "collies", "doggies"):
        assert singularize(w) == w
    assert singularize_corrected("bus") == "bus"
    assert singularize_corrected("ties") == "tie"


def test_reference_rules():
    assert cats("a baby elephant next to a man") == ["elephant", "person"]
    assert cats("a passenger jet on the runway") == ["airplane"]
    assert cats("a man wearing a bow tie") == ["person", "tie"]
    assert cats("a toilet seat and a seat") == ["toilet"]          # every seat dropped
    assert cats("two wine glasses on a table") == ["wine glass", "dining table"]
    assert cats("a hot dog with a dog") == ["hot dog", "dog"]
    assert cats("a train on the train track") == ["train"]          # 'train track' consumed
    assert cats("a red bus") == []                                  # bus -> 'bu'
    assert cats("a motor bike") == []                               # ' motor bike' unmatchable
    assert cats("a stove top oven") == ["oven", "oven"]
    assert cats("two doggies and collies") == []


def test_corrected_mode_fixes():
    assert cats("a red bus", "corrected") == ["bus"]
    assert cats("a motor bike", "corrected") == ["motorcycle"]
    assert cats("a stove top oven", "corrected") == ["oven"]
    assert cats("men wearing ties", "corrected") == ["person", "tie"]
    assert cats("an iPhone", "corrected") == ["cell phone"]
    assert cats("a cheesecake", "corrected") == ["cake"]


def test_mention_positions():
    rec = build_records(["A dog. Then a cat sat on the sofa."], workers=1)
    got = [(m.word, m.category, m.token, m.sentence) for m in rec.mentions(0)]
    assert got == [("dog", "dog", 1, 0), ("cat", "cat", 5, 1), ("sofa", "couch", 9, 1)]
    assert rec.n_sentences[0] == 2


def test_gender_words():
    assert predict_gender(["a", "man", "and", "his", "dog"]) == "male"
    assert predict_gender(["a", "woman", "with", "her", "dog"]) == "female"
    assert predict_gender(["a", "man", "and", "a", "woman"]) == "neutral"
    assert predict_gender(["a", "person"]) == "neutral"


@needs_shared
def test_chair_gt_rebuilt_from_subset_is_contained_in_the_shared_table():
    from capaudit.io.annotation_files import load_chair_gt, load_instances
    from capaudit.text.chair_gt import build_chair_gt
    coco = json.loads((COCO / "captions_val2014_subset.json").read_text(encoding="utf-8"))
    ids = [a["image_id"] for a in coco["annotations"]]
    caps = [a["caption"] for a in coco["annotations"]]
    inst, _ = load_instances(COCO / "instance_categories_val2014.jsonl")
    gt = load_chair_gt(COCO / "chair_objects_trainval2014.jsonl")
    sub = set(ids)
    from_captions = build_chair_gt(None, ids, caps, workers=2)
    assert set(from_captions) == sub
    # the subset has some of each image's captions: every object they mention must be
    # in the reference table (built from all captions plus instances)
    for iid in sub:
        assert from_captions[iid] <= gt[iid], iid
    # with instances: the shared instance file (kayburns' gt_labels) is not the instance
    # set the reference used -- 325 images have a category the CHAIR table lacks, and
    # about half the images miss some instance category the table has (small objects:
    # chair, cup, bottle...) -- so equality cannot be tested honestly. Containment can,
    # wherever the two instance sources agree in that direction.
    built = build_chair_gt({i: inst[i] for i in sub if i in inst}, ids, caps, workers=2)
    agree = [i for i in sub if inst.get(i, frozenset()) <= gt[i]]
    assert len(agree) > 0.9 * len(sub)
    for iid in agree:
        assert from_captions[iid] | inst.get(iid, frozenset()) == built[iid] <= gt[iid]
