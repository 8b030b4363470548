"""N-avg leaderboard over caption sets, with a bootstrap of the whole ranking.

LOTUS ranks captioners by a *normalised average*: each metric min-max
normalised across the compared sets (1 = best set, 0 = worst; lower-is-better
metrics inverted), averaged within each criterion, then the criteria averaged
with a profile's weights. Here every step also runs on bootstrap resamples:

* **Joint resampling.** The sets describe the same images, so one resample of
  images (the union of the sets' images) is applied to every set at once: each
  set's per-image statistics (:class:`~capaudit.metrics.estimate.Estimate`)
  are lifted onto the union's units and all go through one
  :func:`~capaudit.audit.bootstrap.bootstrap_values` call. The whole N-avg and
  ranking is recomputed on each resample: a set's rank interval (2.5-97.5%),
  its share of first places, and for each pair adjacent in the ranking how often
  their order flips. A flip rate above 5% is reported as a warning.
* **Bias gaps.** For every metric, the value on images of men and of women (of
  light and dark skin) comes from the same statistics restricted to that group's
  images; the gap column is |a - b| (lower is better). ``gender_word_recall``
  and ``skin_tone_word_recall`` give LOTUS's |Rec_F - Rec_M| and |Rec_dark -
  Rec_light|. ``vocab`` (size-dependent) and ``recall_disparity`` (already a
  gap) have no gap column.
* **Missing metrics** (not computed for some set: no CLIP model, a judge metric
  not run) drop out of the average for every set, with a note naming why.
  Equal values across sets normalise to 0.5.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from capaudit.audit.bootstrap import bootstrap_values, interval
from capaudit.audit.engine import point_value
from capaudit.metrics.estimate import Estimate, SparseStats
from capaudit.metrics.base import CRITERIA as CRITERIA_ORDER
from capaudit.leaderboard.profiles import Catalogue

__all__ = ["SetEval", "Leaderboard", "build_leaderboard", "n_avg", "GROUPINGS"]

GROUPINGS = {"gender": ("male", "female"), "skin_tone": ("light", "dark")}
OWN_GROUPING = {"gender_word_recall": "gender", "skin_tone_word_recall": "skin_tone"}
FLIP_WARN = 0.05


@dataclass
class SetEval:
    """One set's metric estimates over its own units (``images[k]`` = image id of unit k)."""

    name: str
    estimates: dict[str, Estimate]
    skipped: dict[str, str]
    images: np.ndarray
    n_units: int
    worst: list[dict] = field(default_factory=list)


@dataclass
class Column:
    name: str            # metric, or gap:METRIC:BY
    criterion: str
    higher_is_better: bool
    metric: str
    by: str | None = None


@dataclass
class Leaderboard:
    sets: list[str]
    columns: list[Column]
    values: np.ndarray                      # [sets, columns] point values
    ci: np.ndarray                          # [sets, columns, 2]
    groups: dict[str, dict[str, dict[str, Any]]]   # set -> column -> {group: value, n...}
    profiles: dict[str, dict[str, Any]]     # profile -> scores, ranks, intervals, flips
    notes: list[str]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cols = [c.__dict__ for c in self.columns]
        return {"sets": self.sets, "columns": cols,
                "values": _nan_none(self.values), "ci": _nan_none(self.ci),
                "groups": self.groups, "profiles": self.profiles, "notes": self.notes,
                "meta": self.meta}


def _nan_none(a: np.ndarray):
    return [(_nan_none(x) if isinstance(x, np.ndarray) else
             (None if x is None or np.isnan(x) else float(x))) for x in a]


def normalise(values: np.ndarray, higher: np.ndarray) -> np.ndarray:
    """Min-max across sets (axis -2 of [..., sets, columns]); lower-is-better inverted."""
    lo = np.nanmin(values, axis=-2, keepdims=True)
    hi = np.nanmax(values, axis=-2, keepdims=True)
    span = hi - lo
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(span > 0, (values - lo) / np.where(span > 0, span, 1), 0.5)
    return np.where(higher, z, 1 - z)


