"""Tokenisation and protected-attribute masking for LIC.

LIC asks whether a caption reveals the person's gender *without* the explicit
gender words, so those words are replaced before any classifier sees the text.
The word lists are the reference's (rebnej/lick-caption-bias): a token is
masked only when it equals a listed word exactly (whole token, lowercase), so
"manhole" or "woman's" split as ``woman`` + ``'s`` behave as in the reference.

Tokenisation uses NLTK's Treebank-style word tokenizer, the same rules as the
reference's ``nltk.word_tokenize`` minus the sentence splitter (which needs the
punkt data files; captions are one sentence, so the output is the same). When
NLTK is missing a regex fallback with the same behaviour on plain captions is
used. Text is lowercased first: the reference lowercases human captions and the
model captions it ships are already lowercase.
"""

from __future__ import annotations

import re
from functools import lru_cache

MASCULINE = (
    "man", "men", "male", "father", "gentleman", "gentlemen", "boy", "boys", "uncle",
    "husband", "actor", "prince", "waiter", "son", "he", "his", "him", "himself",
    "brother", "brothers", "guy", "guys", "emperor", "emperors", "dude", "dudes", "cowboy",
)
FEMININE = (
    "woman", "women", "female", "lady", "ladies", "mother", "girl", "girls", "aunt",
    "wife", "actress", "princess", "waitress", "daughter", "she", "her", "hers",
    "herself", "sister", "sisters", "queen", "queens", "pregnant",
)
GENDER_WORDS = frozenset(MASCULINE + FEMININE)
# The reference's race script masks these (``--mask_race_words``) for skin tone.
RACE_WORDS = frozenset((
    "white", "caucasian", "black", "african", "asian", "latino", "latina", "latinx",
    "hispanic", "native", "indigenous",
))

#: attribute -> (label 0, label 1, words to mask, LSTM replacement token)
ATTRIBUTES = {
    "gender": ("male", "female", GENDER_WORDS, "genderword"),
    "skin_tone": ("light", "dark", RACE_WORDS, "raceword"),
}

_FALLBACK = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*|'s|n't|[^\sa-z0-9]")


@lru_cache(maxsize=1)
def _nltk_tokenize():
    try:
        from nltk.tokenize import NLTKWordTokenizer
    except ImportError:  # pragma: no cover - nltk is a core dependency
        return None
    return NLTKWordTokenizer().tokenize


def tokenize(text: str) -> list[str]:
    """Lowercase word tokens of ``text`` (Treebank rules)."""
    text = (text or "").lower().strip()
    tok = _nltk_tokenize()
    return tok(text) if tok is not None else _FALLBACK.findall(text)


def mask_tokens(tokens: list[str], mask_token: str, words: frozenset[str] = GENDER_WORDS,
                keep: frozenset[str] | set[str] | None = None, unk_token: str = "<unk>") -> list[str]:
    """Replace listed words by ``mask_token``; with ``keep``, other tokens not in it by ``unk_token``.

    ``keep`` implements the reference's ``align_vocab``: human captions are
    restricted to the vocabulary of the captioning model they are compared
    with, so LIC_D is not inflated by words a model never produces.
    """
    out = []
    for t in tokens:
        if t in words:
            out.append(mask_token)
        elif keep is not None and t not in keep:
            out.append(unk_token)
        else:
            out.append(t)
    return out


def mask_caption(text: str, mask_token: str = "genderword", words: frozenset[str] = GENDER_WORDS) -> str:
    """Tokenise, lowercase and mask ``text``; tokens are joined by single spaces."""
    return " ".join(mask_tokens(tokenize(text), mask_token, words))
