"""Which images LIC trains on, and how long the training will take.

Why apart from :mod:`capaudit.audit.lic.runner`: the runner trains and caches seeds;
this is what it decides and tells before any training: the labelled images with a
model caption (and human captions, so that LIC_M and LIC_D use the same images), and
an estimate calibrated by one short epoch on this machine now.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from capaudit.audit.lic.masking import ATTRIBUTES
from capaudit.audit.lic.split import balanced_split
from capaudit.errors import InputError

__all__ = ["LicPlan", "calibrate", "plan_images"]


@dataclass
class LicPlan:
    """Which images LIC trains on, and why the others are left out."""

    images: list
    n_idx: int                 # human captions per image used for LIC_D (0: no reference)
    captioned: int             # images with a model caption
    labelled: int              # ... of which have a usable label
    attribute: str
    with_reference: bool

    def describe(self) -> str:
        text = (f"LIC on {len(self.images):,} images: of the {self.captioned:,} captioned images, "
                f"{self.labelled:,} have a {self.attribute} label")
        if self.with_reference:
            text += (f" and {len(self.images):,} of those have human captions in the reference "
                     f"set (LIC_M and LIC_D must use the same images); LIC_D trains "
                     f"{self.n_idx} classifiers per seed, one per human caption")
        return text


def plan_images(model_captions: Mapping[int, str], labels: Mapping[int, str],
                human_captions: Mapping[int, Sequence[str]] | None, attribute: str) -> LicPlan:
    """The labelled images with a model caption (and, with a reference, human captions)."""
    c0, c1 = ATTRIBUTES[attribute][:2]
    images = [i for i in model_captions if labels.get(i) in (c0, c1)]
    labelled = len(images)
    n_idx = 0
    if human_captions is not None:
        images = [i for i in images if human_captions.get(i)]
        counts = [len(human_captions.get(i) or ()) for i in images]
        n_idx = min(5, min(counts)) if counts and min(counts) > 0 else 0
        if n_idx == 0:
            raise InputError("the human captions cover none of the labelled images of the caption set",
                             fix="pass human captions of the same images (COCO image ids)")
    if not images:
        raise InputError(f"no caption has an image labelled {c0}/{c1}",
                         fix="check the demographics file and the image ids")
    return LicPlan(images, n_idx, len(model_captions), labelled, attribute,
                   human_captions is not None)


def calibrate(clf, images, labels, classes, tokens, seed: int, test_ratio: float,
              n: int = 320) -> tuple[float, int]:
    """(seconds per caption per epoch, from one epoch on ``n`` training captions; size of
    the seed's train split)."""
    split = balanced_split(images, labels, classes, seed, test_ratio)
    train = split.train[:n]
    t0 = time.perf_counter()
    clf.fit_score([tokens[i] for i in train], split.train_labels[:n],
                  [tokens[i] for i in split.test[:64]], split.test_labels[:64], seed=seed, epochs=1)
    return (time.perf_counter() - t0) / max(1, len(train)), len(split.train)


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
