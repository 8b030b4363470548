"""Build the CHAIR ground truth of images from annotations, as the reference does.

Why: CHAIR calls a mentioned object hallucinated when it is not in the
image's ground truth, and the reference's ground truth is *not* just the
instance annotations: it is the union of the image's instance categories and
every object mentioned in any of its human captions (parsed with the same
rules as generated captions, :mod:`capaudit.text.objects`). The shared
``chair_objects_trainval2014.jsonl`` is that union for all of COCO
train+val 2014; this module rebuilds it for any dataset that has instances
and human captions (e.g. a new caption set with COCO-style annotations).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping, Sequence

from capaudit.text.records import build_records

__all__ = ["build_chair_gt"]


def build_chair_gt(instances: Mapping[int, frozenset[str]] | None,
                   image_ids: Sequence[int], captions: Sequence[str],
                   mode: str = "reference", workers: int = 1) -> dict[int, frozenset[str]]:
    """``{image_id: instance categories | objects of its human captions}``.

    ``image_ids``/``captions`` are the human (ground-truth) captions, aligned.
    Images with instances but no caption keep their instance categories.
    """
    out: dict[int, set[str]] = defaultdict(set)
    for iid, cats in (instances or {}).items():
        out[iid].update(cats)
    recs = build_records(list(captions), mode=mode, workers=workers)
    names = recs.categories
    offs = recs.m_offsets
    for i, iid in enumerate(image_ids):
        a, b = offs[i], offs[i + 1]
        cats = out[iid]
        for c in recs.m_cat[a:b]:
            cats.add(names[c])
    return {iid: frozenset(v) for iid, v in out.items()}
