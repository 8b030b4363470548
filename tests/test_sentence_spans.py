"""``sentence_spans`` equals untrained Punkt's own spans on every input, whichever path it takes.

The filters cut captions at these spans and judge sentence ``i`` by the tokens of the
tokenizer's sentence ``i``, so the spans must be Punkt's exactly (what
``capaudit.text.mentions.sentence_spans`` computed with ``span_tokenize`` before the fast
rules of :mod:`capaudit.text.sentences`). The reference below is that computation, kept
here verbatim; it is compared on every shared caption, the real GPT-4V captions, the
benchmark's rotated copies, and random text over the characters where the rules differ.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capaudit.text.fast_tokenize import _problem
from capaudit.text.mentions import sentence_spans as mention_spans
from capaudit.text.nltk_tokenize import nltk_tokenize_sentences
from capaudit.text.sentences import _fast_spans, caption_sentences, sentence_spans
from capaudit.text.tokenize import tokenize_caption

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hallucination_reference import punkt_reference  # noqa: E402

SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
DATA = SHARED / "data"
needs_shared = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared data not found at {DATA} "
                                  "(set CAPAUDIT_SHARED)")


def _check(caption: str) -> None:
    ref = punkt_reference(caption)
    assert sentence_spans(caption) == ref, repr(caption)
    assert mention_spans(caption) == ref, repr(caption)
    # one pass: Punkt's spans and NLTK's own sentence tokens (Punkt, then its word tokenizer)
    assert caption_sentences(caption) == (ref, nltk_tokenize_sentences(caption.lower())), \
        repr(caption)


def _files_captions() -> list[str]:
    from test_tokenize_exact import _shared_captions  # every shared caption, distinct

    return _shared_captions()


def _gpt4v_captions() -> list[str]:
    rows = json.loads((DATA / "enriched" / "sharegpt4v_gpt4v_coco2017_890.json").read_text("utf-8"))
    return [next(t["value"] for t in r["conversations"] if t["from"] == "gpt") for r in rows]


@needs_shared
@pytest.mark.slow
def test_every_shared_caption_has_punkts_spans():
    caps = _files_captions()
    assert len(caps) > 90_000
    for cap in caps:
        _check(cap)


@needs_shared
def test_gpt4v_captions_and_their_copies_have_punkts_spans():
    """The 890 long GPT-4V captions (14% off the fast path: markdown, quotes, times) and
    rotated copies of them, as the filter benchmark makes them."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from filter_data import copy_caption

    caps = _gpt4v_captions()
    off_fast = sum(_problem(c.lower()) >= 0 for c in caps)
    assert 50 < off_fast < len(caps) - 500  # both paths are exercised
    for k, cap in enumerate(caps):
        _check(cap)
        _check(copy_caption(cap, k + 1))
        # the spans cut the caption where the tokenizer cuts its sentence tokens
        assert len(sentence_spans(cap)) == len(tokenize_caption(cap)[0]), cap


@pytest.mark.parametrize("caption, spans", [
    ("A dog. A cat.", [(0, 6), (7, 13)]),
    ("  A dog.   A cat  ", [(2, 8), (11, 16)]),
    ("a t.v on a stand. ok", [(0, 17), (18, 20)]),    # 't.v': no break inside a word
    ("a t.v. on a stand. ok", [(0, 6), (7, 18), (19, 21)]),  # untrained: 't.v.' ends one
    ("wait... a dog. x", [(0, 14), (15, 16)]),        # an ellipsis before a word ends nothing
    ("a dog .", [(0, 7)]),
    ("a dog. ", [(0, 6)]),
    ("", []),
    ("   ", []),
    # a problem segment ('**'), and a number before a period, which Punkt does not break at
    ("A **red** car. It's 10:30. Go", [(0, 14), (15, 29)]),
])
def test_hand_derived_spans(caption, spans):
    assert sentence_spans(caption) == spans
    assert punkt_reference(caption) == spans


def test_fast_rule_alone_on_its_own_path():
    """Where the tokenizer's fast path applies, the period rule alone gives Punkt's spans."""
    rng = random.Random(5)
    pieces = ("a man dog's dogs table. it 's , . - x-ray 3 10 a. the bus ties st. mr. "
              "t.v. u.s field.. so... what?. ball,. woman's (a) [b] ; : <unk> x").split(" ")
    pieces += [" ", "  ", "\t", "\n", ". ", ".\n", ".  "]
    checked = 0
    for _ in range(4000):
        text = " ".join(rng.choice(pieces) for _ in range(rng.randint(0, 16)))
        if rng.random() < 0.4:
            text = text.replace(" .", ".")
        if _problem(text) < 0:
            checked += 1
            assert _fast_spans(text, 0, len(text)) == punkt_reference(text), repr(text)
    assert checked > 1000


TRICKY = list(".,:;'\"`?!()[]{}<>-/&$%#@*=0123456789 \t\n") + ["\u201c", "\u201d", "\u2019",
                                                                 "é", "\u212a", "\u0130", "\u2013"]
WORDS = ["a", "dog", "Mr", "st", "x-ray", "it's", "don't", "n't", "'s", "cannot", "t.v.", "u.s.",
         "3.5", "10:30", "1,000", "ball,", "sign\"", "drawer?", "no!", "field..", "so...", "--",
         "**bold**", "kites.are", "it's.", "2:08.", "(a).", "A", "The"]
piece = st.one_of(st.sampled_from(TRICKY), st.sampled_from(WORDS),
                  st.sampled_from([". ", ".. ", "? ", ", ", ".\n\n", ". A "]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.lists(piece, max_size=30).map("".join),
                 st.lists(piece, max_size=30).map(" ".join)))
def test_random_tricky_text_has_punkts_spans(text):
    _check(text)


@needs_shared
@pytest.mark.parametrize("seed", [0, 1])
def test_random_joins_of_real_captions_have_punkts_spans(seed):
    """Long captions joined from real ones, the unusual ones over-represented, with varied
    separators: the segmented path must give the whole caption's spans."""
    rng = random.Random(seed)
    caps = _gpt4v_captions() + _files_captions()[-3000:]
    odd = [c for c in caps if _problem(c.lower()) >= 0]
    seps = [" ", "  ", "\n", " \t", ". ", ".  ", "! ", "? ", ", ", "\" ", " '", ") ", "\n\n"]
    for _ in range(400):
        parts = [rng.choice(odd if rng.random() < 0.5 else caps) for _ in range(rng.randint(2, 5))]
        text = parts[0]
        for p in parts[1:]:
            text += rng.choice(seps) + p
        _check(text + rng.choice([".", " .", "?", ".\"", ""]))
