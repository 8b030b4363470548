"""The per-chunk context every metric's ``update`` reads: records, units, annotations.

One :class:`MetricContext` per chunk of captions holds the caption records, the
bootstrap units (images; an image-less caption is its own unit) and the
annotations, and derives once, lazily, the arrays several metrics share
(mentions per unit, CHAIR ground truth and instances as unit x category
matrices, hallucinated mentions, distinct mentioned pairs, image gender).
A missing annotation raises :class:`~capaudit.metrics.needs.MetricSkipped`
with the reason of :data:`~capaudit.metrics.needs.NEEDS`.

The ``{image_id: names}`` tables (instances, CHAIR ground truth) and the gender labels
become per-unit arrays for every chunk of an audit. Converting a Python dict of sets is the
slow part, so their columnar form (sorted image ids, CSR offsets, category indices) is built
once per table and cached while the table object lives (:func:`columnar`,
:func:`gender_codes`); each chunk is then a vectorised gather.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from capaudit.io.annotation_files import Annotations
from capaudit.io.imageids import ID_LIMIT
from capaudit.metrics.category_pairs import unique_keys
from capaudit.metrics.needs import NEEDS, MetricSkipped
from capaudit.text.records import CaptionRecords

__all__ = ["MetricContext", "UnitRecords"]


class UnitRecords:
    """What :class:`MetricContext` reads of records when its 'captions' are the units."""

    def __init__(self, mode: str, n: int):
        self.mode, self._n = mode, n

    def __len__(self) -> int:
        return self._n

    @property
    def categories(self) -> list[str]:
        from capaudit.text.objects import get_lexicon
        return get_lexicon(self.mode).categories


class MetricContext:
    """One chunk: records + image ids + annotations, with the derived arrays metrics share.

    Bootstrap units are images: captions with the same image id share a unit, and so do
    captions of one image named by text (a URL, a hex key: its unit key is at or above
    ``ID_LIMIT``, :func:`~capaudit.io.imageids.keyed_unit`); a caption without an image is
    a unit of its own. Only captions with an image id (``has_image``) take part in the
    metrics that need image annotations. ``unit_keys`` names each unit
    across chunks (image id, or ``-(offset + caption index + 1)``); ``captions``
    holds the chunk's raw text when the engine has it, ``config`` the audit's
    resolved settings (model names, judge backend, ...).
    """

    def __init__(self, records: CaptionRecords, image_ids: np.ndarray,
                 annotations: Annotations | None, min_images: int = 10, offset: int = 0,
                 captions: list[str] | None = None, config: dict | None = None):
        self.records = records
        self.offset = offset
        self.captions = captions
        self.config = config or {}
        self.annotations = annotations or Annotations()
        self.min_images = min_images
        ids = np.asarray(image_ids, dtype=np.int64)        # -1 = no image
        self.caption_image = ids
        image = ids >= 0           # an image: an id, or a text key's unit (>= ID_LIMIT)
        # ... of which only an id joins annotations (an image named by text has none)
        self.has_image = image & (ids < ID_LIMIT) if len(ids) and ids.max() >= ID_LIMIT \
            else image
        uniq, inv = np.unique(ids[image], return_inverse=True)
        self.images = uniq                                   # unit k < len(uniq) -> image
        unit = np.empty(len(ids), np.int64)
        unit[image] = inv
        unit[~image] = len(uniq) + np.arange(int((~image).sum()))
        self.n_units = len(uniq) + int((~image).sum())
        self.categories = records.categories
        self.n_cat = len(self.categories)
        self.unit = unit.astype(self.index_dtype, copy=False)
        self.unit_keys = np.concatenate([uniq, -(offset + np.flatnonzero(~image) + 1)])

    # ---- helpers -------------------------------------------------------
    def per_unit(self, values: np.ndarray | None = None, mask: np.ndarray | None = None) -> np.ndarray:
        """Sum ``values`` (default 1) of captions (``mask``) per unit."""
        unit = self.unit if mask is None else self.unit[mask]
        if values is not None and mask is not None:
            values = values[mask]
        return np.bincount(unit, weights=values, minlength=self.n_units).astype(np.float64)

    def _image_matrix(self, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """Bool [units, categories] from the annotation ``kind`` (``{image_id: names}``: the
        ``chair_gt`` or ``instances``) and a 'present' mask per unit; skipped without it."""
        table = getattr(self.annotations, kind)
        if table is None:
            raise MetricSkipped(NEEDS[kind])
        ids, indptr, cats = columnar(table, tuple(self.categories))
        n_img = len(self.images)
        pos = np.searchsorted(ids, self.images)
        pos = np.minimum(pos, max(len(ids) - 1, 0))
        found = (ids[pos] == self.images) if len(ids) else np.zeros(n_img, bool)
        present = np.zeros(self.n_units, dtype=bool)
        present[:n_img] = found
        units = np.flatnonzero(found)
        start, stop = indptr[pos[units]], indptr[pos[units] + 1]
        lens = stop - start
        rows = np.repeat(units, lens)
        take = np.repeat(start - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        mat = np.zeros((self.n_units, self.n_cat), dtype=bool)
        mat[rows, cats[take]] = True
        return mat, present

    @cached_property
    def index_dtype(self) -> type:
        """int32 for per-mention indices (caption, unit, caption x category keys) when they
        fit: halves the largest arrays of an audit of long captions; int64 otherwise."""
        big = (len(self.records) + 1) * max(self.n_cat, 1)
        return np.int32 if max(big, self.n_units) < 2 ** 31 - 1 else np.int64

    @cached_property
    def mention_caption(self) -> np.ndarray:
        dt = self.index_dtype
        return np.repeat(np.arange(len(self.records), dtype=dt), np.diff(self.records.m_offsets))

    @cached_property
    def mention_unit(self) -> np.ndarray:
        return self.unit[self.mention_caption].astype(self.index_dtype, copy=False)

    @cached_property
    def chair_gt(self) -> tuple[np.ndarray, np.ndarray]:
        return self._image_matrix("chair_gt")

    @cached_property
    def hallucinated(self) -> np.ndarray:
        """Bool per mention: category not in the CHAIR ground truth of its image.

        Images absent from the ground truth count as having none (the
        reference's defaultdict), so all their mentions are hallucinated.
        """
        gt, _ = self.chair_gt
        return ~gt[self.mention_unit, self.records.m_cat]

    @cached_property
    def instances(self) -> tuple[np.ndarray, np.ndarray]:
        return self._image_matrix("instances")

    @cached_property
    def mentioned_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct (caption, category) pairs, sorted by caption then category."""
        key = self.mention_caption * self.n_cat  # index_dtype: cannot overflow
        key += self.records.m_cat
        key = unique_keys(key)
        return key // self.n_cat, key % self.n_cat

    @cached_property
    def image_gender(self) -> np.ndarray:
        """int8 per unit: 0 unlabelled, 1 male, 2 female."""
        if not self.annotations.gender:
            raise MetricSkipped(NEEDS["demographics"])
        ids, codes = gender_codes(self.annotations.gender)
        out = np.zeros(self.n_units, np.int8)
        if len(ids):
            pos = np.minimum(np.searchsorted(ids, self.images), len(ids) - 1)
            hit = ids[pos] == self.images
            out[:len(self.images)] = np.where(hit, codes[pos], 0)
        return out


_CACHE: dict[tuple, tuple] = {}   # (id(table), key) -> (table, columnar form); a few entries


def _cached(table, key, build):
    """``build(table)`` once per annotation table object (held, so its id stays its own)."""
    k = (id(table), key)
    hit = _CACHE.get(k)
    if hit is not None and hit[0] is table and hit[2] == len(table):
        return hit[1]
    if len(_CACHE) >= 8:
        _CACHE.pop(next(iter(_CACHE)))
    value = build(table)
    _CACHE[k] = (table, value, len(table))
    return value


def columnar(table: dict[int, frozenset[str]], categories: tuple[str, ...]):
    """``{image_id: names}`` as (sorted image ids, CSR offsets, category indices): built once per
    table, so every chunk's image x category matrix is a vectorised gather."""
    def build(t):
        cat_ix = {c: i for i, c in enumerate(categories)}
        if all(hasattr(t, a) for a in ("ids", "offsets", "codes", "names")):  # ColumnarSets
            return _columnar_arrays(t, cat_ix)
        ids = np.fromiter(t.keys(), np.int64, len(t))
        order = np.argsort(ids, kind="stable")
        sets = list(t.values())
        per = [[cat_ix[n] for n in sets[i] if n in cat_ix] if sets[i] else [] for i in order.tolist()]
        indptr = np.zeros(len(per) + 1, np.int64)
        np.cumsum([len(p) for p in per], out=indptr[1:])
        cats = np.fromiter((c for p in per for c in p), np.int64, int(indptr[-1]))
        return ids[order], indptr, cats
    return _cached(table, categories, build)


def _columnar_arrays(t, cat_ix: dict[str, int]):
    """The same form straight from a columnar table's arrays (names outside the lexicon dropped)."""
    to_cat = np.array([cat_ix.get(n, -1) for n in t.names] or [-1], np.int64)
    cats = to_cat[t.codes] if len(t.codes) else np.zeros(0, np.int64)
    keep = cats >= 0
    row = np.repeat(np.arange(len(t.ids)), np.diff(t.offsets))
    counts = np.bincount(row[keep], minlength=len(t.ids))
    indptr = np.zeros(len(t.ids) + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    return t.ids, indptr, cats[keep]


def gender_codes(gender: dict[int, str]):
    """``{image_id: 'male'|'female'|...}`` as (sorted ids, int8 code: 1 male, 2 female, 0 other)."""
    def build(g):
        code = {"male": 1, "female": 2}
        ids = np.fromiter(g.keys(), np.int64, len(g))
        codes = np.fromiter((code.get(v, 0) for v in g.values()), np.int8, len(g))
        order = np.argsort(ids, kind="stable")
        return ids[order], codes[order]
    return _cached(gender, "gender", build)
