"""``audit leaderboard``: evaluate every set on every metric, rank them, store the rows.

Each set is read once, its per-caption records built once, and every metric
(GCE and LOTUS) computed from the same context with the LOTUS inputs attached
(:mod:`capaudit.metrics.features.inputs`); spaCy parses and CLIP image embeddings come from
the store's caches when present and are written there before the result
transaction (a cache row is valid on its own). Then :mod:`.leaderboard` ranks the
sets and all rows go to ``metrics`` in one transaction with the run row:
``grp`` = ``all`` for each metric, ``gender:male-female`` / ``skin_tone:light-dark``
for the gap columns (signed value), and ``leaderboard:PROFILE`` for the N-avg
scores (metric ``n_avg``) and the criterion scores (metric ``criterion:NAME``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from capaudit.audit.config import AuditConfig
from capaudit.errors import InputError

__all__ = ["DEFAULTS", "run_leaderboard", "evaluate_set", "worst_captions"]

DEFAULTS: dict[str, Any] = AuditConfig.defaults()  # the audit settings: one set for both
# sets of two datasets: never ranked together; --all-images shows each on its own images
LEADERBOARD_APART = ("rank sets of one dataset; --all-images shows each set on its own images, "
                     "unranked")
NOT_RANKED = "not ranked: different images"   # what every view of an --all-images board says


def all_metrics() -> list[str]:
    """Every metric the caption audit computes (GCE and LOTUS), in registration order."""
    from capaudit.metrics import METRICS

    return [m.name for m in METRICS.available() if m.streams]


def evaluate_set(store, spec, annotations, cfg: AuditConfig | Mapping,
                 metrics: Sequence[str], say: Callable[[str], None] | None = None):
    """One set (a name, a file, or a target the coverage guard already resolved) through the
    engine's accumulators (:class:`StreamStats`), read and analysed in chunks (memory
    bounded by the images and the metrics' states, not the captions)."""
    from itertools import islice

    from capaudit.audit.engine import image_id_array
    from capaudit.metrics.base import MetricContext
    from capaudit.metrics.stream import StreamStats
    from capaudit.audit.runner import STREAM_CHUNK, resolve_target
    from capaudit.leaderboard.board import SetEval
    from capaudit.text.records import build_records

    cfg = AuditConfig.of(cfg)
    t = resolve_target(store, spec) if isinstance(spec, str) else spec
    acc = StreamStats(list(metrics), cfg["mode"], annotations, cfg["min_images"], cfg)
    worst: list[dict] = []
    step, k = int(cfg.get("chunk_size") or STREAM_CHUNK), int(cfg.get("worst", 20))
    rows, done = t.rows(), 0
    while chunk := list(islice(rows, step)):
        ids = image_id_array([i for i, _ in chunk])
        caps = [c for _, c in chunk]
        records = build_records(caps, mode=cfg["mode"], workers=cfg["workers"])
        ctx = MetricContext(records, ids, annotations, cfg["min_images"], offset=done,
                            captions=caps, config=cfg)
        acc.add(ctx)
        worst = _keep_worst(worst + worst_captions(ctx, caps, k, done), k)
        done += len(chunk)
        if say:
            say(f"{t.name}: {done:,} captions evaluated")
    if done == 0:
        raise InputError(f"'{spec}' holds no captions", fix="give a set with captions")
    ests, skipped, units = acc.estimates()
    return SetEval(t.name, ests, skipped, units.keys[units.keys >= 0], units.n, worst)


def _keep_worst(rows: list[dict], k: int) -> list[dict]:
    out = []
    for kind in ("chair", "nsfw"):
        out += sorted((r for r in rows if r["kind"] == kind), key=lambda r: -r["count"])[:k]
    return out


def worst_captions(ctx, captions: Sequence[str], k: int = 20, offset: int = 0) -> list[dict]:
    """The captions with the most hallucinated CHAIR objects, and every NSFW hit."""
    from capaudit.metrics.base import MetricSkipped

    out: list[dict] = []
    try:
        h = ctx.hallucinated
        cap = ctx.mention_caption[h]
        cats = ctx.records.m_cat[h]
        n_h = np.bincount(cap, minlength=len(captions))
        for i in np.argsort(-n_h, kind="stable")[:k]:
            if n_h[i] == 0:
                break
            words = sorted({ctx.categories[c] for c in cats[cap == i]})
            out.append({"kind": "chair", "row": offset + int(i), "image_id": _iid(ctx, i),
                        "caption": captions[i], "count": int(n_h[i]), "words": words})
    except MetricSkipped:
        pass
    from capaudit.metrics.features.inputs import lotus_of

    for i, hs in enumerate(lotus_of(ctx).nsfw):
        if hs and sum(1 for o in out if o["kind"] == "nsfw") < k:
            out.append({"kind": "nsfw", "row": offset + i, "image_id": _iid(ctx, i), "caption": captions[i],
                        "count": len(hs), "words": sorted(set(hs))})
    return out


