"""The metric spec, its mergeable accumulator, and the shared per-chunk context.

A metric is one :class:`Metric` subclass in one module, registered by name:
its *spec* (label, description, direction, criterion, what it needs, corrected
mode, size dependence, groupings that make no sense, per-caption detail
columns) is read by the engine, compare, report, plots, disparity and the CLI,
so adding a metric needs no edit anywhere else. Its computation is a mergeable
accumulator (:mod:`capaudit.metrics.state`): ``update(ctx)`` turns one
chunk of captions into per-image sufficient statistics (or a set-valued state
such as the vocabulary), ``merge(a, b)`` combines two partial states (chunks,
shards, Ray workers), and ``finalize(state, units)`` gives an
:class:`Estimate` -- per-unit statistics and the function from their column
sums to the value -- which the engine bootstraps over images
(:mod:`capaudit.audit.bootstrap`) without re-running the metric.

A metric whose annotations are missing raises :class:`MetricSkipped`; the
engine records the reason instead of failing the whole audit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, ClassVar, Mapping

import numpy as np

from capaudit.core.registry import Registry
from capaudit.io.annotation_files import Annotations
from capaudit.text.records import CaptionRecords

__all__ = ["METRICS", "Metric", "register_metric", "CRITERIA", "NEEDS", "MetricResult", "Estimate",
           "SparseStats", "MetricContext", "MetricSkipped", "UnitRecords", "ratio"]

# LOTUS-style criteria a metric reports on (the leaderboard groups by these)
CRITERIA = ("descriptiveness", "alignment", "complexity", "side_effects", "bias")
# what a metric may need; the engine skips a metric whose annotation is missing, with this reason
NEEDS = {
    "instances": "no instance annotations (give --instances)",
    "chair_gt": "no CHAIR ground truth (give --chair-gt)",
    "demographics": "no image gender labels (give --demographics)",
    "reference": "no reference caption set",
    "model": "no model",
    "judge": "no judge backend",
    "images": "no images",
}


class Metric:
    """Spec + mergeable accumulator of one metric. Subclass it, set the class attributes,
    implement :meth:`update` and :meth:`finalize`, and register it (:func:`register_metric`).

    Spec (class attributes, read without instantiating):

    - ``name`` (registry key, also the column name in results), ``label`` (table header),
      ``description`` (one line for reports and ``audit metrics``);
    - ``direction``: +1 higher is better, -1 lower is better, 0 descriptive only;
    - ``criterion``: one of :data:`CRITERIA`;
    - ``needs``: subset of :data:`NEEDS` keys;
    - ``corrected``: also computed on corrected-mode object mentions as ``<name>_corrected``;
    - ``size_dependent``: grows with sample size (disparity compares equal-size groups);
    - ``not_by``: ``{grouping: reason}`` for groupings that make no sense (``"gender"``);
    - ``details``: ``{column: pyarrow type}`` per-caption columns from :meth:`caption_details`;
    - ``default``: computed by ``audit run`` when no ``--metrics`` is given;
    - ``streams``: ``False`` for metrics computed outside the engine (LIC trains models).
    """

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    description: ClassVar[str] = ""
    direction: ClassVar[int] = 0
    criterion: ClassVar[str] = "descriptiveness"
    needs: ClassVar[frozenset[str]] = frozenset()
    corrected: ClassVar[bool] = False
    size_dependent: ClassVar[bool] = False
    not_by: ClassVar[Mapping[str, str]] = {}
    details: ClassVar[Mapping[str, Any]] = {}
    default: ClassVar[bool] = True
    streams: ClassVar[bool] = True
    version: ClassVar[str] = "1"

    def update(self, ctx: "MetricContext") -> Any:
        """State of one chunk (usually :class:`~.state.UnitSums` / :class:`~.state.UnitCells`)."""
        raise NotImplementedError

    def merge(self, a: Any, b: Any) -> Any:
        """State of two chunks together (default: ``a.merge(b)``)."""
        return a.merge(b)

    def finalize(self, state: Any, units) -> "Estimate":
        """Estimate over all units (:class:`~.state.Units`) from the merged state."""
        raise NotImplementedError

    def caption_details(self, ctx: "MetricContext") -> dict[str, Any]:
        """Per-caption columns named in ``details`` (arrays of ``len(ctx.records)``)."""
        return {}

    @classmethod
    def spec(cls) -> dict[str, Any]:
        """The spec as plain JSON-able data (``audit metrics --json``)."""
        return {"name": cls.name, "label": cls.label or cls.name, "description": cls.description,
                "direction": cls.direction, "criterion": cls.criterion,
                "needs": sorted(cls.needs), "corrected": cls.corrected,
                "size_dependent": cls.size_dependent, "not_by": dict(cls.not_by),
                "details": {k: str(v) for k, v in cls.details.items()}, "default": cls.default,
                "streams": cls.streams, "version": cls.version}


def _check_metric(name: str, cls) -> None:
    if cls.name != name:
        raise ValueError(f"metric registered as '{name}' has name '{cls.name}'")
    if cls.criterion not in CRITERIA:
        raise ValueError(f"metric '{cls.name}': criterion '{cls.criterion}' not in {CRITERIA}")
    unknown = set(cls.needs) - set(NEEDS)
    if unknown:
        raise ValueError(f"metric '{cls.name}': unknown needs {sorted(unknown)} (known: {list(NEEDS)})")
    bad = [c for c in cls.details if not re.fullmatch(r"[a-z_][a-z0-9_]*", c)]
    if bad:
        raise ValueError(f"metric '{cls.name}': detail columns must be lowercase identifiers: {bad}")
    if cls.direction not in (-1, 0, 1):
        raise ValueError(f"metric '{cls.name}': direction must be +1, -1 or 0")


METRICS: Registry = Registry("metric", base=Metric, check=_check_metric, group="metrics")


def register_metric(cls: type[Metric]) -> type[Metric]:
    """Class decorator: register ``cls`` under ``cls.name`` (a second name is refused)."""
    METRICS.register(cls.name, cls, version=cls.version, description=cls.description)
    return cls


class MetricSkipped(Exception):
    """The metric cannot be computed on this input (the message says why)."""


@dataclass
class MetricResult:
    """One metric on one caption set: value, sample size, 95% bootstrap interval."""

    value: float | None
    n: int
    ci_low: float | None = None
    ci_high: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None   # reason, when the metric could not be computed

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "n": self.n, "ci": [self.ci_low, self.ci_high]}
        if self.skipped:
            out["skipped"] = self.skipped
        if "distinct" in self.extra:  # vocab: exact count or HyperLogLog sketch
            out["distinct"] = self.extra["distinct"]
        return out


class SparseStats:
    """Mostly-zero per-unit statistics in coordinate form (e.g. units x categories)."""

    def __init__(self, units: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape: tuple[int, int]):
        order = np.lexsort((units, cols))  # group by column
        self.units, self.cols = units[order], cols[order]
        self.vals = np.asarray(vals, np.float64)[order]
        self.shape = shape
        self.ucols, self.starts = np.unique(self.cols, return_index=True)

    def sum(self, axis: int = 0) -> np.ndarray:
        assert axis == 0
        return np.bincount(self.cols, weights=self.vals, minlength=self.shape[1])

    @cached_property
    def _product(self):
        """(non-zero units, their statistics) for :meth:`resampled_sums`.

        A ``scipy.sparse`` CSR matrix [those units, k] when scipy is installed,
        else ``None`` (numpy gather + ``reduceat`` fallback, same sums).
        """
        rows, inv = np.unique(self.units, return_inverse=True)
        try:
            import scipy.sparse as sp
        except ImportError:  # pragma: no cover - scipy is optional
            return rows, inv, None
        mat = sp.csr_array((self.vals, (inv, self.cols)), shape=(len(rows), self.shape[1]))
        mat.sum_duplicates()
        return rows, inv, mat

    def resampled_sums(self, counts: np.ndarray) -> np.ndarray:
        """``counts @ stats`` for a block of draw counts [b, units] -> [b, k].

        Only the units with a non-zero statistic are gathered (e.g. images of
        labelled gender for the recall-disparity table), then one sparse product.
        """
        if not len(self.units):
            return np.zeros((len(counts), self.shape[1]))
        rows, inv, mat = self._product
        sub = counts[:, rows]
        if mat is not None:
            return np.asarray(sub @ mat, dtype=np.float64)
        out = np.zeros((self.shape[1], len(counts)))
        contrib = np.ascontiguousarray(sub.T)[inv] * self.vals[:, None]
        out[self.ucols] = np.add.reduceat(contrib, self.starts, axis=0)
        return out.T


@dataclass
class Estimate:
    """Per-unit sufficient statistics of a metric (rows = bootstrap units)."""

    stats: np.ndarray | SparseStats                    # float64 [units, k]
    finalize: Callable[[np.ndarray], np.ndarray]       # [..., k] column sums -> [...] values
    n: int
    extra: dict[str, Any] = field(default_factory=dict)
    # custom bootstrap: f(counts [b, units]) -> values [b]; used instead of stats when set
    boot: Callable[[np.ndarray], np.ndarray] | None = None
    value: float | None = None                         # set when not a function of the sums
    recentre: bool = False  # interval = bootstrap spread around the point value (biased statistics)
    # values [n_boot] that come from no resample (a sketch's error band): f(n_boot), used
    # instead of the resamples, so how the replicates are split into blocks cannot matter
    spread: Callable[[int], np.ndarray] | None = None


def ratio(scale: float = 100.0) -> Callable[[np.ndarray], np.ndarray]:
    """``finalize`` for a two-column (numerator, denominator) statistic."""
    def fin(s: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return scale * s[..., 0] / s[..., 1]
    return fin


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

    Bootstrap units are images: captions with the same image id share a unit;
    a caption without an image id is a unit of its own and is left out of
    every metric that needs image annotations. ``unit_keys`` names each unit
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
        ids = np.asarray(image_ids, dtype=np.int64)        # -1 = no image id
        self.caption_image = ids
        self.has_image = ids >= 0
        uniq, inv = np.unique(ids[self.has_image], return_inverse=True)
        self.images = uniq                                   # unit k < len(uniq) -> image id
        unit = np.empty(len(ids), np.int64)
        unit[self.has_image] = inv
        unit[~self.has_image] = len(uniq) + np.arange(int((~self.has_image).sum()))
        self.unit = unit
        self.n_units = len(uniq) + int((~self.has_image).sum())
        self.categories = records.categories
        self.n_cat = len(self.categories)
        self.unit = unit.astype(self.index_dtype, copy=False)
        self.unit_keys = np.concatenate([uniq, -(offset + np.flatnonzero(~self.has_image) + 1)])

    # ---- helpers -------------------------------------------------------
    def per_unit(self, values: np.ndarray | None = None, mask: np.ndarray | None = None) -> np.ndarray:
        """Sum ``values`` (default 1) of captions (``mask``) per unit."""
        unit = self.unit if mask is None else self.unit[mask]
        if values is not None and mask is not None:
            values = values[mask]
        return np.bincount(unit, weights=values, minlength=self.n_units).astype(np.float64)

    def _image_matrix(self, table: dict[int, frozenset[str]]) -> tuple[np.ndarray, np.ndarray]:
        """Bool [units, categories] from ``{image_id: names}`` and a 'present' mask per unit."""
        ids, indptr, cats = _columnar(table, tuple(self.categories))
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
        if self.annotations.chair_gt is None:
            raise MetricSkipped(NEEDS["chair_gt"])
        return self._image_matrix(self.annotations.chair_gt)

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
        if self.annotations.instances is None:
            raise MetricSkipped(NEEDS["instances"])
        return self._image_matrix(self.annotations.instances)

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
        ids, codes = _gender_codes(self.annotations.gender)
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


def _columnar(table: dict[int, frozenset[str]], categories: tuple[str, ...]):
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


def _gender_codes(gender: dict[int, str]):
    """``{image_id: 'male'|'female'|...}`` as (sorted ids, int8 code: 1 male, 2 female, 0 other)."""
    def build(g):
        code = {"male": 1, "female": 2}
        ids = np.fromiter(g.keys(), np.int64, len(g))
        codes = np.fromiter((code.get(v, 0) for v in g.values()), np.int8, len(g))
        order = np.argsort(ids, kind="stable")
        return ids[order], codes[order]
    return _cached(gender, "gender", build)


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
