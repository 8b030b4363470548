"""The hashed Poisson bootstrap: weights are a pure function of (seed, image, replicate), and
its intervals equal the exact bootstrap's within Monte-Carlo error on COCO."""

from __future__ import annotations

import json

import numpy as np
import pytest

from capaudit.audit.bootstrap import choose_method, poisson_counts, unit_hash_keys


def test_weights_do_not_depend_on_the_other_units_or_the_split():
    keys = np.arange(0, 5000, dtype=np.int64) * 7 + 3
    full = poisson_counts(unit_hash_keys(keys), np.arange(40), seed=5)
    part = poisson_counts(unit_hash_keys(keys[1000:1200]), np.arange(40), seed=5)
    assert np.array_equal(full[:, 1000:1200], part)
    later = poisson_counts(unit_hash_keys(keys), np.arange(20, 40), seed=5)
    assert np.array_equal(full[20:], later)            # a replicate block computed alone
    assert not np.array_equal(full, poisson_counts(unit_hash_keys(keys), np.arange(40), seed=6))


def test_weights_are_poisson_one():
    w = poisson_counts(unit_hash_keys(np.arange(200_000)), np.arange(5), seed=0).ravel()
    # mean and variance 1: standard error of each over 1e6 draws is ~0.001 / ~0.0014
    assert abs(w.mean() - 1) < 0.005 and abs(w.var() - 1) < 0.01
    assert abs((w == 0).mean() - np.exp(-1)) < 0.003   # P(0) = e^-1, se ~0.0005


def test_auto_switches_at_the_threshold():
    from capaudit.audit.bootstrap import POISSON_MIN_UNITS
    assert choose_method("auto", POISSON_MIN_UNITS - 1) == "exact"
    assert choose_method("auto", POISSON_MIN_UNITS) == "poisson"
    assert choose_method("exact", 10**9) == "exact"


@pytest.mark.slow
def test_poisson_and_exact_intervals_agree_on_coco(shared):
    """oscar on all 40,504 val2014 images, 2,000 resamples each.

    Tolerance: an endpoint is a 2.5% (97.5%) quantile of B bootstrap values;
    for a roughly normal bootstrap distribution with sd s its Monte-Carlo
    standard error is sqrt(p(1-p)/B) / phi(1.96) * s = 0.0604 s at B = 2000.
    The two runs are independent, so a difference of endpoints has standard
    error 0.0854 s; we allow 4 of those (0.34 s) per endpoint, with s estimated
    from the exact interval as width / 3.92.
    """
    from capaudit.audit.engine import audit_captions
    from capaudit.io.annotation_files import Annotations, load_chair_gt, load_demographics, load_instances

    coco = shared("data", "coco2014")
    inst, _ = load_instances(coco / "instance_categories_val2014.jsonl")
    gender, skin = load_demographics(coco / "demographics_val2014.jsonl")
    ann = Annotations(instances=inst, chair_gt=load_chair_gt(coco / "chair_objects_trainval2014.jsonl"),
                      gender=gender, skin_tone=skin)
    rows = [json.loads(line) for line in shared("data", "captioners", "oscar_val2014_all.jsonl").open()]
    ids, caps = [r["image_id"] for r in rows], [r["caption"] for r in rows]
    runs = {m: audit_captions(ids, caps, ann, n_boot=2000, seed=1, workers=2,
                              config={"bootstrap": m}) for m in ("exact", "poisson")}
    checked = 0
    for name, ex in runs["exact"].results.items():
        po = runs["poisson"].results[name]
        if ex.skipped or ex.ci_low is None:
            continue
        assert po.value == ex.value and po.extra["bootstrap"] == "poisson"
        s = (ex.ci_high - ex.ci_low) / 3.92
        assert s > 0, name
        tol = 4 * 0.0854 * s
        assert abs(po.ci_low - ex.ci_low) < tol, (name, ex.ci_low, po.ci_low, tol)
        assert abs(po.ci_high - ex.ci_high) < tol, (name, ex.ci_high, po.ci_high, tol)
        checked += 1
    assert checked >= 6
