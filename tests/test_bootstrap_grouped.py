"""The grouped bootstrap (audit/bootstrap_grouped.py): same distribution as drawing images,
one interval per metric whatever else the audit asked for."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from capaudit.audit.bootstrap import bootstrap_intervals
from capaudit.audit.bootstrap_grouped import grouped_values, metric_seed, row_groups
from capaudit.metrics.estimate import Estimate, ratio

SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
OSCAR = SHARED / "data" / "captioners" / "oscar_val2014_all.jsonl"
GT = SHARED / "data" / "coco2014" / "chair_objects_trainval2014.jsonl"
needs_shared = pytest.mark.skipif(not OSCAR.is_file(), reason=f"shared data not found at {SHARED}")


def test_groups_are_the_distinct_rows_with_their_sizes():
    # 160 images: 120 of (0, 1), 28 of (1, 1), 12 of (2, 1), shuffled
    stats = np.array([[0, 1]] * 120 + [[1, 1]] * 28 + [[2, 1]] * 12, float)
    rows, sizes = row_groups(stats[np.random.default_rng(3).permutation(160)])
    assert rows.tolist() == [[0, 1], [1, 1], [2, 1]] and sizes.tolist() == [120, 28, 12]
    # as many groups as a sixteenth of the units: still grouped; one more: not worth it
    assert row_groups(np.arange(64, dtype=float).reshape(-1, 1) % 4) is not None
    assert row_groups(np.arange(64, dtype=float).reshape(-1, 1) % 5) is None
    assert row_groups(np.zeros((10, 0))) is None


def test_grouped_draws_are_multinomial_counts_of_the_groups():
    """Each replicate: the group counts of one Multinomial(n, sizes / n) draw of the metric's
    own generator, summed against the group rows (written out here draw by draw)."""
    stats = np.array([[0, 1]] * 120 + [[1, 1]] * 28 + [[2, 1]] * 12, float)
    groups = row_groups(stats)
    vals = grouped_values(groups, ratio(), 50, metric_seed(5, "chair_i"))
    rng = np.random.default_rng(np.random.SeedSequence([5, __import__("zlib").crc32(b"chair_i")]))
    want = []
    for _ in range(50):
        n0, n1, n2 = rng.multinomial(160, [120 / 160, 28 / 160, 12 / 160])
        want.append(100 * (n1 * 1 + n2 * 2) / (n0 + n1 + n2))
    assert np.allclose(vals, want, rtol=0, atol=1e-12)


def test_blocks_do_not_change_the_draws(monkeypatch):
    import capaudit.audit.bootstrap_grouped as bg

    groups = row_groups(np.array([[0, 1]] * 30 + [[1, 1]] * 10, float))
    one = grouped_values(groups, ratio(), 300, metric_seed(1, "m"))
    monkeypatch.setattr(bg, "BLOCK_CELLS", 2 * 7)   # 7 replicates per block
    assert np.array_equal(one, grouped_values(groups, ratio(), 300, metric_seed(1, "m")))


def test_auto_groups_where_cheaper_and_says_so():
    rng = np.random.default_rng(0)
    few = np.stack([rng.integers(0, 3, 4000), np.ones(4000)], 1).astype(float)
    many = np.stack([rng.random(4000), np.ones(4000)], 1)
    ests = {"few": Estimate(few, ratio(), 4000), "many": Estimate(many, ratio(), 4000)}
    used: dict = {}
    auto = bootstrap_intervals(ests, 4000, 200, seed=2, method="auto", used=used)
    assert used == {"few": "grouped", "many": "exact"}
    exact_used: dict = {}
    exact = bootstrap_intervals(ests, 4000, 200, seed=2, method="exact", used=exact_used)
    assert exact_used == {"few": "exact", "many": "exact"}
    assert auto["many"] == exact["many"]          # the ungrouped metric: the exact path's draws
    assert auto["few"] != exact["few"]            # other draws ...
    point = 100 * few[:, 0].sum() / 4000
    for lo, hi in (auto["few"], exact["few"]):    # ... of the same distribution
        assert lo < point < hi


def _oscar(n):
    rows = [json.loads(line) for line in OSCAR.read_text("utf-8").splitlines()[:n]]
    return [r["image_id"] for r in rows], [r["caption"] for r in rows]


@needs_shared
def test_grouped_intervals_agree_with_drawing_images_on_coco():
    """CHAIR_s and CHAIR_i of 5,000 OSCAR captions, 4,000 resamples each way: the interval
    ends agree within Monte-Carlo error (a few hundredths of a point on ~0.6-point widths)."""
    from capaudit.audit.engine import audit_captions
    from capaudit.io.annotation_files import Annotations, load_chair_gt

    ids, caps = _oscar(5000)
    ann = Annotations(chair_gt=load_chair_gt(GT))
    runs = {m: audit_captions(ids, caps, ann, metrics=["chair_s", "chair_i"], n_boot=4000, seed=3,
                              workers=1, config={"bootstrap": m}) for m in ("auto", "exact")}
    for name in ("chair_s", "chair_i"):
        g, e = runs["auto"].results[name], runs["exact"].results[name]
        assert g.extra["bootstrap"] == "grouped" and e.extra["bootstrap"] == "exact"
        assert g.value == e.value
        width = e.ci_high - e.ci_low
        assert abs(g.ci_low - e.ci_low) < 0.06 * width, name
        assert abs(g.ci_high - e.ci_high) < 0.06 * width, name


@needs_shared
def test_a_metric_interval_does_not_depend_on_the_other_metrics_or_workers():
    from capaudit.audit.engine import audit_captions
    from capaudit.io.annotation_files import Annotations, load_chair_gt

    ids, caps = _oscar(3000)
    ann = Annotations(chair_gt=load_chair_gt(GT))
    cfg = {"bootstrap": "auto"}
    alone = audit_captions(ids, caps, ann, metrics=["chair_s"], n_boot=300, workers=1, config=cfg)
    more = audit_captions(ids, caps, ann, metrics=["length", "chair_i", "chair_s", "vocab"],
                          n_boot=300, workers=2, config=cfg)
    a, m = alone.results["chair_s"], more.results["chair_s"]
    assert (a.ci_low, a.ci_high) == (m.ci_low, m.ci_high)
    assert more.results["vocab"].extra["bootstrap"] == "exact"   # a custom bootstrap: not grouped
