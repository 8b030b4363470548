"""``--lexicon FILE``: a user's categories and synonyms replace COCO's 80 for mentions, recall
and CHAIR; COCO stays the default."""

from __future__ import annotations

import pytest

from capaudit.audit.engine import audit_captions
from capaudit.errors import InputError
from capaudit.io.annotation_files import Annotations
from capaudit.text.objects import get_lexicon, user_lexicon_mode


@pytest.fixture
def lexicon(tmp_path):
    path = tmp_path / "lvis_small.txt"
    path.write_text("dog, puppy, Doggy\nsofa, couch, settee\nwine bottle, bottle of wine\n"
                    "skateboard ramp, half pipe\n", encoding="utf-8")
    return user_lexicon_mode(path)


def test_user_lexicon_finds_its_own_categories(lexicon):
    caps = ["A puppy sleeps on a settee.", "Two dogs near a half pipe.",
            "A bottle of wine and a cat on a couch."]
    ids = [1, 2, 3]
    # evidence in the user's label set (e.g. an LVIS detector): image 3 has no sofa
    ann = Annotations(instances={1: frozenset({"dog", "sofa"}), 2: frozenset({"dog"}),
                                 3: frozenset({"wine bottle", "cat"})},
                      chair_gt={1: frozenset({"dog", "sofa"}), 2: frozenset({"dog"}),
                                3: frozenset({"wine bottle", "cat"})})
    res = audit_captions(ids, caps, ann, metrics=["chair_s", "chair_i", "recall"], n_boot=0,
                         workers=1, mode=lexicon)
    # mentions by hand: 1 {dog, sofa}, 2 {dog, skateboard ramp}, 3 {wine bottle, sofa};
    # 'cat' is not in this lexicon. Hallucinated: 2 'skateboard ramp', 3 'sofa'
    assert res.results["chair_s"].value == pytest.approx(100 * 2 / 3)
    assert res.results["chair_i"].value == pytest.approx(100 * 2 / 6)
    # recall over the user's categories present in the evidence: 1: 2/2, 2: 1/1, 3: 1/1 (cat
    # is no category of this lexicon, so it cannot be recalled nor missed)
    assert res.results["recall"].value == pytest.approx(100.0)
    assert get_lexicon(lexicon).categories == ["dog", "sofa", "wine bottle", "skateboard ramp"]


def test_coco_stays_the_default():
    assert len(get_lexicon("reference").categories) == 80


def test_bad_lexicon_is_one_line(tmp_path):
    (tmp_path / "empty.txt").write_text("\n , \n")
    with pytest.raises(InputError, match="no categories"):
        user_lexicon_mode(tmp_path / "empty.txt")
    with pytest.raises(InputError, match="cannot read"):
        user_lexicon_mode(tmp_path / "missing.txt")
