"""Lookups of the metric specs: what compare, report, plots, disparity and the CLI read.

Every table that used to be kept by hand beside the metrics (default list,
corrected metrics, direction, label, notes, trade-off plots, groupings that
make no sense, size dependence, per-caption detail columns) is derived here
from the registered :class:`~capaudit.metrics.base.Metric` classes, so a
new metric -- built in or from a ``capaudit.metrics`` entry point -- shows up
everywhere without an edit. ``<name>_corrected`` (the corrected-mode twin of a
metric with ``corrected = True``) resolves to its base metric's spec.
"""

from __future__ import annotations

from typing import Iterable

from capaudit.metrics.base import METRICS, Metric
from capaudit.metrics.needs import ANNOTATION_NEEDS

__all__ = ["CORRECTED_SUFFIX", "metric_spec", "default_metrics", "corrected_metrics", "label",
           "direction", "description", "arrow", "specs", "ordered", "number_format",
           "annotation_kinds"]

CORRECTED_SUFFIX = "_corrected"


def metric_spec(name: str) -> type[Metric] | None:
    """The spec of ``name`` (``None`` for a result key no registered metric produces)."""
    base = name[:-len(CORRECTED_SUFFIX)] if name.endswith(CORRECTED_SUFFIX) else name
    if base not in METRICS:
        return None
    cls = METRICS.get(base)
    if base != name and not cls.corrected:
        return None
    return cls


def specs() -> list[type[Metric]]:
    """Every registered metric, in registration order (plugins loaded)."""
    return METRICS.available()   # a broken plugin: warned once, left out


def default_metrics() -> list[str]:
    """What ``audit run`` computes when no ``--metrics`` is given."""
    return [c.name for c in specs() if c.default and c.streams]


def corrected_metrics(names: Iterable[str]) -> list[str]:
    """Those of ``names`` that also have a corrected-mode value."""
    return [n for n in names if (s := metric_spec(n)) is not None and s.corrected]


def label(name: str) -> str:
    s = metric_spec(name)
    if s is None:
        return name
    text = s.label or s.name
    return text + " corr." if name.endswith(CORRECTED_SUFFIX) else text


def direction(name: str) -> int:
    """+1 higher is better, -1 lower is better, 0 descriptive (unknown names: 0)."""
    s = metric_spec(name)
    return s.direction if s is not None else 0


def arrow(name: str) -> str:
    return {1: " ↑", -1: " ↓", 0: ""}[direction(name)]


def description(name: str) -> str:
    s = metric_spec(name)
    if s is None:
        return ""
    return s.description + (" (corrected-mode object mentions)"
                            if name.endswith(CORRECTED_SUFFIX) else "")


def number_format(name: str) -> str:
    """How every view writes a value of ``name`` (``"{:.2f}"`` unless its spec says)."""
    s = metric_spec(name)
    return s.number_format if s is not None else "{:.2f}"


def annotation_kinds(names: Iterable[str]) -> list[str]:
    """The annotation kinds the metrics ``names`` need, by their spec (plugins included),
    in the coverage check's order; a name no metric produces needs none."""
    kinds = {k for n in names if (s := metric_spec(n)) is not None for k in s.needs}
    return [k for k in ANNOTATION_NEEDS if k in kinds]


def ordered(names: Iterable[str]) -> list[str]:
    """``names`` in the one column order of every view: registration order (the import
    order of :mod:`capaudit.metrics`, then plugins), a corrected twin right after its base
    metric; names no metric produces after them, as given."""
    names = list(dict.fromkeys(names))
    rank = {}
    for i, cls in enumerate(specs()):
        rank[cls.name] = (i, 0)
        if cls.corrected:
            rank[cls.name + CORRECTED_SUFFIX] = (i, 1)
    return (sorted((n for n in names if n in rank), key=rank.__getitem__)
            + [n for n in names if n not in rank])
