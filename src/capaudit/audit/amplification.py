"""Amplification: every metric's downstream value minus its upstream value, with an interval.

This is Table 2 of the GCE paper: a captioner trained on a caption set (upstream)
is audited on held-out images (downstream); a positive delta in a bias or
hallucination metric means the model amplified what its training captions had.

The interval of the delta must be honest about what is known:

- **paired bootstrap** (``method="paired-bootstrap"``) when per-image statistics of
  both sides are given for the *same* images: images are resampled together, so the
  correlation between the two sides is kept. Per-image statistics are
  ``{image_id: (numerator, denominator)}`` and the metric is
  ``sum(numerator) / sum(denominator)`` (a mean when every denominator is 1; CHAIR_i
  and recall-style ratios otherwise).
- **independent combination** (``method="independent"``) otherwise: the two
  bootstrap intervals are combined as for independent estimates with the MOVER
  rule (Zou & Donner 2008), which keeps asymmetric intervals asymmetric:
  ``lo = d - sqrt((D - D_lo)^2 + (U_hi - U)^2)``, ``hi = d + sqrt((D_hi - D)^2 + (U - U_lo)^2)``.
  Upstream (training images) and downstream (held-out images) are different images
  in the paper's design, so independence is the right model there; on the same
  images with positive correlation it is conservative (too wide, never too narrow).
- ``method="none"`` when either side has no interval: the delta is shown without one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping

import numpy as np


@dataclass
class Stat:
    """A metric value as stored (same fields as the audit engine's ``MetricResult``)."""

    value: float | None
    n: int | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    extra: dict | None = None


@dataclass
class AmplificationRow:
    metric: str
    upstream: float | None
    downstream: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    n_upstream: int | None
    n_downstream: int | None
    method: str

    def as_dict(self) -> dict:
        return asdict(self)


def _get(obj: Any, name: str):
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _num(x) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def mover_interval(up, down) -> tuple[float | None, float | None]:
    """Interval of ``down - up`` from two independent intervals (MOVER)."""
    u, ul, uh = (_num(_get(up, k)) for k in ("value", "ci_low", "ci_high"))
    d, dl, dh = (_num(_get(down, k)) for k in ("value", "ci_low", "ci_high"))
    if None in (u, ul, uh, d, dl, dh):
        return None, None
    delta = d - u
    return (delta - math.sqrt((d - dl) ** 2 + (uh - u) ** 2),
            delta + math.sqrt((dh - d) ** 2 + (u - ul) ** 2))


def paired_bootstrap(up: Mapping[int, tuple[float, float]], down: Mapping[int, tuple[float, float]],
                     *, n_boot: int = 1000, level: float = 0.95, seed: int = 0
                     ) -> tuple[float, float, float, int] | None:
    """(delta, lo, hi, n) of ratio metrics over the images both sides have; None if none."""
    common = sorted(set(up) & set(down))
    if not common:
        return None
    a = np.array([up[i] for i in common], dtype=float)    # (n, 2): numerator, denominator
    b = np.array([down[i] for i in common], dtype=float)

    def ratio(x, idx=None):
        num = x[:, 0].sum() if idx is None else x[idx, 0].sum(axis=-1)
        den = x[:, 1].sum() if idx is None else x[idx, 1].sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return num / den

    rng = np.random.default_rng(seed)
    delta = float(ratio(b) - ratio(a))
    boots = []
    for start in range(0, n_boot, 200):  # chunks keep memory flat for large n
        idx = rng.integers(0, len(common), size=(min(200, n_boot - start), len(common)))
        boots.append(ratio(b, idx) - ratio(a, idx))
    boots = np.concatenate(boots)
    boots = boots[np.isfinite(boots)]
    if boots.size == 0:
        return delta, None, None, len(common)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return delta, float(lo), float(hi), len(common)


def amplification(upstream: Mapping[str, Any], downstream: Mapping[str, Any], *,
                  per_image: Mapping[str, tuple[Mapping, Mapping]] | None = None,
                  n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> list[AmplificationRow]:
    """One row per metric of either side: upstream, downstream, delta and the delta's interval.

    ``upstream``/``downstream`` map metric names to ``MetricResult``-like objects (``value``,
    ``n``, ``ci_low``, ``ci_high``). ``per_image`` optionally maps a metric to the two sides'
    per-image (numerator, denominator) statistics, enabling the paired bootstrap.
    """
    rows = []
    names = list(upstream) + [m for m in downstream if m not in upstream]
    for metric in names:
        up, down = upstream.get(metric), downstream.get(metric)
        u = _num(_get(up, "value")) if up is not None else None
        d = _num(_get(down, "value")) if down is not None else None
        n_u = _get(up, "n") if up is not None else None
        n_d = _get(down, "n") if down is not None else None
        delta = d - u if None not in (u, d) else None
        lo = hi = None
        method = "none"
        paired = per_image.get(metric) if per_image else None
        if paired is not None and delta is not None:
            res = paired_bootstrap(paired[0], paired[1], n_boot=n_boot, level=level, seed=seed)
            if res is not None and res[1] is not None:
                delta, lo, hi, _ = res
                method = "paired-bootstrap"
        if method == "none" and delta is not None:
            lo, hi = mover_interval(up, down)
            method = "independent" if lo is not None else "none"
        rows.append(AmplificationRow(metric, u, d, delta, lo, hi, n_u, n_d, method))
    return rows


def stored_results(store, set_name: str) -> dict[str, Stat]:
    """The latest stored value of every metric of a set (group 'all'), as written by
    ``capaudit audit run``; amplification rows themselves are left out."""
    from capaudit.store.results import latest_metrics

    return {r[0]: Stat(*r[1:]) for r in latest_metrics(store, set_name)}


def _fmt(x, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def to_markdown(rows: list[AmplificationRow], upstream: str, downstream: str) -> str:
    """The Table 2 view as Markdown, for the compare report."""
    lines = [f"## Amplification: {downstream} (downstream) - {upstream} (upstream)", "",
             "| metric | upstream | downstream | delta | 95% CI | method |",
             "|---|---:|---:|---:|---|---|"]
    from capaudit.metrics.spec import arrow

    for r in rows:
        ci = f"[{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]" if r.ci_low is not None else "-"
        lines.append(f"| {r.metric}{arrow(r.metric)} | {_fmt(r.upstream)} | {_fmt(r.downstream)} | "
                     f"{_fmt(r.delta)} | {ci} | {r.method} |")
    return "\n".join(lines) + "\n"
