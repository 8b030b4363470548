"""Image annotation tables in columnar form, built once per table object.

The per-chunk context (:class:`~capaudit.metrics.context.MetricContext`) turns
``{image_id: names}`` tables (instances, CHAIR ground truth) and the gender
labels into per-unit arrays for every chunk of an audit. Converting a Python
dict of sets is the slow part, so the columnar form (sorted image ids, CSR
offsets, category indices) is built once per table and cached while the table
object lives; each chunk is then a vectorised gather.
"""

from __future__ import annotations

import numpy as np

__all__ = ["columnar", "gender_codes"]


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
