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

__all__ = ["LicPlan", "Calibration", "calibrate", "plan_images"]


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


@dataclass
class Calibration:
    """Seconds a classifier takes here now: ``fixed`` once (set-up, scoring), then per epoch
    ``per_epoch`` plus ``per_caption`` for each training caption."""

    per_caption: float
    per_epoch: float
    fixed: float
    n_train: int               # the seed's train split

    def seconds(self, classifiers: int, epochs: int) -> float:
        return classifiers * (self.fixed + epochs * (self.per_epoch +
                                                     self.per_caption * self.n_train))


def calibrate(clf, images, labels, classes, tokens, seed: int, test_ratio: float,
              n: int = 320, clock=time.perf_counter) -> Calibration:
    """The classifier's cost on this machine now, from short runs on the seed's captions.

    Why three timed runs: one epoch on 320 captions, timed alone, held torch's first-call
    warm-up, each classifier's set-up and each epoch's own overhead, all divided by 320
    captions and multiplied by every caption-epoch: the estimate said 9 min for a run of
    2:39 (3,000 nic captions, one seed). So a short run warms torch up (not timed); one
    and three epochs on ``n`` captions give an epoch's cost at ``n`` (their difference)
    and the per-classifier cost (the rest); one epoch on ``3n`` captions gives the cost of a
    caption (the rest of an epoch does not grow with the captions). ``clock``: wall time
    (what a user waits; ``benchmarks/bench_lic_estimate.py`` passes CPU time to check the
    model on a shared machine)."""
    split = balanced_split(images, labels, classes, seed, test_ratio)
    x, y = [tokens[i] for i in split.train], split.train_labels
    tx, ty = [tokens[i] for i in split.test[:64]], split.test_labels[:64]

    def timed(k: int, epochs: int) -> float:
        t0 = clock()
        clf.fit_score(x[:k], y[:k], tx, ty, seed=seed, epochs=epochs)
        return clock() - t0

    timed(min(64, len(x)), 1)               # torch's first call: warm-up, not timed
    small, big = min(n, len(x)), min(3 * n, len(x))
    one, three = timed(small, 1), timed(small, 3)
    epoch = max(three - one, 0.0) / 2       # one epoch on `small` captions
    per_caption = max(timed(big, 1) - one, 0.0) / (big - small) if big > small else \
        epoch / max(1, small)
    per_epoch = max(epoch - per_caption * small, 0.0)
    return Calibration(per_caption, per_epoch, max(one - epoch, 0.0), len(split.train))


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
