"""Image-level annotation sets held as arrays: what the store's parse cache hands back.

Why in ``core``: the store builds it (:func:`capaudit.store.annotations.cached_sets`),
the loaders in :mod:`capaudit.io.annotation_files` and the metrics read it, so it
sits below all three.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ColumnarSets", "SortedIdRows"]


class SortedIdRows(Mapping):
    """A read-only mapping keyed by the sorted int64 array ``self.ids`` (row ``i`` of CSR
    arrays the subclass reads in ``__getitem__``): lookup by binary search, iteration and
    length from the array. The annotation sets and the sharded filter's evidence share it."""

    ids: Any

    def _pos(self, key) -> int:
        import numpy as np

        if not isinstance(key, (int, np.integer)) or isinstance(key, bool) or not len(self.ids):
            return -1
        i = int(np.searchsorted(self.ids, key))
        return i if i < len(self.ids) and self.ids[i] == key else -1

    def __contains__(self, key) -> bool:
        return self._pos(key) >= 0

    def __iter__(self):
        return iter(self.ids.tolist())

    def __len__(self) -> int:
        return len(self.ids)


class ColumnarSets(SortedIdRows):
    """A read-only ``{image_id: frozenset(names)}`` held as arrays, as the store's parse cache
    returns it: sorted image ids, CSR ``offsets`` into ``codes``, and ``names[code]``.

    It behaves as the dict the loaders build (``get``, ``in``, iteration, ``==``); the
    metrics read the arrays directly (no per-image Python objects, see
    :func:`capaudit.metrics.base.MetricContext`)."""

    def __init__(self, ids, offsets, codes, names: list[str]):
        import numpy as np

        self.ids = np.asarray(ids, np.int64)
        self.offsets = np.asarray(offsets, np.int64)
        self.codes = np.asarray(codes, np.int64)
        self.names = list(names)

    @classmethod
    def from_pairs(cls, ids, codes, names: list[str]) -> "ColumnarSets":
        """The table of ``(image id, code)`` pairs in any order: code ``-1`` names nothing (the
        image is present with an empty set); a pair given twice counts once."""
        import numpy as np

        ids, codes = np.asarray(ids, np.int64), np.asarray(codes, np.int64)
        width = len(names) + 1
        if not len(ids) or (ids.min() >= 0 and ids.max() < (1 << 62) // width):
            key = ids * width + codes + 1
            if not (key[1:] >= key[:-1]).all():  # stored sources come sorted (put_source)
                key.sort()  # one sort of one key (lexsort: 2 passes)
                ids, codes = np.divmod(key, width)
                codes -= 1
        else:
            order = np.lexsort((codes, ids))
            ids, codes = ids[order], codes[order]
        new = np.ones(len(ids), bool)
        new[1:] = (ids[1:] != ids[:-1]) | (codes[1:] != codes[:-1])
        if not new.all():
            ids, codes = ids[new], codes[new]
        first = np.ones(len(ids), bool)
        first[1:] = ids[1:] != ids[:-1]
        row = np.cumsum(first) - 1
        named = codes >= 0
        offsets = np.zeros(int(first.sum()) + 1, np.int64)
        np.cumsum(np.bincount(row[named], minlength=len(offsets) - 1), out=offsets[1:])
        return cls(ids[first], offsets, codes[named], names)

    def __getitem__(self, key) -> frozenset[str]:
        i = self._pos(key)
        if i < 0:
            raise KeyError(key)
        names = self.names
        return frozenset(names[c] for c in self.codes[self.offsets[i]:self.offsets[i + 1]].tolist())
