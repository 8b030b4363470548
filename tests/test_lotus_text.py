"""LOTUS per-caption text measures: NSFW matching, people words, spaCy features, scene graph,
noun/verb coverage -- on hand-made sentences with hand-derived answers."""

from __future__ import annotations

import math

import pytest

from capaudit.metrics.features.word_coverage import coverage, reference_words
from capaudit.metrics.features.nsfw import NsfwMatcher, get_matcher
from capaudit.metrics.features.people import gender_mention, skin_tone_mention


# ---- NSFW -----------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "A football match in Scunthorpe", "a cocktail on the bar", "experts assess the damage",
    "the therapist's office", "a class of children", "grapes and a bass guitar",
    "a cocktails menu", "a shitake-free dish", "Essex county", "a hancock building"])
def test_nsfw_no_false_positive_inside_words(text):
    assert get_matcher().hits(text) == []


@pytest.mark.parametrize("text,hit", [
    ("An ASS standing in a field", "ass"), ("a Nude statue", "nude"),
    ("he saw 2 girls 1 cup", "2 girls 1 cup"), ("the G-Spot", "g-spot"),
    ("an S&M club sign", "s&m")])
def test_nsfw_whole_words_and_phrases_case_insensitive(text, hit):
    assert get_matcher().hits(text) == [hit]


def test_nsfw_phrase_needs_all_its_words_in_order():
    m = NsfwMatcher(["blue waffle", "waffle house special"])
    assert m.hits("a blue waffle") == ["blue waffle"]
    assert m.hits("a waffle, blue") == []
    assert m.hits("blue and waffle") == []


def test_packaged_list_is_the_shared_one(shared):
    lex = shared("lexicons", "ldnoobw_en.txt")
    entries = [e for e in lex.read_text(encoding="utf-8").splitlines() if e.strip()]
    assert len(get_matcher().phrases) == len(entries) == 403
    assert set(get_matcher().phrases.values()) == {e.strip().lower() for e in entries}
    assert sum(1 for p in get_matcher().phrases if len(p) > 1) >= 100  # multi-word entries kept


# ---- people words ------------------------------------------------------------
def test_gender_and_skin_tone_mentions():
    caps = ["a black cat on a white sofa", "A Black man and a white woman",
            "a dark skinned girl", "an African American boy", "caucasian tourists",
            "her dog", "his hat"]
    light, dark = skin_tone_mention(caps)
    assert light.tolist() == [False, True, False, False, True, False, False]
    assert dark.tolist() == [False, True, True, True, False, False, False]
    man, woman = gender_mention(caps)
    assert man.tolist() == [False, True, False, True, False, False, True]
    assert woman.tolist() == [False, True, True, False, False, True, False]


# ---- coverage -------------------------------------------------------------------
def test_coverage_recall_and_precision_hand_derived():
    ref = reference_words([1, 1, 2], [{"nouns": ["dog", "frisbee"], "verbs": []},
                                      {"nouns": ["dog", "park"], "verbs": []},
                                      {"nouns": [], "verbs": []}], "nouns")
    assert ref == {1: frozenset({"dog", "frisbee", "park"}), 2: frozenset()}
    feats = [{"nouns": ["dog", "ball"]}, {"nouns": []}, {"nouns": ["cat"]}, {"nouns": ["dog"]}]
    rec, prec = coverage([1, 1, 2, 3], feats, "nouns", ref)
    assert rec[0] == pytest.approx(1 / 3) and prec[0] == pytest.approx(1 / 2)
    assert rec[1] == 0 and math.isnan(prec[1])          # no caption nouns: no precision
    assert math.isnan(rec[2]) and prec[2] == 0           # references without nouns: no recall
    assert math.isnan(rec[3]) and math.isnan(prec[3])    # image without references


# ---- spaCy features and scene graph ------------------------------------------------
@pytest.fixture(scope="module")
def nlp():
    pytest.importorskip("spacy")
    from capaudit.metrics.features.parse import load_nlp

    try:
        return load_nlp()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"spaCy model missing: {exc}")


