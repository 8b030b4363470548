"""The metric spec and its registry: what a metric plugin subclasses and registers.

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

This module holds the spec and the registry; the rest of the metric API lives
beside it and is re-exported here, where plugins import it from:
:mod:`.needs` (:data:`NEEDS`, :class:`MetricSkipped`), :mod:`.estimate`
(:class:`Estimate`, :class:`SparseStats`, :func:`ratio`, :class:`MetricResult`)
and :mod:`.context` (:class:`MetricContext`, :class:`UnitRecords`).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Mapping

from capaudit.core.registry import Registry
from capaudit.metrics.context import MetricContext, UnitRecords
from capaudit.metrics.estimate import Estimate, MetricResult, SparseStats, ratio
from capaudit.metrics.needs import NEEDS, MetricSkipped
from capaudit.metrics.state_types import register_state

__all__ = ["METRICS", "Metric", "register_metric", "CRITERIA", "NEEDS", "MetricResult", "Estimate",
           "SparseStats", "MetricContext", "MetricSkipped", "UnitRecords", "ratio"]

# LOTUS-style criteria a metric reports on (the leaderboard groups by these)
CRITERIA = ("descriptiveness", "alignment", "complexity", "side_effects", "bias")


class Metric:
    """Spec + mergeable accumulator of one metric. Subclass it, set the class attributes,
    implement :meth:`update` and :meth:`finalize`, and register it (:func:`register_metric`).

    Spec (class attributes, read without instantiating):

    - ``name`` (registry key, also the column name in results), ``label`` (table header),
      ``description`` (one line for reports and ``audit metrics``);
    - ``direction``: +1 higher is better, -1 lower is better, 0 descriptive only (never
      marked best/worst, no arrow, left out of the leaderboard's N-avg);
    - ``criterion``: one of :data:`CRITERIA`;
    - ``needs``: subset of :data:`NEEDS` keys; the annotation kinds among them
      (``instances``, ``chair_gt``, ``demographics``) are held to the coverage check before
      the audit (:mod:`capaudit.audit.annotation_coverage`), as for the built-in metrics;
    - ``number_format``: how every view writes a value and its interval (``"{:,.0f}"`` for
      a count such as the vocabulary);
    - ``state_types``: dataclasses of its accumulator state, registered for shard state
      files when the metric is (:mod:`.state_types`);
    - ``corrected``: also computed on corrected-mode object mentions as ``<name>_corrected``;
    - ``size_dependent``: grows with sample size (disparity compares equal-size groups);
    - ``not_by``: ``{grouping: reason}`` for groupings that make no sense (``"gender"``);
    - ``details``: ``{column: pyarrow type}`` per-caption columns from :meth:`caption_details`;
    - ``vocabulary``: reads the records' token table (``token_counts``, ``postings``), which
      the audit builds only when an asked metric says so;
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
    vocabulary: ClassVar[bool] = False
    default: ClassVar[bool] = True
    streams: ClassVar[bool] = True
    number_format: ClassVar[str] = "{:.2f}"
    state_types: ClassVar[tuple[type, ...]] = ()
    version: ClassVar[str] = "1"

    def update(self, ctx: MetricContext) -> Any:
        """State of one chunk (usually :class:`~.state.UnitSums` / :class:`~.state.UnitCells`)."""
        raise NotImplementedError

    def merge(self, a: Any, b: Any) -> Any:
        """State of two chunks together (default: ``a.merge(b)``)."""
        return a.merge(b)

    def finalize(self, state: Any, units) -> Estimate:
        """Estimate over all units (:class:`~.state.Units`) from the merged state."""
        raise NotImplementedError

    def caption_details(self, ctx: MetricContext) -> dict[str, Any]:
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
                "streams": cls.streams, "number_format": cls.number_format,
                "version": cls.version}


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
    try:
        cls.number_format.format(1.0)
    except (ValueError, IndexError, KeyError) as exc:
        raise ValueError(f"metric '{cls.name}': number_format {cls.number_format!r} does not "
                         f"format a number ({exc})") from exc
    for state in cls.state_types:
        try:
            register_state(state)
        except TypeError as exc:
            raise ValueError(f"metric '{cls.name}': state_types: {exc}") from exc


METRICS: Registry = Registry("metric", base=Metric, check=_check_metric, group="metrics")


def register_metric(cls: type[Metric]) -> type[Metric]:
    """Class decorator: register ``cls`` under ``cls.name`` (a second name is refused)."""
    METRICS.register(cls.name, cls, version=cls.version, description=cls.description)
    return cls