def n_avg(values: np.ndarray, columns: Sequence[Column], weights: Mapping[str, float]
          ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(profile score [..., sets], {criterion: score [..., sets]}) from values [..., sets, cols]."""
    higher = np.array([c.higher_is_better for c in columns])
    z = normalise(values, higher)
    crit: dict[str, np.ndarray] = {}
    for name in CRITERIA_ORDER:
        idx = [i for i, c in enumerate(columns) if c.criterion == name]
        if idx:
            crit[name] = z[..., idx].mean(axis=-1)
    used = {c: w for c, w in weights.items() if c in crit and w > 0}
    total = sum(used.values())
    score = sum(w * crit[c] for c, w in used.items()) / total if total else \
        np.full(values.shape[:-1], np.nan)
    return score, crit


def _ranks(score: np.ndarray) -> np.ndarray:
    """1 = best, along the last axis (ties broken by set order)."""
    order = np.argsort(-score, axis=-1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, score.shape[-1] + 1), axis=-1)
    return ranks


class _Union:
    """Units of the union of the sets' images (+ each set's image-less captions)."""

    def __init__(self, sets: Sequence[SetEval]):
        imgs = np.unique(np.concatenate([s.images for s in sets])) if sets else np.zeros(0, int)
        self.images = imgs
        self.cols: dict[str, np.ndarray] = {}
        extra = len(imgs)
        for s in sets:
            c = np.empty(s.n_units, np.int64)
            c[:len(s.images)] = np.searchsorted(imgs, s.images)
            k = s.n_units - len(s.images)
            c[len(s.images):] = extra + np.arange(k)
            extra += k
            self.cols[s.name] = c
        self.n = extra

    def lift(self, s: SetEval, est: Estimate, mask: np.ndarray | None = None) -> Estimate | None:
        """``est`` over the union's units (restricted to ``mask`` units); None if impossible."""
        cols = self.cols[s.name]
        if est.spread is not None:  # a sketch's error band: no per-unit statistics to restrict
            return None if mask is not None else Estimate(
                np.zeros((self.n, 0)), est.finalize, est.n, value=point_value(est),
                spread=est.spread)
        if est.boot is not None or isinstance(est.stats, SparseStats):
            if mask is not None:
                return None
            if est.boot is not None:
                boot = est.boot
                return Estimate(np.zeros((self.n, 0)), est.finalize, est.n,
                                boot=lambda c, cols=cols, boot=boot: boot(c[:, cols]),
                                value=point_value(est), recentre=est.recentre)
            st, fin = est.stats, est.finalize
            return Estimate(np.zeros((self.n, 0)), fin, est.n,
                            boot=lambda c, cols=cols: fin(st.resampled_sums(c[:, cols])),
                            value=point_value(est), recentre=est.recentre)
        stats = np.zeros((self.n, est.stats.shape[1]))
        stats[cols] = est.stats
        if mask is not None:
            stats *= mask[:, None]
        return Estimate(stats, est.finalize, est.n, recentre=est.recentre)

    def group_mask(self, labels: Mapping[int, str], group: str) -> np.ndarray:
        m = np.zeros(self.n, bool)
        m[:len(self.images)] = [labels.get(int(i)) == group for i in self.images]
        return m


def _board_metrics(sets: Sequence[SetEval], cat: Catalogue) -> list[tuple[str, str]]:
    """(metric, criterion) of every metric on the board: the catalogue's, then (with
    ``include_unlisted``) any other asked-for metric with a direction, by its spec."""
    from capaudit.metrics.spec import direction, metric_spec

    listed = [(m, c) for c in CRITERIA_ORDER for m in cat.criteria.get(c, [])
              if not (m.startswith("gap:") or m == "gaps")]
    names = {m for m, _ in listed}
    if cat.include_unlisted:
        asked = dict.fromkeys(m for s in sets for m in [*s.estimates, *s.skipped])
        listed += [(m, metric_spec(m).criterion) for m in asked
                   if m not in names and metric_spec(m) is not None and direction(m) != 0
                   and metric_spec(m).criterion != "bias"]
    return listed


def _gap_ok(metric: str, by: str) -> bool:
    """A gap makes sense: not size-dependent (vocab), not meaningless for ``by`` (spec)."""
    from capaudit.metrics.spec import metric_spec

    spec = metric_spec(metric)
    return spec is None or not (spec.size_dependent or by in spec.not_by)


