"""The groupings, and captions split by their image's group, chunk by chunk.

``audit disparity`` reads a set's ``(image_id, caption)`` rows twice: a first
pass over the image ids alone (:func:`scan_images`: each group's images and
caption counts, the unlabelled captions) and a second that feeds every group's
captions to that group's metric accumulators (:class:`GroupStreams`). The
size-dependent metrics see only an equal-size subsample of each group's images
(:func:`equal_images`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice

import numpy as np

from capaudit.audit.engine import image_id_array
from capaudit.metrics import METRICS
from capaudit.metrics.context import MetricContext
from capaudit.metrics.stream import StreamStats
from capaudit.text.records import build_records

__all__ = ["GROUPINGS", "not_by", "group_seed", "labels_of", "caption_chunks", "scan_images",
           "equal_images", "GroupStreams"]


GROUPINGS = {"gender": ("male", "female"), "skin_tone": ("light", "dark")}


def not_by(by: str, names) -> dict[str, str]:
    """``{metric: reason}`` for the metrics whose spec says grouping by ``by`` makes no sense."""
    return {n: METRICS.get(n).not_by[by] for n in names if by in METRICS.get(n).not_by}


def group_seed(seed: int, k: int) -> int:
    """Seed of group ``k``'s bootstrap (and, with ``k`` = 99, of the equal-image subsample)."""
    return int(np.random.SeedSequence([int(seed), k]).generate_state(1)[0])


def labels_of(ids: np.ndarray, labels: dict) -> np.ndarray:
    """Each caption's group label (None: no image id, or an unlabelled image)."""
    return np.array([labels.get(int(i)) if i >= 0 else None for i in ids], dtype=object)


def caption_chunks(rows: Iterable[tuple[int | None, str]], size: int
                   ) -> Iterator[tuple[np.ndarray, list]]:
    """``(image ids, captions)`` of ``size`` rows at a time."""
    it = iter(rows)
    while True:
        part = list(islice(it, size))
        if not part:
            return
        yield image_id_array([r[0] for r in part]), [r[1] for r in part]


def scan_images(rows, labels: dict, groups: tuple[str, str], size: int):
    """First pass, image ids only: each group's distinct images and caption count, and the
    captions without a usable label (the captions themselves are not kept)."""
    images: dict[str, list[np.ndarray]] = {g: [] for g in groups}
    counts = dict.fromkeys(groups, 0)
    total = 0
    for ids, _ in caption_chunks(rows, size):
        lab = labels_of(ids, labels)
        total += len(ids)
        for g in groups:
            sel = ids[lab == g]
            counts[g] += len(sel)
            images[g].append(np.unique(sel))
    uniq = {g: np.unique(np.concatenate(v)) if v else np.zeros(0, np.int64)
            for g, v in images.items()}
    return uniq, counts, total - sum(counts.values())


def equal_images(images: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """Each group's images cut to the smaller group's number of images (seeded)."""
    k = min(len(v) for v in images.values())
    rng = np.random.default_rng(group_seed(seed, 99))
    return {g: v if len(v) == k else np.sort(rng.choice(v, k, replace=False))
            for g, v in images.items()}


class GroupStreams:
    """One :class:`StreamStats` per group (over ``names``), fed chunk by chunk with the
    chunk's captions of that group, optionally only those of ``keep[g]`` images."""

    def __init__(self, groups, names, skip, mode, annotations, min_images, workers, config,
                 keep: dict[str, np.ndarray] | None = None):
        self.acc = {g: StreamStats([n for n in names if n not in skip], mode, annotations,
                                   min_images, config) for g in groups}
        self.names, self.skip, self.keep = names, skip, keep
        self.mode, self.annotations, self.min_images = mode, annotations, min_images
        self.workers, self.config = workers, config

    def add(self, g: str, ids: np.ndarray, captions: list, sel: np.ndarray) -> None:
        if self.keep is not None:
            sel = sel[np.isin(ids[sel], self.keep[g])]
        if not len(sel):
            return
        acc = self.acc[g]
        texts = [captions[i] for i in sel]
        records = build_records(texts, mode=self.mode, workers=self.workers)
        acc.add(MetricContext(records, ids[sel], self.annotations, self.min_images,
                              offset=acc.n_captions, captions=texts, config=self.config))

    def estimates(self, g: str):
        """``(estimates, skipped, bootstrap units, images)`` of group ``g``."""
        ests, skipped, units = self.acc[g].estimates()
        skipped.update({n: self.skip[n] for n in self.names if n in self.skip})
        return ests, skipped, units.n, units.n_images
