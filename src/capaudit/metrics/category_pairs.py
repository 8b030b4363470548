"""Distinct (caption, category) pairs: sorted unique keys and their per-caption list column.

Shared by the per-chunk context (``mentioned_pairs``), CHAIR's per-caption
details and the engine's detail columns.
"""

from __future__ import annotations

import numpy as np

__all__ = ["unique_keys", "category_lists"]


def unique_keys(keys: np.ndarray) -> np.ndarray:
    """``np.unique`` of a fresh 1-d integer array (sorted in place): the same values, without
    the ``numpy.ma`` import np.unique does on its first call (~10 ms of every audit's start)."""
    keys.sort()
    return keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if keys.size else keys


def category_lists(caps: np.ndarray, cats: np.ndarray, n: int, names: list[str]):
    """A pyarrow ``list<string>`` column of ``n`` captions from sorted (caption, category) pairs."""
    import pyarrow as pa

    from capaudit.core.arrays import from_numpy, strings

    offsets = np.searchsorted(caps, np.arange(n + 1)).astype(np.int32)
    # the names looked up here, not a dictionary array cast to string (pyarrow.compute)
    values = strings([names[c] for c in np.asarray(cats).tolist()])
    return pa.ListArray.from_arrays(from_numpy(offsets), values)
