"""Which of the lexicon's object categories an annotation source names at all.

Why: the shared COCO val2014 instance file holds 79 of the 80 categories (its source has no
"tennis racket"). Against it, every "tennis racket" a caption mentions is unsupported: the
hallucination filter dropped 202 correct sentences of human captions, and CHAIR counts them
as hallucinations. ``annotations add`` and ``filter run`` print this line
("79 of 80 COCO categories; missing: tennis racket") so that the gap is seen before it
is paid for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

__all__ = ["CategoryCoverage", "category_coverage"]

_SHOWN = 6   # missing categories named in the line; more are counted


@dataclass
class CategoryCoverage:
    """``present`` of the lexicon's ``total`` categories occur in a source."""

    present: int
    total: int
    missing: list[str] = field(default_factory=list)    # lexicon order
    unknown: list[str] = field(default_factory=list)    # names the lexicon lacks (sorted)
    lexicon: str = "COCO"

    def line(self) -> str:
        text = f"{self.present} of {self.total} {self.lexicon} categories"
        if self.missing:
            more = len(self.missing) - _SHOWN
            text += "; missing: " + ", ".join(self.missing[:_SHOWN]) + (
                f" and {more} more" if more > 0 else "")
        if self.unknown:
            text += (f"; {len(self.unknown)} name(s) not in the lexicon: "
                     + ", ".join(self.unknown[:3]) + (" ..." if len(self.unknown) > 3 else ""))
        return text

    def as_dict(self) -> dict:
        return {"present": self.present, "total": self.total, "missing": self.missing,
                "unknown": self.unknown, "line": self.line()}


def category_coverage(names: Iterable[str], mode: str = "reference") -> CategoryCoverage:
    """The lexicon's (``mode``: the audit's object mode, or ``lexicon:PATH``) categories
    present in ``names``, missing from them, and the names it does not know."""
    from capaudit.text.objects import LEXICON_PREFIX, VISUAL_MODE, get_lexicon

    if mode == VISUAL_MODE:   # the evidence judges COCO's 80 there; other objects: undecided
        mode = "corrected"
    cats = get_lexicon(mode).categories
    names = {n for n in names if n}
    known = set(cats)
    return CategoryCoverage(sum(c in names for c in cats), len(cats),
                            [c for c in cats if c not in names], sorted(names - known),
                            "lexicon" if mode.startswith(LEXICON_PREFIX) else "COCO")
