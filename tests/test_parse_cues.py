"""The parse gate of the hallucination filter (#43): a sentence goes to spaCy only when a rule's
cue concerns a mention whose note is read, and a sentence the gate spares would have got no
note from the parse anyway (checked by parsing it, on real long captions). The batched parse
leaves the lemmatizer and the attribute ruler's Matcher out and gives the same tokens."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("spacy")

from capaudit.filters.nonvisual import TRIGGERS, may_be_non_visual, non_visual_reason  # noqa: E402
from capaudit.filters.parse import (_may_be_use_word, _parse_plan, non_visual_cue,  # noqa: E402
                                    parse_many, token_lemma)


@pytest.mark.parametrize("sentence, cue", [
    ("a table for two people", False),               # "for" without a use word
    ("a bench used for resting", True),              # "used for": the use rule
    ("a sofa perfect for families", True),
    ("a shirt with a floral design", False),         # a use word without "for"
    ("it can rain soon", True),                      # a modal
    ("a man waiting to cross the street", True),     # "to"
    ("a dog on a couch", False),
])
def test_non_visual_cue_by_hand(sentence, cue):
    assert non_visual_cue(sentence.split()) is cue


@pytest.mark.parametrize("word, maybe", [
    ("uses", True), ("using", True), ("designs", True), ("meant", True),
    ("better", True),        # the adjective exceptions: better -> good
    ("safer", True),         # suffix rule: safer -> safe
    ("'nuff", True),         # the attribute ruler's own lemma: enough
    ("table", False), ("people", False), ("for", False), ("readily", False),
])
def test_may_be_use_word_by_hand(word, maybe):
    assert _may_be_use_word(word) is maybe


def test_modifier_gate_asks_only_about_read_mentions():
    tokens = "a dog bed and a cat".split()
    starts = (1, 2, 5)          # dog, bed, cat: "dog" may modify "bed"
    assert _parse_plan(tokens, starts, "corrected", True, False)[1]
    assert _parse_plan(tokens, starts, "corrected", True, False, read=(True, False, False))[1]
    assert not _parse_plan(tokens, starts, "corrected", True, False,
                           read=(False, True, True))[1]


def test_spared_sentences_get_no_note_from_the_parse(shared):
    """Every sentence of 300 real GPT-4V captions that the old word test sent to the parser
    and the cue spares: parsed anyway, no mention of it is non-visual, and the lazy lemma is
    the lemmatizer's on every token."""
    from capaudit.filters.parse import _nlp
    from capaudit.text.sentences import caption_sentences

    path = shared("data", "enriched", "sharegpt4v_gpt4v_coco2017_890.json")
    caps = [next(t["value"] for t in r["conversations"] if t["from"] == "gpt")
            for r in json.loads(path.read_text("utf-8"))[:300]]
    sents = [s for c in caps for s in caption_sentences(c)[1]]
    spared = [s for s in sents if may_be_non_visual(s) and not non_visual_cue(s)]
    assert len(spared) > 50 and all(TRIGGERS.intersection(s) for s in spared)
    for doc in parse_many(spared):
        assert all(non_visual_reason(doc, t.i, token_lemma) is None for t in doc)
    from spacy.tokens import Doc

    from capaudit.filters.parse import _words

    nlp = _nlp()
    full = list(nlp.pipe(Doc(nlp.vocab, words=_words(s)) for s in sents[:400]))
    lazy = parse_many(sents[:400])
    assert [[(t.tag_, t.pos_, str(t.morph), t.dep_, t.head.i, (t.lemma_ or t.text).lower())
             for t in d] for d in full] == \
        [[(t.tag_, t.pos_, str(t.morph), t.dep_, t.head.i, token_lemma(t)) for t in d]
         for d in lazy]


def test_ruler_matches_equal_the_matchers(shared):
    """The attribute ruler's matches by lookup equal spaCy's Matcher's, in order, on the
    sentences of 200 real GPT-4V captions, and the fast path is the one parse_many takes."""
    from spacy.tokens import Doc

    from capaudit.filters.parse import _nlp, _ruler, _words
    from capaudit.filters.ruler_match import ruler_matches
    from capaudit.text.sentences import caption_sentences

    path = shared("data", "enriched", "sharegpt4v_gpt4v_coco2017_890.json")
    caps = [next(t["value"] for t in r["conversations"] if t["from"] == "gpt")
            for r in json.loads(path.read_text("utf-8"))[300:500]]
    nlp = _nlp()
    assert _ruler() is not None
    component, compiled = _ruler()
    docs = nlp.pipe((Doc(nlp.vocab, words=_words(s)) for c in caps
                     for s in caption_sentences(c)[1]), disable=["attribute_ruler", "lemmatizer"])
    n = 0
    for doc in docs:
        assert ruler_matches(doc, compiled) == component.match(doc)
        n += len(doc)
    assert n > 30_000


