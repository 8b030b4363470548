"""NSFW words: does a caption contain a word or phrase of the LDNOOBW English list?

LOTUS reports the share of captions with at least one such word (like CHAIR_s).
Matching is whole-word and whole-phrase, case-insensitive: the caption is cut
into lowercase word tokens (letters, digits and the list's own inner symbols:
``s&m``, ``g-spot``) and an entry of k words matches k consecutive tokens. So
"Scunthorpe", "cocktail", "assess" and "therapist" never match, and "Ass" or
"NUDE" do. Entries that are not words (an emoji) match as they are.

The list ships with the package (``data/lexicons/ldnoobw_en.txt``, CC BY 4.0,
identical to ``shared/lexicons/ldnoobw_en.txt``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Iterable, Sequence

__all__ = ["NsfwMatcher", "get_matcher", "nsfw_hits"]

# a word: letters/digits, possibly joined by the symbols some entries contain (g-spot, s&m)
_WORD = re.compile(r"[^\W_]+(?:[-&'][^\W_]+)*|[^\w\s]", re.UNICODE)


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class NsfwMatcher:
    """Whole-word / whole-phrase matcher over a word list (one entry a line)."""

    def __init__(self, entries: Iterable[str]):
        self.phrases: dict[tuple[str, ...], str] = {}
        for e in entries:
            e = e.strip()
            if not e or e.startswith("#"):
                continue
            toks = tuple(_tokens(e))
            if toks:
                self.phrases.setdefault(toks, e.lower())
        self.first: dict[str, list[tuple[str, ...]]] = {}
        for toks in self.phrases:
            self.first.setdefault(toks[0], []).append(toks)
        for lst in self.first.values():
            lst.sort(key=len, reverse=True)  # longest phrase first

    @classmethod
    def from_file(cls, path: str | Path) -> "NsfwMatcher":
        return cls(Path(path).read_text(encoding="utf-8").splitlines())

    def hits(self, text: str) -> list[str]:
        """The list entries found in ``text`` (in order, repeats kept)."""
        toks = _tokens(text)
        out, i, first = [], 0, self.first
        while i < len(toks):
            cands = first.get(toks[i])
            step = 1
            if cands:
                for p in cands:
                    if tuple(toks[i:i + len(p)]) == p:
                        out.append(self.phrases[p])
                        step = len(p)
                        break
            i += step
        return out


@lru_cache(maxsize=1)
def get_matcher() -> NsfwMatcher:
    """The packaged LDNOOBW English list."""
    text = resources.files("capaudit").joinpath("data/lexicons/ldnoobw_en.txt").read_text("utf-8")
    return NsfwMatcher(text.splitlines())


def nsfw_hits(captions: Sequence[str], matcher: NsfwMatcher | None = None) -> list[list[str]]:
    m = matcher or get_matcher()
    return [m.hits(c) for c in captions]
