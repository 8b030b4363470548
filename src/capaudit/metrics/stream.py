"""The mergeable state of a whole audit: every metric's accumulator plus the units.

Why: an audit is a stream of chunks -- a single chunk in memory, many chunks
of a large file, one state per shard or Ray worker. :class:`StreamStats` holds,
for each requested metric, the state its ``update`` returns for a chunk,
merged chunk by chunk with its ``merge``; plus the captions per unit (the
bootstrap units of the whole audit). Two ``StreamStats`` of disjoint inputs
merge into that of their concatenation (:meth:`StreamStats.merge`), so the
engine needs no per-metric code: a newly registered metric streams, shards
and bootstraps without an edit here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from capaudit.metrics.base import METRICS
from capaudit.metrics.context import MetricContext
from capaudit.metrics.estimate import Estimate
from capaudit.metrics.needs import NEEDS, MetricSkipped
from capaudit.metrics.state import UnitSums, Units
from capaudit.errors import InputError
from capaudit.io.annotation_files import Annotations

__all__ = ["StreamStats", "check_streams", "missing_need"]


def missing_need(cls, annotations: Annotations) -> str | None:
    """Why ``cls`` cannot run with these annotations (``None``: it can)."""
    have = {"instances": annotations.instances is not None,
            "chair_gt": annotations.chair_gt is not None,
            "demographics": bool(annotations.gender)}
    for need in [n for n in NEEDS if n in cls.needs]:
        if not have.get(need, True):  # model, judge, reference: the metric checks itself
            return NEEDS[need]
    return None


def check_streams(names: list[str]) -> None:
    """Every name is a registered metric the engine can compute (one-line error otherwise)."""
    for name in names:
        cls = METRICS.get(name)  # did-you-mean on typos
        if not cls.streams:
            how = " and use --lic" if name.startswith("lic") else \
                f" and run capaudit audit {name.split('.')[0]}" if "judge" in cls.needs else ""
            raise InputError(f"metric '{name}' is not computed by the caption audit",
                             fix="drop it from --metrics" + how)


class StreamStats:
    """Every metric's merged state over the chunks seen so far (one mention mode)."""

    def __init__(self, names: list[str], mode: str, annotations: Annotations | None,
                 min_images: int = 10, config: dict | None = None):
        check_streams(names)
        self.mode = mode
        self.annotations = annotations or Annotations()
        self.min_images = min_images
        self.config = config or {}
        self.metrics = {n: METRICS.get(n)() for n in names}
        self.states: dict[str, Any] = {}
        self.skipped: dict[str, str] = {}
        for n, m in self.metrics.items():
            why = missing_need(type(m), self.annotations)
            if why:
                self.skipped[n] = why
        self.units: UnitSums | None = None   # captions per unit
        self.n_captions = 0

    def add(self, ctx: MetricContext) -> None:
        """Update every metric with one chunk and merge it in."""
        if len(ctx.records) == 0:
            return
        core = UnitSums.of(ctx, None)
        self.units = core if self.units is None else self.units.merge(core)
        self.n_captions += len(ctx.records)
        for name, metric in self.metrics.items():
            if name in self.skipped:
                continue
            try:
                state = metric.update(ctx)
            except MetricSkipped as exc:
                self.skipped[name] = str(exc)
                self.states.pop(name, None)
                continue
            old = self.states.get(name)
            self.states[name] = state if old is None else metric.merge(old, state)

    def merge(self, other: "StreamStats") -> "StreamStats":
        """Add the state of a disjoint input (another shard or worker) into this one."""
        if other.units is not None:
            self.units = other.units if self.units is None else self.units.merge(other.units)
        self.n_captions += other.n_captions
        self.skipped.update(other.skipped)
        for name, metric in self.metrics.items():
            if name in self.skipped:
                self.states.pop(name, None)
                continue
            b = other.states.get(name)
            if b is not None:
                a = self.states.get(name)
                self.states[name] = b if a is None else metric.merge(a, b)
        return self

    def unit_table(self) -> Units:
        sums = self.units if self.units is not None else UnitSums(
            np.zeros(0, np.int64), np.zeros((0, 1)))
        return Units(sums, self.mode, self.annotations, self.min_images, self.config)

    def estimates(self, units: Units | None = None
                  ) -> tuple[dict[str, Estimate], dict[str, str], Units]:
        """``({name: Estimate}, {name: skip reason}, units)`` for every metric."""
        units = units or self.unit_table()
        out: dict[str, Estimate] = {}
        skipped = dict(self.skipped)
        for name, metric in self.metrics.items():
            if name in skipped:
                continue
            try:
                state = self.states.get(name)
                if state is None:  # no captions at all
                    state = metric.update(_empty_context(self))
                out[name] = metric.finalize(state, units)
            except MetricSkipped as exc:
                skipped[name] = str(exc)
        return out, skipped, units


def _empty_context(acc: StreamStats) -> MetricContext:
    from capaudit.text.records import build_records

    # no captions, not unknown ones: a metric reading ctx.captions sees an empty list
    return MetricContext(build_records([], mode=acc.mode, workers=1), np.zeros(0, np.int64),
                         acc.annotations, acc.min_images, captions=[], config=acc.config)
