"""Caption tokenization identical to the reference's ``nltk.word_tokenize(caption.lower())``.

Why this module exists: every reference metric (CHAIR, recall, vocabulary,
length, gender error) starts from NLTK's ``word_tokenize`` on the lowercased
caption, i.e. a Punkt sentence split followed by the NLTK ("improved
treebank") word tokenizer on each sentence. Two problems:

* Punkt's trained English model is a data download that these machines cannot
  fetch, so sentences are split with an *untrained*
  ``PunktSentenceTokenizer()`` (no abbreviation list). On lowercased captions
  it differs from the trained model only around abbreviations ("mr.", "st.").
* NLTK runs ~30 regex substitutions per sentence: far too slow for the
  throughput target (>= 52,000 captions/s on two cores).

The reference's vocabulary and length numbers, however, match NLTK's word
tokenizer on the whole caption with no sentence split (``preserve_line``;
e.g. the COCO subset has 7,150 distinct tokens that way, 7,133 with a split),
so :func:`tokenize_caption` returns both views: sentence tokens (CHAIR,
mention positions) and line tokens (vocabulary, length, gender words).

The fast path (:mod:`capaudit.text.fast_tokenize`) covers the character set that
almost every caption uses, where the NLTK rules reduce to a few string operations;
what it cannot prove identical goes to NLTK (:mod:`capaudit.text.nltk_tokenize`).
``tests/test_text_tokenize.py`` and ``tests/test_tokenize_exact.py`` check every path
against NLTK itself on every caption of the shared files and on random text over the
tricky characters.

Long captions (ShareGPT4V-style, ~170 tokens, a dozen sentences) often have
one unusual sentence; rather than sending the whole caption to NLTK (~1 ms),
:func:`tokenize_caption` cuts it at sentence boundaries where both NLTK stages
are provably local: the segments before the problem take the fast path as one
run, only the segment holding it goes to NLTK (:func:`_segmented_caption`).
``benchmarks/bench_tokenize.py`` measures the whole against a regex pass.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from capaudit.text.fast_tokenize import (_CONTRACTIONS, _problem, _proven, fast_tokenize_caption,
                                         fast_tokenize_sentences)
from capaudit.text.nltk_tokenize import (load_nltk, nltk_caption, nltk_line_tokens, nltk_loaded,
                                         nltk_tokenize_sentences)

__all__ = ["tokenize_caption", "tokenize_sentences", "tokenize", "load_nltk",
           "nltk_tokenize_sentences", "nltk_line_tokens", "fast_tokenize_caption", "fast_tokenize_sentences"]


class SlowPathDeferred(Exception):
    """Raised in worker processes that should not import NLTK themselves (see records)."""


_DEFER = False  # set in pool workers: importing nltk costs ~5 s (it pulls in scipy)


# A sentence boundary that both NLTK stages treat locally: a period right after
# a whitespace-delimited alphabetic word of >= 2 letters (not an initial, a
# number or an abbreviation-like token: untrained Punkt always breaks there,
# whatever follows), then whitespace, then a letter or digit (nothing Punkt
# would realign into the previous sentence, no quote the word tokenizer would
# read differently at the start of a string). MacIntyre contractions are
# excluded: "wanna" splits before whitespace but not before a period.
# Found from the period (a literal: ~6x faster than a pattern that starts on every letter).
_PERIOD_GAP = re.compile(r"\.\s+(?=[a-z0-9])")
_LETTERS = "abcdefghijklmnopqrstuvwxyz-"


def _segments(text: str) -> tuple[list[int], list[int]] | None:
    """Safe sentence boundaries of ``text`` as segment ``(starts, ends)``: segment ``k`` is
    ``text[starts[k]:ends[k]]`` (an inner one ends with its period), or None if there is none."""
    starts, ends = [0], []
    contractions = [c for c in _CONTRACTIONS if c in text]
    for m in _PERIOD_GAP.finditer(text):
        i = m.start()
        k = len(text[:i].rstrip(_LETTERS))  # the [a-z-] run before the period
        word = text[k:i]
        if (len(word) < 2 or word[0] == "-" or word[-1] == "-" or (k and not text[k - 1].isspace())
                or (contractions and any(c in word for c in contractions))):
            continue
        ends.append(i + 1)
        starts.append(m.end())
    if not ends:
        return None
    ends.append(len(text))
    return starts, ends


def _segmented_caption(text: str, problem: int | None = None) -> tuple[list[list[str]], list[str]] | None:
    """Tokenize a caption off the fast path a run of safe segments at a time.

    Untrained Punkt decides each break from the token before and after it, so
    at a safe boundary (:data:`_PERIOD_GAP`) the caption's sentences are the
    concatenation of its segments' sentences; NLTK's word tokenizer is made of
    local substitutions except the final-period rule (``$``-anchored), so the
    caption's line tokens are the segments' line tokens with each inner
    segment's split-off final period put back on its word ("sign", "." ->
    "sign."). Any run of consecutive segments is such a text itself: the
    segments before the one holding the first :func:`_problem` (``problem``, if
    the caller has it) go to the fast path as one run, that segment to NLTK, and
    the rest of the caption is examined the same way (a run the fast path
    unexpectedly misses is halved until it takes the parts).
    ``tests/test_text_tokenize.py`` and ``tests/test_tokenize_exact.py`` check the
    result equals NLTK on the whole caption.
    """
    segs = _segments(text)
    if segs is None:
        return None
    starts, ends = segs
    n = len(ends)
    sents: list[list[str]] = []
    line: list[str] = []

    def add(r: tuple[list[list[str]], list[str]], inner: bool) -> bool:
        s_toks, l_toks = r
        if inner:
            if len(l_toks) < 2 or l_toks[-1] != "." or l_toks[-2][-1:] == ".":
                return False  # not the shape the proof assumes: let NLTK do the whole caption
            line.extend(l_toks[:-2])
            line.append(l_toks[-2] + ".")
        else:
            line.extend(l_toks)
        sents.extend(s_toks)
        return True

    def run(i: int, j: int) -> bool:
        todo = [(i, j)]
        while todo:
            a, b = todo.pop()
            piece = text[starts[a]:ends[b - 1]]
            r = fast_tokenize_caption(piece)
            if r is None:
                if b - a > 1:
                    m = (a + b) // 2
                    todo += [(m, b), (a, m)]
                    continue
                if _DEFER and not nltk_loaded():
                    raise SlowPathDeferred(text)
                r = nltk_caption(piece)
            if not add(r, b < n):
                return False
        return True

    i = 0
    while i < n:
        rest = text[starts[i]:]
        p = problem if i == 0 and problem is not None else _problem(rest)
        if p < 0:
            return (sents, line) if add(_proven(rest), False) else None
        k = bisect_right(starts, starts[i] + p, i) - 1  # the segment holding it (or its gap)
        if (k > i and not run(i, k)) or not run(k, k + 1):
            return None
        i = k + 1
    return sents, line


def tokenize_caption(caption: str) -> tuple[list[list[str]], list[str]]:
    """``(sentence tokens, line tokens)`` of the lowercased caption (see :func:`fast_tokenize_caption`).

    Off the fast path, a long caption is cut at safe sentence boundaries and
    only the offending segments go to NLTK (:func:`_segmented_caption`).
    """
    text = caption.lower()
    p = _problem(text)
    if p < 0:
        return _proven(text)
    r = _segmented_caption(text, p)
    if r is None:
        if _DEFER and not nltk_loaded():
            raise SlowPathDeferred(caption)
        r = nltk_caption(text)
    return r


def tokenize_sentences(caption: str, lower: bool = True) -> list[list[str]]:
    """Tokens per sentence, exactly like ``nltk.word_tokenize(caption.lower())`` would give them."""
    text = caption.lower() if lower else caption
    sents = fast_tokenize_sentences(text)
    if sents is None:
        sents = nltk_tokenize_sentences(text)
    return sents


def tokenize(caption: str, lower: bool = True) -> list[str]:
    """Flat token list (the reference's ``nltk.word_tokenize(caption.lower())``)."""
    return [t for s in tokenize_sentences(caption, lower) for t in s]
