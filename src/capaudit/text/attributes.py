"""The number and the colour a text attaches to an object mention ("two dogs", "a red bus").

Why a look-up and not a parse: the hallucination filter checks counts and colours against
the references (:mod:`capaudit.filters.reference_evidence`) on every mention it supports,
so the attachment is read from the tokens just before the mention, as CHAIR reads words:
an explicit number word or numeral up to three tokens before the object (``two dogs``, ``two
large dogs``, ``3 dogs``), the colour words up to three tokens before it (``a red bus``, ``a
blue and yellow train``: both). Calibrated on real captions against their COCO references:
``a``/``an`` are not counts (a reference's "a basket" is one basket of several as often as
the only one) and neither is ``a couple of``. What this misses, on purpose: numbers and
colours stated after the object ("the bus is red"), or across a conjunction ("two cats and
dogs": the dogs get no number).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["NUMBERS", "COLOURS", "Attached", "attached", "text_attributes"]

NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "single": 1, "pair": 2,
           **{str(n): n for n in range(1, 11)}}
COLOURS = {"red", "blue", "green", "yellow", "black", "white", "brown", "gray", "grey",
           "orange", "pink", "purple"}
SAME_COLOUR = {"grey": "gray"}
#: words that may stand between a number and its object ("two large dogs", "a pair of shoes")
_BETWEEN = {"of", "and", "small", "large", "big", "little", "young", "old", "tall", "wooden",
            "light", "dark", "bright", *COLOURS}


class Attached(NamedTuple):
    """What a text says of one mention: its number (None: none stated) and colours."""

    count: int | None
    colours: frozenset


def attached(tokens: list[str], index: int) -> Attached:
    """The number and colours attached to the mention at ``index`` of a sentence's
    lowercased tokens."""
    count, colours = None, set()
    for back in (1, 2, 3):
        i = index - back
        if i < 0:
            break
        tok = tokens[i]
        if tok in COLOURS:
            colours.add(SAME_COLOUR.get(tok, tok))
        n = NUMBERS.get(tok)
        if n is not None:
            count = n
            break
        if tok not in _BETWEEN:
            break
    return Attached(count, frozenset(colours))


def text_attributes(texts, mode: str) -> dict[str, list[Attached]]:
    """``{category: [what each mention of it in the texts states]}``."""
    from capaudit.text.mentions import caption_mentions

    out: dict[str, list[Attached]] = {}
    for text in texts:
        sents, mentions = caption_mentions(text, mode)
        for m in mentions:
            out.setdefault(m.category, []).append(
                attached(sents[m.sentence_idx], m.token_idx))
    return out
