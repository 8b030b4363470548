"""Does a caption name the person's gender, or their skin tone? (LOTUS's bias recalls)

LOTUS measures, on images of women, the share of captions that use a woman word
(Rec_F), on images of men a man word (Rec_M), and reports |Rec_F - Rec_M|; the
same for skin tone on light- and dark-skinned images. The gender words are the
Burns et al. 2018 lists already used for gender error
(:mod:`capaudit.text.gender`): a caption "mentions the gender" of a woman's image
when it holds any woman word, of a man's image any man word.

Skin-tone words are only counted when they describe a person, because "white"
and "black" describe shirts and cats far more often than people: a colour/tone
word (``LIGHT_WORDS`` / ``DARK_WORDS``, optionally followed by "-skinned" or
"skinned") immediately before a person word (``PERSON_WORDS``), or one of the
unambiguous words ("caucasian", "african-american", ...). "A black cat" is not a
mention; "a black man", "a dark-skinned woman", "an african american boy" are.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from capaudit.text.gender import MAN_WORDS, WOMAN_WORDS

__all__ = ["gender_mention", "skin_tone_mention", "PERSON_WORDS", "LIGHT_WORDS", "DARK_WORDS"]

PERSON_WORDS = frozenset("""man men woman women boy boys girl girls person people guy guys lady
ladies child children kid kids player players gentleman gentlemen male males female females
individual individuals adult adults teenager teenagers baby babies toddler couple family
""".split())
LIGHT_WORDS = frozenset("white light fair pale light-skinned fair-skinned pale-skinned".split())
DARK_WORDS = frozenset("black dark brown dark-skinned brown-skinned black-skinned".split())
LIGHT_ALONE = frozenset("caucasian caucasians".split())
DARK_ALONE = frozenset("african-american african-americans".split())

_TOK = re.compile(r"[a-z]+(?:-[a-z]+)*")


def _tokens(text: str) -> list[str]:
    toks = _TOK.findall(text.lower())
    out: list[str] = []
    for t in toks:  # "dark skinned" -> "dark-skinned", "african american" -> "african-american"
        if out and t in ("skinned", "american", "americans") and out[-1] in (
                LIGHT_WORDS | DARK_WORDS | {"african"}):
            out[-1] = f"{out[-1]}-{t}"
        else:
            out.append(t)
    return out


def gender_mention(captions: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(has a man word, has a woman word) per caption, bool."""
    man = np.zeros(len(captions), bool)
    woman = np.zeros(len(captions), bool)
    for i, c in enumerate(captions):
        toks = set(_TOK.findall(c.lower()))
        man[i] = bool(toks & MAN_WORDS)
        woman[i] = bool(toks & WOMAN_WORDS)
    return man, woman


def skin_tone_mention(captions: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(mentions a light skin tone, mentions a dark skin tone) per caption, bool."""
    light = np.zeros(len(captions), bool)
    dark = np.zeros(len(captions), bool)
    for i, c in enumerate(captions):
        toks = _tokens(c)
        for a, b in zip(toks, toks[1:] + [""]):
            if a in LIGHT_ALONE or (a in LIGHT_WORDS and b in PERSON_WORDS):
                light[i] = True
            if a in DARK_ALONE or (a in DARK_WORDS and b in PERSON_WORDS):
                dark[i] = True
    return light, dark
