"""Sentence character spans of a caption, at the audit tokenizer's sentence boundaries.

Why not just Punkt's ``span_tokenize``: it costs ~0.2 ms per ShareGPT4V-length caption
(a Python object per word, a regex per candidate break), which was 40% of the
hallucination filter's time on long captions, and importing NLTK costs seconds. The
tokenizer (:mod:`capaudit.text.tokenize`) already *proves* for most captions where
untrained Punkt breaks, and the spans here follow from the same proof:

* on a text with no :func:`~capaudit.text.fast_tokenize._problem`, untrained Punkt ends a
  sentence right after every period that is neither in a run (``..``, ``...``) nor
  followed by a letter (``t.v``), and that some token follows; the next sentence opens at
  that token (:func:`_fast_spans`). The fast tokenizer cuts the sentence tokens at exactly
  those periods, and its tokens are checked equal to NLTK's; a break anywhere else would
  give other tokens;
* a text with a problem is cut at the tokenizer's *safe* boundaries
  (:func:`~capaudit.text.tokenize._segments`: a period after a word, whitespace, a
  lowercase letter or digit; Punkt always breaks there and decides each break from its
  neighbours), each run of segments is spanned alone (fast, or Punkt on that run only),
  and the spans are shifted back.

``tests/test_sentence_spans.py`` checks the result equals Punkt's own spans on every
shared caption and on random text over the characters where the rules differ.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache

from capaudit.text.fast_tokenize import _problem
from capaudit.text.tokenize import _segments

__all__ = ["sentence_spans", "punkt_spans"]

# a sentence-ending period of a fast-path text: not in a run of periods, no letter after it
_BREAK = re.compile(r"(?<!\.)\.(?![a-z.])")


def sentence_spans(caption: str) -> list[tuple[int, int]]:
    """Character spans of the caption's sentences, as the audit tokenizer splits them.

    The audit tokenizer splits the lowercased caption with an untrained Punkt
    model, so sentence ``i`` here is sentence ``i`` of every mention's
    ``sentence_idx``. Whitespace between sentences belongs to no span.
    """
    text = caption.lower()
    if len(text) != len(caption):  # rare unicode whose lowercase changes length
        text = caption
    p = _problem(text)
    raw = _fast_spans(text, 0, len(text)) if p < 0 else _segmented_spans(text, p)
    return [_strip(caption, a, b) for a, b in raw]


def _strip(caption: str, a: int, b: int) -> tuple[int, int]:
    while a < b and caption[a].isspace():
        a += 1
    while b > a and caption[b - 1].isspace():
        b -= 1
    return a, b


def _fast_spans(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """Punkt's spans of ``text[lo:hi]`` (shifted by ``lo``), for a piece with no problem.

    A period followed only by whitespace is not a break (Punkt needs a token after it):
    the last sentence runs to the last non-space character."""
    end = lo + len(text[lo:hi].rstrip())
    if end == lo:
        return []
    out, start = [], lo
    for m in _BREAK.finditer(text, lo, end):
        b = m.end()
        if b == end:  # the last character: nothing follows it
            break
        out.append((start, b))
        start = b
        while text[start].isspace():  # a token follows: the break is before the last char
            start += 1
    out.append((start, end))
    return out


def _segmented_spans(text: str, problem: int) -> list[tuple[int, int]]:
    """Spans of a text the fast rule does not cover: runs of safe segments spanned alone
    (the segments before the first problem together, each problem segment by Punkt)."""
    segs = _segments(text)
    if segs is None:
        return punkt_spans(text)
    starts, ends = segs
    n, out, i = len(ends), [], 0
    while i < n:
        p = problem if i == 0 else _problem(text[starts[i]:])
        if p < 0:
            out += _fast_spans(text, starts[i], len(text))
            break
        k = bisect_right(starts, starts[i] + p, i) - 1  # the segment holding it (or its gap)
        if k > i:
            out += _run_spans(text, starts, ends, i, k)
        out += _run_spans(text, starts, ends, k, k + 1)
        i = k + 1
    return out


def _run_spans(text: str, starts: list[int], ends: list[int], i: int, j: int
               ) -> list[tuple[int, int]]:
    """Spans of segments ``i:j``: fast when the run has no problem, else halved down to one
    segment, which Punkt spans alone."""
    out: list[tuple[int, int]] = []
    todo = [(i, j)]
    while todo:
        a, b = todo.pop()
        lo, hi = starts[a], ends[b - 1]
        if _problem(text[lo:hi]) < 0:
            out += _fast_spans(text, lo, hi)
        elif b - a > 1:
            m = (a + b) // 2
            todo += [(m, b), (a, m)]
        else:
            out += [(lo + x, lo + y) for x, y in punkt_spans(text[lo:hi])]
    return out


def punkt_spans(text: str) -> list[tuple[int, int]]:
    """Untrained Punkt's own spans of ``text`` (the authority the fast rules reproduce)."""
    return list(_punkt().span_tokenize(text))


@lru_cache(maxsize=1)
def _punkt():
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    return PunktSentenceTokenizer()  # untrained, as in capaudit.text.tokenize
