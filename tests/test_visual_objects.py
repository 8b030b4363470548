"""The larger object vocabulary (object mode ``visual``, issue #42): CHAIR's machinery over
~1,500 visual nouns, its hierarchy, and the rule that generic words decide nothing.
Every expectation is derived by hand from the packaged files."""

from __future__ import annotations

import pytest

from capaudit.text.mentions import caption_mentions
from capaudit.text.objects import VISUAL_MODE, get_lexicon
from capaudit.text.visual_objects import hierarchy, named_categories, related_categories


def words(caption: str) -> list[tuple[str, str]]:
    return [(m.word, m.category) for m in caption_mentions(caption, VISUAL_MODE)[1]]


def test_the_vocabulary_is_large_and_keeps_coco_names():
    lex = get_lexicon(VISUAL_MODE)
    assert 1400 <= len(lex.categories) <= 2000
    coco = get_lexicon("corrected").categories
    assert set(coco) <= set(lex.categories)   # a COCO word keeps its COCO category
    assert lex.mode == VISUAL_MODE


@pytest.mark.parametrize("caption, expected", [
    # objects outside COCO's 80, as people mark them (issue #42)
    ("A tall tree under a blue sky.", [("tree", "tree"), ("sky", "sky")]),
    ("He wears a shirt near a building.", [("shirt", "shirt"), ("building", "building")]),
    # plurals are singularized as corrected mode reads them
    ("Two trees and three shirts.", [("tree", "tree"), ("shirt", "shirt")]),
    ("Clouds over the buses.", [("cloud", "cloud"), ("bus", "bus")]),
    # CHAIR's synonyms still map to COCO's category
    ("A man on a sofa with a puppy.", [("man", "person"), ("sofa", "couch"), ("puppy", "dog")]),
    # multi-word entries are one mention, consumed whole
    ("A palm tree by a stop sign.", [("palm tree", "palm tree"), ("stop sign", "stop sign")]),
    ("A fire hydrant on the sidewalk.", [("fire hydrant", "fire hydrant"),
                                         ("sidewalk", "sidewalk")]),
])
def test_mentions_synonyms_plurals_multiword(caption, expected):
    assert words(caption) == expected


@pytest.mark.parametrize("caption", [
    "The image shows a scene with some object in the background.",
    "On the left side, the top part of the front area.",
    "Overall, it is a nice picture of a thing.",
    "Her face and hand are visible.",          # body parts: present whenever a person is
    "You can see that it is light.",           # verbs and adjectives a look-up cannot tell
])
def test_generic_words_decide_nothing(caption):
    assert words(caption) == []


def test_hierarchy_relates_hypernyms_and_hyponyms():
    tree = hierarchy(VISUAL_MODE)
    assert "animal" in tree["dog"] and "dog" in tree["animal"]
    assert "fruit" in tree["apple"] and "food" in tree["apple"]   # two levels: food > fruit
    assert related_categories({"bird"}) >= {"bird", "animal", "eagle"}
    assert hierarchy("corrected") == {}     # COCO's modes have no hierarchy


def test_named_categories_of_reference_texts():
    refs = ["Two puppies sleep on a couch.", "A dog and a cat under a tree."]
    assert named_categories(refs) == {"dog", "couch", "cat", "tree"}


@pytest.mark.parametrize("caption", [
    "In the heart of the image, a dog sleeps.",      # the idiom, not the organ or shape
    "A muted colour palette.",
    "A rich tapestry of textures.",
])
def test_figurative_nouns_decide_nothing(caption):
    assert [c for _, c in words(caption)] == (["dog"] if "dog" in caption else [])


def test_a_parent_is_a_category_of_its_own():
    """CHAIR lists "container" as a synonym of bowl: a bowl is no parent of cups and bottles
    (the builder's "container:" line used to resolve to bowl)."""
    tree = hierarchy(VISUAL_MODE)
    assert "bowl" not in tree.get("cup", ()) and "bottle" not in tree.get("bowl", ())
    assert related_categories({"cup"}) == {"cup"}


def test_parts_of_a_whole():
    from capaudit.text.visual_objects import parts

    p = parts(VISUAL_MODE)
    assert {"window", "door"} <= p["building"] and "screen" in p["laptop"]
    assert "leaf" in p["tree"] and "wheel" in p["car"]
    coco = set(get_lexicon("corrected").categories)
    assert not set().union(*p.values()) & coco   # the CHAIR ground truth judges COCO's 80
    assert "building" not in p.get("window", ()) and parts("corrected") == {}
