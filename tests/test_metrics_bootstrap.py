"""The vectorised bootstrap equals an explicit resample-the-images loop."""

from __future__ import annotations

import numpy as np

from capaudit.audit.bootstrap import bootstrap_intervals, resample_counts
from capaudit.metrics.base import Estimate, SparseStats, ratio


def test_ratio_of_sums_matches_explicit_resampling():
    rng = np.random.default_rng(0)
    n_img = 300
    num = rng.integers(0, 5, n_img).astype(float)
    den = num + rng.integers(1, 5, n_img)
    est = {"m": Estimate(np.stack([num, den], 1), ratio(), n_img)}
    lo, hi = bootstrap_intervals(est, n_img, n_boot=400, seed=7)["m"]
    # the same resamples, drawn explicitly as image ids
    seeds = np.random.SeedSequence(7).spawn(1)
    counts = resample_counts(n_img, 400, seeds[0])
    vals = 100 * (counts @ num) / (counts @ den)
    assert (lo, hi) == tuple(np.quantile(vals, [0.025, 0.975]))
    point = 100 * num.sum() / den.sum()
    assert lo < point < hi


def test_sparse_stats_equal_dense():
    rng = np.random.default_rng(1)
    dense = np.where(rng.random((200, 12)) < 0.1, rng.random((200, 12)), 0.0)
    u, c = np.nonzero(dense)
    sp = SparseStats(u, c, dense[u, c], dense.shape)
    counts = resample_counts(200, 30, 0)
    assert np.allclose(sp.resampled_sums(counts), counts @ dense)
    assert np.allclose(sp.sum(axis=0), dense.sum(axis=0))


def test_blocks_do_not_change_the_result(monkeypatch):
    import capaudit.audit.bootstrap as bs
    est = {"m": Estimate(np.ones((50, 2)) * [1, 2], ratio(), 50)}
    a = bs.bootstrap_intervals(est, 50, 100, seed=1)
    monkeypatch.setattr(bs, "BLOCK_ELEMS", 50 * 7)
    b = bs.bootstrap_intervals(est, 50, 100, seed=1)
    assert a["m"] == pytest_approx(b["m"])


def test_sketched_vocabulary_keeps_its_error_band_when_blocks_hold_one_replicate(monkeypatch):
    """Past 2M units a bootstrap block holds one replicate; the HLL vocabulary's interval (the
    sketch's 95% error band) must not depend on that: it collapsed to [v, v] before."""
    import capaudit.audit.bootstrap as bs
    import capaudit.metrics.diversity as div
    from capaudit.audit.engine import audit_captions

    caps = [f"a dog number{i} runs past cat{i % 37}" for i in range(600)]
    monkeypatch.setattr(div, "VOCAB_EXACT_MAX", 10)
    wide = audit_captions(list(range(600)), caps, None, metrics=["vocab"], n_boot=200, workers=1)
    monkeypatch.setattr(bs, "BLOCK_ELEMS", 600 * 1)  # one replicate per block
    one = audit_captions(list(range(600)), caps, None, metrics=["vocab"], n_boot=200, workers=1)
    v, w = one.results["vocab"], wide.results["vocab"]
    assert v.extra["distinct"] == "hll"
    band = 2 * 1.96 * div.HLL_REL_ERROR * v.value  # the normal 95% band; quantile grid: within 2%
    assert abs((v.ci_high - v.ci_low) / band - 1) < 0.02
    assert (v.ci_low, v.ci_high) == (w.ci_low, w.ci_high)


def pytest_approx(x):
    import pytest
    return pytest.approx(x)


# --------------------------------------------------------------------------
# Independent reference: a plain resample-the-images loop on real captions.
#
# The engine's bootstrap works on per-image sufficient statistics, draw-count
# matrices, BLAS/sparse products and threads. The reference below does none of
# that: for every resample it draws image ids (same scheme: blocks of
# ``block_sizes`` resamples, one generator per block spawned from the seed, one
# ``integers(0, n_units, n_units)`` call per resample), expands them to the
# captions of the drawn images and recomputes every metric from its definition
# on that caption list. Same seed -> same intervals.
# --------------------------------------------------------------------------

