"""Predicted gender of a caption from gendered words (Burns et al. 2018).

Why: the gender-error metric of "Women also Snowboard" (kayburns/women-snowboard)
counts a caption as *male* when it contains a man word and no woman word,
*female* in the mirror case, and *neutral* otherwise (neutral is never an
error). The word lists below are the paper's, verbatim, including the odd
entries (``mans``, ``obama``, ``his``).

Tokens are the lowercased treebank tokens of :mod:`capaudit.text.tokenize`,
*not* singularized: singularizing would turn ``his`` into ``hi`` and ``men``
into ``man`` (the second harmless, the first a silent miss). Matching raw
tokens reproduces the reference gender-error values of every shared file.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["MAN_WORDS", "WOMAN_WORDS", "NEUTRAL", "MALE", "FEMALE", "GENDER_NAMES",
           "predict_gender", "gender_code"]

MAN_WORDS = frozenset("""boy brother dad husband man groom male guy men males boys guys dads dude
policeman policemen father son fireman actor gentleman boyfriend mans his obama actors""".split())
WOMAN_WORDS = frozenset("""girl sister mom wife woman bride female lady women girls ladies females
moms actress nun girlfriend her she""".split())

NEUTRAL, MALE, FEMALE = 0, 1, 2
GENDER_NAMES = ("neutral", "male", "female")


GENDERED = MAN_WORDS | WOMAN_WORDS


def gender_code(tokens: Iterable[str]) -> int:
    """0 neutral, 1 male, 2 female for a caption's tokens (a set, or a list of them: most
    captions have no gendered word, which one pass over the list settles)."""
    toks = tokens if isinstance(tokens, (set, frozenset, list, tuple)) else list(tokens)
    if GENDERED.isdisjoint(toks):
        return NEUTRAL
    man = not MAN_WORDS.isdisjoint(toks)
    woman = not WOMAN_WORDS.isdisjoint(toks)
    if man and not woman:
        return MALE
    if woman and not man:
        return FEMALE
    return NEUTRAL


def predict_gender(tokens: Iterable[str]) -> str:
    """'male', 'female' or 'neutral'."""
    return GENDER_NAMES[gender_code(tokens)]
