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
from typing import Iterator

from capaudit.text.fast_tokenize import _problem, _proven
from capaudit.text.nltk_tokenize import punkt_tokenizer, word_tokens
from capaudit.text.tokenize import _segments, tokenize_caption

__all__ = ["sentence_spans", "caption_sentences", "punkt_spans"]

# a sentence-ending period of a fast-path text: not in a run of periods, no letter after it
# (the literal first, so the scan looks for periods only; then the whitespace after it: the
# next sentence starts where the match ends)
_BREAK = re.compile(r"\.(?<!\.\.)(?![a-z.])\s*")
# where untrained Punkt may end a sentence at all
_SENTENCE_END = re.compile(r"[.?!]")


def sentence_spans(caption: str) -> list[tuple[int, int]]:
    """Character spans of the caption's sentences, as the audit tokenizer splits them.

    The audit tokenizer splits the lowercased caption with an untrained Punkt
    model, so sentence ``i`` here is sentence ``i`` of every mention's
    ``sentence_idx``. Whitespace between sentences belongs to no span.
    """
    text = caption.lower()
    if len(text) != len(caption):  # rare unicode whose lowercase changes length
        text = caption
    out: list[tuple[int, int]] = []
    for lo, hi, fast in _pieces(text, _problem(text)):
        out += _fast_spans(text, lo, hi) if fast else _stripped(caption, _punkt_piece(text, lo, hi))
    return out


def caption_sentences(caption: str) -> tuple[list[tuple[int, int]], list[list[str]]]:
    """``(sentence_spans(caption), tokenize_caption(caption)[0])`` in one pass.

    What the filters need of a caption, for about half the cost of the two calls: one
    :func:`~capaudit.text.fast_tokenize._problem` scan, one Punkt pass per problem piece
    (its sentences are its spans' text, as Punkt's own ``tokenize`` cuts them), and no line
    tokens. Equal to the two calls on every input (``tests/test_sentence_spans.py``).
    """
    text = caption.lower()
    if len(text) != len(caption):
        return sentence_spans(caption), tokenize_caption(caption)[0]
    out: list[tuple[int, int]] = []
    sents: list[list[str]] = []
    for lo, hi, fast in _pieces(text, _problem(text)):
        if fast:
            out += _fast_spans(text, lo, hi)
            sents += _proven(text[lo:hi], with_line=False)[0]
        else:
            spans = _punkt_piece(text, lo, hi)
            out += _stripped(caption, spans)
            sents += [word_tokens(text[a:b]) for a, b in spans]
    return out, sents


def _stripped(caption: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` without the whitespace at either end (the fast rule's spans have none: a
    fast piece is ASCII, where the caption and its lowercase have the same spaces)."""
    out = []
    for a, b in spans:
        while a < b and caption[a].isspace():
            a += 1
        while b > a and caption[b - 1].isspace():
            b -= 1
        out.append((a, b))
    return out


def _fast_spans(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """Punkt's spans of ``text[lo:hi]`` (shifted by ``lo``), for a piece with no problem,
    already stripped of whitespace.

    A period followed only by whitespace is not a break (Punkt needs a token after it):
    the last sentence runs to the last non-space character."""
    piece = text[lo:hi]
    end = lo + len(piece.rstrip())
    start = lo + len(piece) - len(piece.lstrip())
    if end <= start:
        return []
    out = []
    for m in _BREAK.finditer(text, start, end):
        b = m.start() + 1
        if b == end:  # the last character: nothing follows it
            break
        out.append((start, b))
        start = m.end()  # a token follows: the whitespace ends before ``end``
    out.append((start, end))
    return out


def _punkt_piece(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """Punkt's spans of ``text[lo:hi]``, shifted by ``lo``. A piece with no ``.?!`` before
    its last non-space character is one sentence to Punkt (it considers a break only after
    one of those, and only with a token after it): Punkt is not run for it."""
    piece = text[lo:hi]
    end = len(piece.rstrip())
    if end and _SENTENCE_END.search(piece, 0, end - 1) is None:
        return [(lo, lo + end)]
    return [(lo + a, lo + b) for a, b in punkt_spans(piece)]


def _pieces(text: str, problem: int) -> Iterator[tuple[int, int, bool]]:
    """``(start, end, fast)`` pieces of ``text`` whose sentences, in order, are the text's:
    the whole text when it has no problem (or no safe boundary); else runs of safe segments
    (those before the first problem together, each problem segment alone), as the
    tokenizer's segmented path cuts them. ``fast``: the piece has no problem."""
    if problem < 0:
        yield 0, len(text), True
        return
    segs = _segments(text)
    if segs is None:
        yield 0, len(text), False
        return
    starts, ends = segs
    n, i = len(ends), 0
    while i < n:
        p = problem if i == 0 else _problem(text[starts[i]:])
        if p < 0:
            yield starts[i], len(text), True
            return
        k = bisect_right(starts, starts[i] + p, i) - 1  # the segment holding it (or its gap)
        if k > i:
            yield from _run(text, starts, ends, i, k)
        yield from _run(text, starts, ends, k, k + 1)
        i = k + 1


def _run(text: str, starts: list[int], ends: list[int], i: int, j: int
         ) -> Iterator[tuple[int, int, bool]]:
    """Segments ``i:j`` as one fast piece, or halved down to single segments (a problem
    segment is a Punkt piece)."""
    todo = [(i, j)]
    while todo:
        a, b = todo.pop()
        lo, hi = starts[a], ends[b - 1]
        if _problem(text[lo:hi]) < 0:
            yield lo, hi, True
        elif b - a > 1:
            m = (a + b) // 2
            todo += [(m, b), (a, m)]
        else:
            yield lo, hi, False


def punkt_spans(text: str) -> list[tuple[int, int]]:
    """Untrained Punkt's own spans of ``text`` (the authority the fast rules reproduce)."""
    return list(punkt_tokenizer().span_tokenize(text))