import json
import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
COCO = SHARED / "data" / "coco2014"
DEMO = Path(__file__).resolve().parents[1] / "src" / "capaudit" / "data" / "demo"
needs_shared = pytest.mark.skipif(not COCO.is_dir(), reason=f"shared data not found at {COCO}")


def _annotations(inst, gt, demo):
    from capaudit.io.annotation_files import Annotations, load_chair_gt, load_demographics, load_instances
    gender, _ = load_demographics(demo)
    return Annotations(instances=load_instances(inst)[0], chair_gt=load_chair_gt(gt), gender=gender)


def _coco_sample(n_images: int):
    data = json.loads((COCO / "captions_val2014_subset.json").read_text("utf-8"))
    keep = sorted({a["image_id"] for a in data["annotations"]})[:n_images]
    keep = set(keep)
    rows = [(a["image_id"], a["caption"]) for a in data["annotations"] if a["image_id"] in keep]
    return [r[0] for r in rows], [r[1] for r in rows]


def _loop_bootstrap(ids, caps, ann, n_boot, seed, min_images):
    """Every default metric on explicit caption-level resamples; {name: (lo, hi)}."""
    from capaudit.audit.bootstrap import block_seeds, block_sizes
    from capaudit.metrics.base import MetricContext
    from capaudit.text.records import build_records
    from capaudit.text.tokenize import tokenize_caption

    rec = build_records(caps, workers=1)
    ctx = MetricContext(rec, np.asarray(ids, np.int64), ann, min_images)
    n = len(caps)
    # caption-level quantities, straight from the definitions
    n_tok = rec.n_tokens.astype(float)
    tokens = [set(tokenize_caption(c)[1]) for c in caps]
    inst, _ = ctx.instances
    gt, _ = ctx.chair_gt
    m_cap = rec.mention_caption()
    hall = ~gt[ctx.unit[m_cap], rec.m_cat]
    n_ment = np.bincount(m_cap, minlength=n).astype(float)
    n_hall = np.bincount(m_cap[hall], minlength=n).astype(float)
    mentioned = np.zeros((n, ctx.n_cat), bool)
    mentioned[m_cap, rec.m_cat] = True
    cap_inst = inst[ctx.unit]                       # [captions, categories]
    n_inst = cap_inst.sum(1)
    recall_c = np.where(n_inst > 0, (mentioned & cap_inst).sum(1) / np.maximum(n_inst, 1), np.nan)
    label = ctx.image_gender[ctx.unit]
    pred = rec.gender
    err = (label > 0) & (pred > 0) & (pred != label)
    # recall disparity: categories fixed on the full sample
    n_img = np.stack([inst[ctx.image_gender == 1].sum(0), inst[ctx.image_gender == 2].sum(0)])
    keep = np.flatnonzero((n_img >= min_images).all(axis=0))

    def disparity(sel):
        diffs = []
        for j in keep:
            r = []
            for g in (1, 2):
                s = sel[(label[sel] == g) & cap_inst[sel, j]]
                r.append(mentioned[s, j].mean() if len(s) else np.nan)
            if not np.isnan(r).any():
                diffs.append(abs(r[0] - r[1]))
        return 100 * np.mean(diffs) if diffs else np.nan

    def metrics(sel):
        r = recall_c[sel]
        lab = sel[label[sel] > 0]
        return {"vocab": len(set().union(*(tokens[i] for i in sel))),
                "length": n_tok[sel].mean(),
                "recall": 100 * np.nanmean(r),
                "gender_error": 100 * err[lab].mean(),
                "recall_disparity": disparity(sel),
                "chair_s": 100 * (n_hall[sel] > 0).mean(),
                "chair_i": 100 * n_hall[sel].sum() / n_ment[sel].sum()}

    caps_of = [np.flatnonzero(ctx.unit == u) for u in range(ctx.n_units)]
    values = {k: [] for k in metrics(np.arange(n))}
    sizes = block_sizes(ctx.n_units, n_boot)
    for b, ss in zip(sizes, block_seeds(seed, len(sizes))):
        rng = np.random.default_rng(ss)
        for _ in range(b):
            drawn = rng.integers(0, ctx.n_units, ctx.n_units)
            sel = np.concatenate([caps_of[u] for u in drawn])
            for k, v in metrics(sel).items():
                values[k].append(v)
    point = metrics(np.arange(n))
    out = {}
    for k, v in values.items():
        v = np.asarray(v, float)
        v = v[~np.isnan(v)]
        lo, med, hi = np.quantile(v, [0.025, 0.5, 0.975])
        if k in ("vocab", "recall_disparity"):  # re-centred (biased statistics)
            lo, hi = point[k] - (med - lo), point[k] + (hi - med)
        out[k] = (lo, hi)
    return point, out