def _iid(ctx, i: int):
    v = int(ctx.caption_image[i])
    return None if v < 0 else v


def run_leaderboard(store, targets: Sequence[str], cfg: AuditConfig | Mapping,
                    say: Callable[[str], None] | None = None,
                    all_images: bool = False) -> dict[str, Any]:
    """Evaluate, rank and store; returns ``{"leaderboard", "sets", "_run_id"}``. ``say``
    hears what the run is doing (a line per stage and per chunk of each set).
    ``all_images``: each set's values on its own images, nothing ranked (sets of different
    datasets are then shown side by side, never refused)."""
    say = say or (lambda _text: None)
    from capaudit.audit.runner import metric_names
    from capaudit.core.config import current_command, package_versions
    from capaudit.io.annotation_store import resolve_annotations
    from capaudit.metrics.features.inputs import prepare
    from capaudit.leaderboard.board import build_leaderboard
    from capaudit.leaderboard.profiles import load_catalogue

    cfg = AuditConfig.of(cfg)
    if len(targets) < 2:
        raise InputError("a leaderboard needs at least two sets", fix="name two or more sets")
    if len(set(targets)) != len(targets):
        raise InputError(f"a set is named twice: {list(targets)}", fix="name each set once")
    cat = load_catalogue(cfg.get("profiles_file"))
    profiles = [cfg["profile"]] if cfg.get("profile") else None
    for p in profiles or []:
        cat.weights(p)  # unknown profile: one line before any work
    metrics = metric_names(cfg) or all_metrics()
    from capaudit.metrics.stream import check_streams

    check_streams(metrics)
    annotations = resolve_annotations(store, cfg.get("instances"), cfg.get("chair_gt"),
                                      cfg.get("demographics"))
    say("reading the reference set and the lexicons")
    prepare(store, cfg)  # reference set read once, CLIP model checked: bad ones fail here
    resolved, partial, unranked = guard_coverage(store, targets, annotations, cfg, metrics,
                                                 all_images)
    evals = []
    for k, t in enumerate(resolved, 1):
        say(f"set {k} of {len(resolved)}: {t.name}")
        evals.append(evaluate_set(store, t, annotations, cfg, metrics, say))
    say(f"ranking: {cfg['n_boot']:,} resamples of the union of the sets' images")
    lb = build_leaderboard(evals, cat, annotations, cfg["n_boot"], cfg["seed"], cfg["workers"],
                           profiles, bool(cfg.get("intersections")), cfg.get("min_n"), partial,
                           circular_notes(store, resolved, annotations, cfg, metrics), unranked)
    out: dict[str, Any] = {"leaderboard": lb, "sets": evals, "annotations": annotations.sources}
    if store is not None:
        with store.transaction():
            run_id = store.start_run(current_command(), {**cfg, "metrics": metrics,
                                     "_lotus": None,
                                     "annotation_sources": annotations.sources},
                                     cfg["seed"], package_versions())
            store_leaderboard(store, run_id, lb, evals)
            store.finish_run(run_id, "ok")
        out["_run_id"] = run_id
    return out


def circular_notes(store, resolved, annotations, cfg, metrics) -> dict[str, dict[str, str]]:
    """``{set: {metric: note}}`` of the values scored with the evidence a filter of the set's
    lineage used, the independent score in the note (as the audit marks them)."""
    from capaudit.audit.runner import mark_circular_values
    from capaudit.metrics import MetricResult

    out = {}
    for t in resolved:
        stubs = {m: MetricResult(None, 0) for m in metrics}
        mark_circular_values(store, t, stubs, annotations, cfg)
        marked = {m: "; ".join(r.notes) for m, r in stubs.items() if r.status == "circular"}
        if marked:
            out[t.name] = marked
    return out