def _columns(sets: Sequence[SetEval], cat: Catalogue, annotations, notes: list[str]) -> list[Column]:
    from capaudit.metrics.spec import direction, metric_spec

    computed = {m for s in sets for m in s.estimates}
    cols: list[Column] = []
    dropped: dict[str, list[str]] = {}   # reason -> metrics (one note per reason)
    for m, crit in _board_metrics(sets, cat):
        missing = [s.name for s in sets if m not in s.estimates]
        if m in cat.judge_slots and m not in computed:
            dropped.setdefault("judge metrics: computed by the judged commands, not yet on the "
                               "board", []).append(m)
            continue
        if missing:
            why = next((s.skipped[m] for s in sets if m in s.skipped), "not asked for")
            where = "" if len(missing) == len(sets) else f" for {', '.join(missing)}"
            dropped.setdefault(f"not computed{where}: {why}", []).append(m)
            continue
        if metric_spec(m) is not None and direction(m) == 0:
            notes.append(f"{m}: descriptive only (no better direction): shown, not averaged")
            continue
        cols.append(Column(m, crit, direction(m) >= 0, m))
    bias = cat.criteria.get("bias", [])
    gap_metrics: list[tuple[str, str]] = []
    if "gaps" in bias:
        gap_metrics += [(c.metric, by) for c in cols for by in GROUPINGS if _gap_ok(c.metric, by)]
    for m in bias:
        if m.startswith("gap:"):
            base = m[4:]
            bys = [OWN_GROUPING[base]] if base in OWN_GROUPING else list(GROUPINGS)
            if all(base in s.estimates for s in sets):
                gap_metrics += [(base, by) for by in bys]
            else:
                why = next((s.skipped[base] for s in sets if base in s.skipped), "not asked for")
                notes.append(f"{m}: dropped from the average ({why})")
        elif m != "gaps" and all(m in s.estimates for s in sets):
            cols.append(Column(m, "bias", direction(m) >= 0, m))
    if cat.include_unlisted:  # bias metrics of the specs (gender error, recall disparity)
        for m in dict.fromkeys(m for s in sets for m in s.estimates):
            spec = metric_spec(m)
            if (spec is not None and spec.criterion == "bias" and direction(m) != 0
                    and m not in bias and all(m in s.estimates for s in sets)):
                cols.append(Column(m, "bias", direction(m) >= 0, m))
    for base, by in dict.fromkeys(gap_metrics):
        if not getattr(annotations, by, None):
            notes.append(f"gaps by {by}: no {by} labels (give --demographics)")
            continue
        if any(s.estimates[base].boot is not None or s.estimates[base].spread is not None
               or isinstance(s.estimates[base].stats, SparseStats) for s in sets):
            continue
        cols.append(Column(f"gap:{base}:{by}", "bias", False, base, by))
    for why, ms in dropped.items():
        notes.append(f"dropped from the average: {', '.join(ms)} ({why})")
    return list({c.name: c for c in cols}.values())