@needs_shared
@pytest.mark.parametrize("workers", [1, 2])
def test_engine_intervals_equal_a_plain_resampling_loop(workers, monkeypatch):
    import capaudit.audit.bootstrap as bs
    from capaudit.audit.engine import audit_captions
    ids, caps = _coco_sample(800)                     # 5 captions per image: units != captions
    ann = _annotations(COCO / "instance_categories_val2014.jsonl",
                       COCO / "chair_objects_trainval2014.jsonl", COCO / "demographics_val2014.jsonl")
    monkeypatch.setattr(bs, "BLOCK_ELEMS", 800 * 37)  # several blocks, one of them partial
    monkeypatch.setattr(bs, "PARALLEL_MIN", 0)        # threads even on this small input
    res = audit_captions(ids, caps, ann, n_boot=150, seed=11, workers=workers, min_images=2)
    point, ref = _loop_bootstrap(ids, caps, ann, 150, 11, min_images=2)
    assert res.results["recall_disparity"].extra["m"] > 3
    for k, (lo, hi) in ref.items():
        r = res.results[k]
        assert r.value == pytest.approx(point[k], rel=1e-12), k
        assert (r.ci_low, r.ci_high) == pytest.approx((lo, hi), rel=1e-9), k


def _disparity_interval(ids, caps, ann, min_images=10):
    from capaudit.audit.engine import audit_captions
    r = audit_captions(ids, caps, ann, metrics=["recall_disparity"], n_boot=1000, seed=0,
                       workers=2, min_images=min_images).results["recall_disparity"]
    return r.value, r.ci_low, r.ci_high


def test_recall_disparity_interval_contains_the_value_on_demo_data():
    rows = [json.loads(line) for line in (DEMO / "oscar.jsonl").read_text("utf-8").splitlines() if line]
    ann = _annotations(DEMO / "instance_categories.jsonl", DEMO / "chair_gt.jsonl",
                       DEMO / "demographics.jsonl")
    v, lo, hi = _disparity_interval([r["image_id"] for r in rows], [r["caption"] for r in rows], ann)
    assert lo < v < hi
    assert hi - lo < v  # a real spread, not a degenerate one


@needs_shared
@pytest.mark.parametrize("name", ["oscar_val2014_all", "nic_val2014_gender"])
def test_recall_disparity_interval_contains_the_value_on_shared_data(name):
    rows = [json.loads(line) for line in
            (SHARED / "data" / "captioners" / f"{name}.jsonl").read_text("utf-8").splitlines() if line]
    ann = _annotations(COCO / "instance_categories_val2014.jsonl",
                       COCO / "chair_objects_trainval2014.jsonl", COCO / "demographics_val2014.jsonl")
    v, lo, hi = _disparity_interval([r["image_id"] for r in rows], [r["caption"] for r in rows], ann)
    assert lo < v < hi


def test_worker_count_does_not_change_intervals(monkeypatch):
    import capaudit.audit.bootstrap as bs
    rng = np.random.default_rng(3)
    n = 5000
    num = rng.integers(0, 3, n).astype(float)
    dense = {"a": Estimate(np.stack([num, num + 1], 1), ratio(), n)}
    u = rng.integers(0, n, 800)
    c = rng.integers(0, 20, 800)
    dense["s"] = Estimate(SparseStats(u, c, rng.random(800), (n, 20)),
                          lambda s: s.sum(axis=-1), n)
    monkeypatch.setattr(bs, "PARALLEL_MIN", 0)
    a = bs.bootstrap_intervals(dense, n, 300, seed=4, workers=1)
    b = bs.bootstrap_intervals(dense, n, 300, seed=4, workers=2)
    c3 = bs.bootstrap_intervals(dense, n, 300, seed=4, workers=3)
    assert a == b == c3
