"""Detections of any vocabulary, read with the filter's phrase matching (object mode ``visual``).

Why: an open-vocabulary detector's labels are phrases ("palm tree", "red double-decker bus",
"t-shirt", "man riding a horse"), not COCO names. In object mode ``visual`` each label is read
as a caption is (:func:`capaudit.text.visual_objects.named_categories`: singulars, synonyms,
multi-word entries), and its score goes to every category it names; a label that names none
stays as it is (it may be a category's own name the look-up leaves out, such as a generic
word). Each label is read once per run.
"""

from __future__ import annotations

__all__ = ["detections_as_categories"]


def detections_as_categories(evidence, mode: str) -> dict[int, dict[str, float]]:
    """``{image_id: {category: highest score}}`` of ``{image_id: {label: score}}``."""
    from capaudit.text.visual_objects import named_categories

    read: dict[str, tuple[str, ...]] = {}
    out: dict[int, dict[str, float]] = {}
    for iid in evidence:
        best: dict[str, float] = {}
        for label, score in evidence[iid].items():
            cats = read.get(label)
            if cats is None:
                cats = read[label] = tuple(sorted(named_categories([label], mode))) or (label,)
            for cat in cats:
                if score > best.get(cat, -1.0):
                    best[cat] = score
        out[iid] = best
    return out
