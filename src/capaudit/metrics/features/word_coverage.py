"""Noun and verb coverage of a caption against the image's human captions (IC3, LOTUS).

The content words of a caption (its noun lemmas; its verb lemmas) are compared
with those of the image's reference captions, all of an image's references
joined into one set. The two papers divide by different sets, so both are
computed:

* ``recall`` = |caption ∩ reference| / |reference| -- how much of what people
  said the caption covers (the IC3 code divides by the reference words);
* ``precision`` = |caption ∩ reference| / |caption| -- how much of what the
  caption says people also said. This is what LOTUS reports as noun/verb
  coverage (its eq. 2 divides by the caption's own words).

A caption without such words has no precision; an image whose references have
none gives no recall; captions of images without reference captions give
neither. Those captions are left out of the mean (``NaN`` here) and counted.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

__all__ = ["reference_words", "coverage"]


def reference_words(ref_ids: Sequence[int | None], ref_features: Sequence[Mapping],
                    kind: str) -> dict[int, frozenset[str]]:
    """``{image_id: union of the references' words}`` for ``kind`` = ``nouns`` or ``verbs``."""
    out: dict[int, set[str]] = {}
    for iid, f in zip(ref_ids, ref_features):
        if iid is not None:
            out.setdefault(int(iid), set()).update(f[kind])
    return {k: frozenset(v) for k, v in out.items()}


def coverage(image_ids: Sequence[int | None], features: Sequence[Mapping], kind: str,
             reference: Mapping[int, frozenset[str]]) -> tuple[np.ndarray, np.ndarray]:
    """(recall, precision) per caption, ``NaN`` where undefined (see the module docstring)."""
    n = len(features)
    rec, prec = np.full(n, np.nan), np.full(n, np.nan)
    for i, (iid, f) in enumerate(zip(image_ids, features)):
        ref = reference.get(int(iid)) if iid is not None and iid >= 0 else None
        if ref is None:
            continue
        words = set(f[kind])
        hit = len(words & ref)
        if ref:
            rec[i] = hit / len(ref)
        if words:
            prec[i] = hit / len(words)
    return rec, prec
