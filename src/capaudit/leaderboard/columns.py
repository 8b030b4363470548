"""Which columns the board averages: the catalogue's metrics, then the bias gaps.

A column is a metric (its criterion and better direction from the catalogue
and the metric's spec) or ``gap:METRIC:BY``, the metric's |a - b| between the
two groups of a grouping (lower is better). Metrics not computed for some set,
descriptive-only metrics and gaps that make no sense (size-dependent metrics,
a spec's ``not_by``, statistics that cannot be restricted to a group) drop
out, each with a note saying why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from capaudit.metrics.base import CRITERIA as CRITERIA_ORDER
from capaudit.metrics.estimate import SparseStats
from capaudit.metrics.spec import direction, metric_spec

if TYPE_CHECKING:
    from capaudit.leaderboard.profiles import Catalogue
    from capaudit.leaderboard.units import SetEval

__all__ = ["Column", "GROUPINGS", "OWN_GROUPING", "DROPPED", "NOTHING_RANKED", "board_columns",
           "left_out_reasons"]

#: the words of every note on a column left out of the N-avg, and of the note that nothing is
#: ranked: an unranked board (``--all-images``) leaves those notes out by them
DROPPED = "dropped from the average"
NOTHING_RANKED = "nothing ranked:"

GROUPINGS = {"gender": ("male", "female"), "skin_tone": ("light", "dark")}
OWN_GROUPING = {"gender_word_recall": "gender", "skin_tone_word_recall": "skin_tone"}


@dataclass
class Column:
    """One board column: a metric, or (``by`` set) its gap between the groups of ``by``."""

    name: str            # metric, or gap:METRIC:BY
    criterion: str
    higher_is_better: bool
    metric: str
    by: str | None = None
    averaged: bool = True   # False: no value for some set, shown but left out of the N-avg
    gap: str | None = None  # a gap's direction, named: "male − female"


def _board_metrics(sets: Sequence[SetEval], cat: Catalogue) -> list[tuple[str, str]]:
    """(metric, criterion) of every metric on the board: the catalogue's, then (with
    ``include_unlisted``) any other asked-for metric with a direction, by its spec."""
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
    spec = metric_spec(metric)
    return spec is None or not (spec.size_dependent or by in spec.not_by)


def board_columns(sets: Sequence[SetEval], cat: Catalogue, annotations,
                  notes: list[str]) -> list[Column]:
    """The board's columns: the catalogue's metrics, then the bias metrics and gaps; what
    drops out of the average is said in ``notes``."""
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
                notes.append(f"{m}: {DROPPED} ({why})")
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
        a, b = GROUPINGS[by]
        cols.append(Column(f"gap:{base}:{by}", "bias", False, base, by, gap=f"{a} − {b}"))
    for why, ms in dropped.items():
        notes.append(f"{DROPPED}: {', '.join(ms)} ({why})")
    return list({c.name: c for c in cols}.values())


def left_out_reasons(cat: Catalogue, columns: Sequence[Column], sets: Sequence[SetEval]
                     ) -> dict[str, str]:
    """``{criterion: why}`` for every criterion with no averaged column: its catalogue metrics
    and why each is missing ("alignment: clipscore, clipscore_long: not computed: no CLIP
    model ..."), so a profile that weights it says what its ranking leaves out."""
    averaged = {c.criterion for c in columns if c.averaged}
    out: dict[str, str] = {}
    for crit in CRITERIA_ORDER:
        if crit in averaged:
            continue
        why: dict[str, list[str]] = {}
        for m in cat.criteria.get(crit, []):
            if m in cat.judge_slots:
                reason = "judge metric, not yet on the board"
            else:
                reason = next((s.skipped[m] for s in sets if m in s.skipped),
                              "no value for every set" if any(c.metric == m for c in columns)
                              else "not asked for")
            why.setdefault(reason, []).append(m)
        out[crit] = "; ".join(f"{', '.join(ms)}: {r}" for r, ms in why.items()) or \
            "no metric listed for it"
    return out
