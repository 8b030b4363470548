"""The indexed singularizer (text/singular_rules) gives textblob's own answers: on every token
of the shared captions, and on the words of textblob's tables and their variants (the places
where the order of the tables and rules decides)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from capaudit.text.singular_rules import indexed_singularize
from capaudit.text.singularize import _textblob

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_sentence_spans import needs_shared  # noqa: E402


def _inflect():
    _textblob()
    return sys.modules["_capaudit_textblob_inflect"]


def _check(words) -> int:
    inflect = _inflect()
    fast = indexed_singularize(inflect)
    for w in words:
        assert fast(w) == inflect.singularize(w), w
    return len(words)


def _table_words() -> set[str]:
    inflect = _inflect()
    base = {*inflect.singular_uninflected, *inflect.singular_uncountable, *inflect.singular_ie,
            *inflect.singular_s, *inflect.singular_irregular, *inflect.singular_irregular.values(),
            *inflect.plural_prepositions}
    out = set(base)
    for w in base:
        for end in ("", "s", "es", "ies", "ves", "ses", "ices", "i", "a", "ae", "en", "ose"):
            out |= {w + end, w[1:] + end, w[2:] + end, "x" + w + end, w[:-1] + end}
    return {w for w in out if w}


def test_the_tables_words_and_their_variants():
    assert _check(sorted(_table_words())) > 2000


def test_the_rules_endings_and_words_outside_the_fast_path():
    rng = random.Random(43)
    endings = ["ae", "itis", "eaux", "quizzes", "matrices", "indices", "oxen", "aliases", "octopi",
               "viri", "crises", "axes", "shoes", "oes", "buses", "mice", "lice", "boxes", "movies",
               "zombies", "series", "flies", "calves", "leaves", "dwarves", "nerves", "wives",
               "wolves", "caves", "passives", "hives", "knives", "analyses", "bases", "synopses",
               "ellipses", "poses", "glucose", "diagnoses", "media", "news", "dogs", "s", "ies"]
    words = [p + e for e in endings for p in ("", "a", "re", "ox", "xx", "tion")]
    words += ["".join(rng.choice("aeiosuxnlrvtdcmb") for _ in range(rng.randint(1, 9)))
              for _ in range(20_000)]
    # hyphens (a preposition after the first one recurses), apostrophes, digits, punctuation,
    # and what textblob's own function answers: capitals, non-ASCII, a final line break
    words += ["".join(rng.choice("aeisvxnoe-'.,0S\nſ") for _ in range(rng.randint(1, 9)))
              for _ in range(20_000)]
    words += ["mothers-in-law", "passers-by", "dogs'", "cats'-in-law", "Dogs", "CATS", "ſs", "café",
              "2s", "x-rays", "", "'", "-", "dogs\n", "1990s", "3.5", ",", "...", "t-shirts", "o'es"]
    assert _check(words) > 40_000


@needs_shared
@pytest.mark.slow
def test_every_token_of_the_shared_captions():
    from test_tokenize_exact import _shared_captions

    from capaudit.text.tokenize import tokenize_caption

    words = set()
    for cap in _shared_captions():
        for sent in tokenize_caption(cap)[0]:
            words.update(sent)
    assert _check(sorted(words)) > 20_000
