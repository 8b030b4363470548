"""Labels onto the filter's sentences, by character offsets.

Why offsets: the filter log stores each sentence's text (``filter_log.original``, an exact
slice of the caption at the audit's sentence boundaries) and its index, not its offsets.
Each logged sentence is found in the caption left to right, which gives its character
span; the labels are then laid on those spans:

- hallucinated character spans (``spans``, ``tokens`` layouts): a sentence is hallucinated
  when it overlaps a span (half-open intervals: ``[a, b)`` and ``[c, d)`` overlap when
  ``a < d and c < b``), faithful otherwise; every sentence is labelled;
- labelled sentences (``sentence-label``): each label sentence is found in the caption
  (exactly after the last one found, anywhere, then ignoring case and runs of spaces); a
  filter sentence takes the label of the label sentences it overlaps (hallucinated if any
  is); a filter sentence no label sentence overlaps is left unlabelled, and a label
  sentence not found in the caption is counted (``sentence-not-in-caption``).

The unit of the sentence-level counts is the filter's sentence: its action, reason and
evidence are what the breakdowns and the disagreement file show.
"""

from __future__ import annotations

import re

from capaudit.filters.validate.join import Matched

__all__ = ["sentence_offsets", "find_span", "sentence_labels", "overlaps"]


def sentence_offsets(caption: str, texts: list[str]) -> list[tuple[int, int]]:
    """The ``[start, end)`` of each logged sentence, found in order (a text not found, which
    the log's exact slices never are, gets the empty span at the cursor)."""
    out, at = [], 0
    for text in texts:
        start = caption.find(text, at) if text else -1
        if start < 0:
            start = caption.find(text) if text else -1
        if start < 0:
            out.append((at, at))
            continue
        out.append((start, start + len(text)))
        at = start + len(text)
    return out


def find_span(caption: str, text: str, at: int) -> tuple[int, int] | None:
    """Where ``text`` is in ``caption``: after ``at``, anywhere, then ignoring case and the
    width of white space."""
    for start in (caption.find(text, at), caption.find(text)):
        if start >= 0:
            return start, start + len(text)
    words = text.split()
    if not words:
        return None
    pattern = r"\s+".join(re.escape(w) for w in words)
    m = re.search(pattern, caption, re.IGNORECASE)
    return (m.start(), m.end()) if m else None


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def sentence_labels(m: Matched) -> tuple[list[int | None], int]:
    """One label per logged sentence of the first matched row (None: unlabelled), and how
    many label sentences were not found in the caption."""
    row = m.rows[0]
    spans = sentence_offsets(row.caption, [s[1] for s in row.sentences])
    lab = m.labelled
    if lab.spans is not None:
        bad = lab.spans
        if row.caption != lab.caption:   # matched with other white space: map by text
            bad = _moved(lab.caption, row.caption, bad)
        return [int(any(overlaps(s, b) for b in bad)) for s in spans], 0
    if lab.sentences is None:
        return [None] * len(spans), 0
    out: list[int | None] = [None] * len(spans)
    missing, at = 0, 0
    for text, value in lab.sentences:
        where = find_span(row.caption, text, at)
        if where is None:
            missing += 1
            continue
        at = where[1]
        for i, s in enumerate(spans):
            if overlaps(s, where):
                out[i] = max(out[i] or 0, value)
    return out, missing


def offset_map(src: str, dst: str) -> list[int] | None:
    """``dst``'s offset for each offset ``0..len(src)`` of ``src``, when the two are the same
    text up to the width of their white space (runs map to runs; the ends may differ);
    None when they are not."""
    out, j, n = [], 0, len(dst)
    i = 0
    while i < len(src):
        if src[i].isspace() or (j < n and dst[j].isspace()):
            i0, j0 = i, j
            while i < len(src) and src[i].isspace():
                out.append(j)
                i += 1
            while j < n and dst[j].isspace():
                j += 1
            inside = i0 > 0 and i < len(src) and j < n
            if inside and (i == i0 or j == j0):   # "ab" is not "a b"
                return None
            continue
        if j >= n or src[i] != dst[j]:
            return None
        out.append(j)
        i, j = i + 1, j + 1
    out.append(j)
    return out


def _moved(src: str, dst: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans of ``src`` carried to ``dst`` (the same text up to white space): offset by
    offset (:func:`offset_map`; a sharded run's captions are rebuilt from its logged
    sentences with single spaces), else each span's text found in ``dst`` ignoring
    white-space width."""
    at = offset_map(src, dst)
    if at is not None:
        return [(at[a], at[b]) for a, b in spans]
    out = []
    for a, b in spans:
        where = find_span(dst, src[a:b], 0)
        if where is not None:
            out.append(where)
    return out
