"""The filter's coverage guard on a stored set counts in the store (#31: 1.2M rows held ~400 MB
in Python): the same coverage as the audit's own counting over every row, on a set that mixes
namespaces, keys without ids, rows without a key, and an id in two namespaces."""

from __future__ import annotations

import pyarrow as pa
import pytest

from capaudit.audit.annotation_coverage import _count, _uncounted, guard_evidence
from capaudit.errors import InputError
from capaudit.io.imageids import compatible


def _mixed_set(store):
    rows = [("COCO_val2014_000000000001.jpg", 1, "coco2014"), ("a.jpg", 2, "coco2014"),
            ("x/3.jpg", 3, "nocaps"), ("y/1.jpg", 1, "nocaps"), ("4", 4, None),
            ("4", 4, None), ("5", 5, None), ("web-key", None, None), ("web-key", None, None),
            ("other", None, None), (None, None, None), ("6", 6, "coco2017")]
    table = pa.table({"image_key": [r[0] for r in rows], "image_id": [r[1] for r in rows],
                      "caption": [f"a dog {i}." for i in range(len(rows))]})
    store.add_set_from_table("mixed", table, source="t", format="jsonl")
    sid = store.get_set("mixed").set_id
    for i, (_, _, ns) in enumerate(rows):
        store.con.execute("UPDATE captions SET namespace = ? WHERE set_id = ? AND row_idx = ?",
                          [ns, sid, i])


@pytest.mark.parametrize("evidence", [{1, 2, 4, 6, 99}, {3}, {5}, set()])
def test_counts_equal_the_audits_own(store, evidence, monkeypatch):
    _mixed_set(store)
    from capaudit.audit import annotation_coverage

    monkeypatch.setattr(annotation_coverage, "source_namespace", lambda s, src: "coco2014")
    ref, by_ns = _uncounted("mixed", store.set_images("mixed"))
    _count(ref, by_ns, "chair_gt", evidence, "coco2014")
    foreign_ref = set().union(*(g for ns, g in by_ns.items() if not compatible(ns, "coco2014")))
    assert (ref.n_images, ref.n_with_ids) == (9, 6)   # ids 1-6, two keys, one keyless row
    cov, foreign = guard_evidence(store, "mixed", "chair-gt", evidence, None,
                                  allow_partial=True)
    assert (cov.n_images, cov.n_with_ids, cov.namespace) == (ref.n_images, ref.n_with_ids,
                                                              ref.namespace)
    assert cov.covered == ref.covered and cov.namespaces == ref.namespaces
    assert foreign == foreign_ref == {1, 3}


def test_refused_under_the_bound(store, monkeypatch):
    _mixed_set(store)
    from capaudit.audit import annotation_coverage

    monkeypatch.setattr(annotation_coverage, "source_namespace", lambda s, src: "coco2014")
    with pytest.raises(InputError, match=r"mixed"):
        guard_evidence(store, "mixed", "chair-gt", {1, 2}, None)   # 2 of 9 images
    cov, _ = guard_evidence(store, "mixed", "chair-gt", {1, 2, 4, 5, 6}, None)
    assert cov.covered["chair_gt"] == 5 and cov.share("chair_gt") == pytest.approx(5 / 9)