def test_lemmas_not_surface_forms(nlp):
    from capaudit.metrics.features.parse import doc_features

    f = doc_features(nlp("Two dogs are chasing the frisbees."))
    assert "dog" in f["nouns"] and "frisbee" in f["nouns"] and "dogs" not in f["nouns"]
    assert f["verbs"] == ["chase"]
    ref = {1: frozenset(doc_features(nlp("A dog chases a frisbee."))["nouns"])}
    rec, prec = coverage([1], [f], "nouns", ref)
    assert rec[0] == 1.0 and prec[0] == 1.0           # plural caption covers singular reference


def test_dependency_depth_hand_derived(nlp):
    from capaudit.metrics.features.parse import doc_features

    # "Dogs run." : run(root, 1) -> Dogs, . (2)  => depth 2
    # "A man rides a big horse." : rides(1) -> man, horse (2) -> a, big (3) => depth 3
    f = doc_features(nlp("Dogs run. A man rides a big horse."))
    assert f["sentences"] == 2
    assert f["depth"] == pytest.approx(2.5)                # mean over the sentences
    # holds(1) -> man(2) -> in(3) -> shirt(4) -> red(5)
    assert doc_features(nlp("The man in the red shirt holds a cup of hot coffee."))["depth"] == 5


@pytest.mark.parametrize("text,objects,attributes,relations", [
    ("A man in a red shirt is riding a brown horse on the beach.",
     {"man", "shirt", "horse", "beach"}, {("shirt", "red"), ("horse", "brown")},
     {("man", "in", "shirt"), ("man", "ride on", "beach")}),
    ("The car is red.", {"car"}, {("car", "red")}, set()),
    ("A woman holds a tennis racket.", {"woman", "tennis racket"}, set(),
     {("woman", "hold", "tennis racket")}),
    ("A red and white bus parked on the street.", {"bus", "street"},
     {("bus", "red"), ("bus", "white")}, {("bus", "park on", "street")}),
    ("Two dogs sit near it.", {"dog"}, {("dog", "two")}, set()),
    ("The man in the red shirt holds a cup of hot coffee.", {"man", "shirt", "cup", "coffee"},
     {("shirt", "red"), ("coffee", "hot")},
     {("man", "in", "shirt"), ("man", "hold", "cup"), ("cup", "of", "coffee")}),
])
def test_scene_graph_known_graphs(nlp, text, objects, attributes, relations):
    from capaudit.metrics.features.scene_graph import scene_graph

    g = scene_graph(nlp(text))
    assert g.objects == objects
    assert g.attributes == attributes
    # the small model lemmatises "riding" as "rid": compare relations modulo that lemma
    assert {(s, p.replace("rid", "ride") if p.startswith("rid") and not p.startswith("ride")
             else p, o) for s, p, o in g.relations} >= relations
    assert g.nodes == len(g.objects) + len(g.attributes) + len(g.relations)


def test_parse_cache_in_store_parses_nothing_again(nlp, tmp_path, monkeypatch):
    from capaudit.metrics.features import parse
    from capaudit.store.db import Store

    texts = ["A dog runs on the grass.", "A cat sleeps.", "A dog runs on the grass."]
    with Store(tmp_path / "c.duckdb") as store:
        first = parse.parse_features(texts, store)
        calls = []
        real = parse.load_nlp(parse.MODEL)

        class Spy:
            meta = real.meta

            def pipe(self, todo, **kw):
                calls.append(list(todo))
                return real.pipe(todo, **kw)

        monkeypatch.setattr(parse, "load_nlp", lambda model=parse.MODEL: Spy())
        again = parse.parse_features(texts + ["A bird flies."], store)
    assert again[:3] == first and first[0] == first[2]
    assert calls == [["A bird flies."]]                # only the new text was parsed
    assert first[1]["depth"] == 3                        # sleeps -> cat -> A