def guard_coverage(store, targets: Sequence[str], annotations, cfg: Mapping,
                   metrics: Sequence[str], all_images: bool = False
                   ) -> tuple[list, dict, str | None]:
    """The audit's coverage guard (:mod:`capaudit.audit.annotation_coverage`) on every set,
    before any metric: a set whose ids the annotations barely cover stops with one line
    (``--allow-partial`` scores its covered images, each such value marked partial); ids
    that may not join are hidden. Sets whose ids are not shown to name the same images (two
    datasets) stop first, as ``audit compare`` stops them (:mod:`capaudit.audit.id_join`):
    a ranking of them would rank images, not captioners; ``all_images`` shows them, each on
    its own images, and ranks nothing. Returns the resolved targets, the partial notes and
    why nothing is ranked (None: ranked)."""
    from capaudit.audit import annotation_coverage as coverage
    from capaudit.audit.id_join import check_datasets, unranked_reason
    from capaudit.audit.runner import resolve_target
    from capaudit.leaderboard.status import partial_notes

    resolved = [resolve_target(store, spec) for spec in targets]
    datasets = check_datasets(store, resolved, all_images, float(cfg["min_coverage"]),
                              LEADERBOARD_APART, annotations=annotations)
    why = unranked_reason(datasets) or ("--all-images: each set on its own images, which "
                                        "need not be the others'")
    unranked = f"{NOT_RANKED} ({why})" if all_images else None
    covs = {t.name: coverage.guard_target(store, t, annotations, list(metrics), cfg)
            for t in resolved}
    return resolved, partial_notes(covs, metrics, bool(cfg.get("allow_partial"))), unranked


def store_leaderboard(store, run_id: int, lb, evals) -> None:
    """Metric, gap and score rows (caller holds the transaction)."""
    from capaudit.audit.bootstrap import bootstrap_intervals
    from capaudit.audit.engine import point_value
    from capaudit.leaderboard.board import GROUPINGS

    for i, s in enumerate(evals):
        col = {c.name: k for k, c in enumerate(lb.columns)}
        off_board = {m: e for m, e in s.estimates.items() if m not in col}
        own = bootstrap_intervals(off_board, s.n_units, lb.meta["n_boot"], lb.meta["seed"])
        for name, est in s.estimates.items():
            j = col.get(name)
            lo, hi = lb.ci[i, j] if j is not None else own[name]
            extra = dict(est.extra)
            if j is not None:  # what travels with the value, as the audit stores it
                extra.update(n_images=int(lb.n[i, j]), status=lb.status[i][j],
                             notes=[t for t in [lb.status_notes[i][j]] if t])
            store.write_metric(run_id, s.name, name, point_value(est), est.n, _f(lo), _f(hi),
                               "all", extra)
        for name, why in s.skipped.items():
            store.write_metric(run_id, s.name, name, None, 0, None, None, "all", {"skipped": why})
        for c_name, info in lb.groups.get(s.name, {}).items():
            if c_name == "intersections":
                for metric, cells in info.items():
                    for cell, v in cells.items():
                        lo, hi = v.get("ci") or (None, None)
                        store.write_metric(run_id, s.name, metric, v["value"], v["images"],
                                           lo, hi, "gender,skin_tone=" + cell.replace(" ", ""),
                                           {"images": v["images"], "status": v.get("status"),
                                            "notes": [t for t in [v.get("note")] if t]})
                continue
            c = next(c for c in lb.columns if c.name == c_name)
            a, b = GROUPINGS[c.by]
            lo, hi = info.get("signed_ci", (None, None))
            store.write_metric(run_id, s.name, c.metric, info["signed_gap"],
                               info[f"n_{a}"] + info[f"n_{b}"], lo, hi, f"{c.by}:{a}-{b}", info)
        for p, r in lb.profiles.items():
            store.write_metric(run_id, s.name, "n_avg", r["score"][i], None, None, None,
                               f"leaderboard:{p}",
                               {"rank": r["rank"][i],
                                "tied_rank": (r.get("tied_rank") or [None] * len(evals))[i],
                                "left_out": r.get("left_out") or {},
                                "rank_interval": (r.get("rank_interval") or [None] * len(evals))[i],
                                "first_share": (r.get("first_share") or [None] * len(evals))[i]})
            for crit, vals in r["criteria"].items():
                store.write_metric(run_id, s.name, f"criterion:{crit}", vals[i], None, None, None,
                                   f"leaderboard:{p}", {})


def _f(x):
    return None if x is None or np.isnan(x) else float(x)