def build_leaderboard(sets: Sequence[SetEval], cat: Catalogue, annotations,
                      n_boot: int = 1000, seed: int = 0, workers: int = 1,
                      profiles: Sequence[str] | None = None,
                      intersections: bool = False) -> Leaderboard:
    """Values, gaps, criterion scores and profile rankings with their bootstrap.
    ``intersections``: also each metric on every gender x skin-tone cell, with its images."""
    notes: list[str] = []
    columns = _columns(sets, cat, annotations, notes)
    union = _Union(sets)
    ests: dict[tuple, Estimate] = {}
    group_ns: dict[tuple, int] = {}
    masks = {(by, g): union.group_mask(getattr(annotations, by), g)
             for by, gs in GROUPINGS.items() if getattr(annotations, by, None) for g in gs}
    for s in sets:
        for c in columns:
            est = s.estimates[c.metric]
            if c.by is None:
                ests[(s.name, c.name, None)] = union.lift(s, est)
            else:
                for g in GROUPINGS[c.by]:
                    lifted = union.lift(s, est, masks[(c.by, g)])
                    ests[(s.name, c.name, g)] = lifted
                    group_ns[(s.name, c.name, g)] = int((lifted.stats[:, -1] > 0).sum())  # images
    keyed = {"\t".join(map(str, k)): e for k, e in ests.items()}
    boots = bootstrap_values(keyed, union.n, n_boot, seed, workers) if n_boot > 0 else {}
    S, C = len(sets), len(columns)
    values = np.full((S, C), np.nan)
    reps = np.full((max(n_boot, 0), S, C), np.nan)
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    for i, s in enumerate(sets):
        for j, c in enumerate(columns):
            if c.by is None:
                e = ests[(s.name, c.name, None)]
                values[i, j] = _point(e)
                if boots:
                    reps[:, i, j] = boots["\t".join((s.name, c.name, "None"))]
                continue
            a, b = GROUPINGS[c.by]
            pa_, pb = _point(ests[(s.name, c.name, a)]), _point(ests[(s.name, c.name, b)])
            values[i, j] = abs(pa_ - pb)
            info = {a: pa_, b: pb, f"n_{a}": group_ns[(s.name, c.name, a)],
                    f"n_{b}": group_ns[(s.name, c.name, b)], "signed_gap": pa_ - pb}
            if boots:
                ra = boots["\t".join((s.name, c.name, a))]
                rb = boots["\t".join((s.name, c.name, b))]
                reps[:, i, j] = np.abs(ra - rb)
                info["signed_ci"] = list(interval(ra - rb, pa_ - pb))
            groups.setdefault(s.name, {})[c.name] = info
    ci = np.full((S, C, 2), np.nan)
    if boots:
        for i in range(S):
            for j in range(C):
                e = ests.get((sets[i].name, columns[j].name, None))
                lo, hi = interval(reps[:, i, j], values[i, j], bool(e is not None and e.recentre))
                ci[i, j] = [np.nan if lo is None else lo, np.nan if hi is None else hi]
    if intersections:
        for s in sets:
            groups.setdefault(s.name, {})["intersections"] = _cells(s, columns, union, annotations)
    prof_out = {p: _rank_profile(values, reps if boots else None, columns,
                                 cat.weights(p), [s.name for s in sets])
                for p in (profiles or cat.profiles)}
    for p, r in prof_out.items():
        for f in r.get("flips", []):
            if f["share"] > FLIP_WARN:
                notes.append(f"profile {p}: {f['above']} above {f['below']} flips in "
                             f"{100 * f['share']:.0f}% of resamples (the order is not settled)")
    return Leaderboard([s.name for s in sets], columns, values, ci, groups, prof_out,
                       list(dict.fromkeys(notes)),
                       {"n_boot": n_boot, "seed": seed, "union_images": int(len(union.images)),
                        "catalogue": cat.source, "criteria_order": list(CRITERIA_ORDER)})


def _cells(s: SetEval, columns: Sequence[Column], union: _Union, annotations) -> dict:
    """``{metric: {"female, dark": {"value", "images"}, ...}}``: point values on each cell of
    gender x skin tone, with the number of images, so a small cell is not over-read."""
    if not (annotations.gender and annotations.skin_tone):
        return {}
    out: dict[str, dict] = {}
    for c in columns:
        est = s.estimates[c.metric]
        if c.by is not None or est.boot is not None or est.spread is not None or \
                isinstance(est.stats, SparseStats):
            continue
        cells = {}
        for g in GROUPINGS["gender"]:
            for t in GROUPINGS["skin_tone"]:
                mask = union.group_mask(annotations.gender, g) & \
                    union.group_mask(annotations.skin_tone, t)
                e = union.lift(s, s.estimates[c.metric], mask)
                v = _point(e)
                cells[f"{g}, {t}"] = {"value": None if np.isnan(v) else v,
                                      "images": int((e.stats[:, -1] > 0).sum())}
        out[c.metric] = cells
    return out


def _point(e: Estimate) -> float:
    v = point_value(e)
    return np.nan if v is None else v


def _rank_profile(values, reps, columns, weights, names) -> dict[str, Any]:
    score, crit = n_avg(values, columns, weights)
    ranks = _ranks(score)
    out: dict[str, Any] = {"weights": dict(weights), "score": score.tolist(),
                           "rank": ranks.tolist(),
                           "criteria": {k: v.tolist() for k, v in crit.items()}}
    if reps is None or not len(reps):
        return out
    rs, _ = n_avg(reps, columns, weights)
    rr = _ranks(rs)
    out["rank_interval"] = [[int(np.quantile(rr[:, i], 0.025, method="lower")),
                             int(np.quantile(rr[:, i], 0.975, method="higher"))]
                            for i in range(len(names))]
    out["first_share"] = [float((rr[:, i] == 1).mean()) for i in range(len(names))]
    order = np.argsort(ranks)
    out["flips"] = [{"above": names[a], "below": names[b],
                     "share": float((rs[:, b] > rs[:, a]).mean())}
                    for a, b in zip(order[:-1], order[1:])]
    out["stable"] = all(f["share"] <= FLIP_WARN for f in out["flips"])
    return out