def test_ruler_matches_equal_the_matchers_on_the_patterns_own_words():
    """The words the ruler's first tokens name or search for ("nothin'", "y'all", "ai n't",
    "gon na", "do", "is"...) next to other words, in several orders: the lookup (which
    merges every other word into one signature) gives the Matcher's matches."""
    import random

    from spacy.tokens import Doc

    from capaudit.filters.parse import _nlp, _ruler, _words
    from capaudit.filters.ruler_match import ruler_matches

    nlp = _nlp()
    component, compiled = _ruler()
    named = sorted(w for w in compiled["words"] if isinstance(w, str))
    assert len(named) > 50 and compiled["regexes"]
    pool = named + ["nothin'", "nuthin'", "y'", "y", "all", "dog", "dogs", "the", "a", "run",
                    "ran", "to", "there", "'s", "n't", "na", "ta", "on", "that", ".", ","]
    rng = random.Random(7)
    sents = [[rng.choice(pool) for _ in range(rng.randint(1, 12))] for _ in range(1500)]
    docs = nlp.pipe((Doc(nlp.vocab, words=_words(s)) for s in sents),
                    disable=["attribute_ruler", "lemmatizer"])
    n = 0
    for doc in docs:
        assert ruler_matches(doc, compiled) == component.match(doc)
        n += len(doc)
    assert n > 8_000 and -1 in compiled["named"].values()


def test_the_pipeline_without_what_it_never_reads_parses_the_same(shared):
    """parse._nlp loads without spaCy's tokenizer (neither its data nor the one
    ``Language.__init__`` would build: a stand-in that refuses text), entities, sentence
    splitter, and its lemmatizer's index held as sets: the parses, lemmas and the words'
    lexeme features (NORM, SHAPE, PREFIX, SUFFIX: what tok2vec reads) of 400 real sentences
    equal those of the pipeline as spaCy loads it (docs built from the same words), and so
    does the lazy lemma."""
    import spacy
    from spacy.tokens import Doc

    from capaudit.filters.parse import SPACY_MODELS, UNREAD, _nlp, _words
    from capaudit.filters.spacy_pipeline import _lemmatize
    from capaudit.text.sentences import caption_sentences

    assert "tokenizer" in UNREAD and "tokenizer" not in _nlp().pipe_names
    from spacy.tokenizer import Tokenizer

    assert not isinstance(_nlp().tokenizer, Tokenizer)
    with pytest.raises(TypeError):
        _nlp()("a dog on a bed")
    path = shared("data", "enriched", "sharegpt4v_gpt4v_coco2017_890.json")
    caps = [next(t["value"] for t in r["conversations"] if t["from"] == "gpt")
            for r in json.loads(path.read_text("utf-8"))[500:560]]
    sents = [s for c in caps for s in caption_sentences(c)[1]][:400]
    for name in SPACY_MODELS:
        try:
            whole = spacy.load(name, exclude=["ner"])
            break
        except OSError:
            continue

    def view(nlp):
        return [[(t.tag_, t.pos_, str(t.morph), t.dep_, t.head.i, t.lemma_, t.norm_, t.shape_,
                  t.prefix_, t.suffix_) for t in d]
                for d in nlp.pipe(Doc(nlp.vocab, words=_words(s)) for s in sents)]

    _lemmatize()   # the lemma index held as sets from here on
    want = view(whole)
    assert len(sents) == 400 and want == view(_nlp())
    # the lazy lemma (remembered by text, pos, morph) on the batched parse, twice
    for _ in range(2):
        assert [[(t.lemma_ or t.text).lower() for t in d] for d in whole.pipe(
            Doc(whole.vocab, words=_words(s)) for s in sents)] == \
            [[token_lemma(t) for t in d] for d in parse_many(sents)]
