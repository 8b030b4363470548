"""Streaming audit: identical values, n and intervals to the in-memory audit, chunk by chunk.

``audit_stream`` keeps per-image sufficient statistics across chunks (an
image's captions may straddle chunks); a small odd ``chunk_size`` makes sure
they do. Equality is exact (``==``), not approximate.
"""

from __future__ import annotations

import json
from itertools import islice

import pyarrow as pa
import pytest

from capaudit.audit.engine import audit_captions, audit_stream
from capaudit.io.annotation_files import Annotations


def _annotations(shared):
    from capaudit.io.annotation_files import load_chair_gt, load_demographics, load_instances
    coco = shared("data", "coco2014")
    inst, _ = load_instances(coco / "instance_categories_val2014.jsonl")
    gender, skin = load_demographics(coco / "demographics_val2014.jsonl")
    return Annotations(instances=inst, chair_gt=load_chair_gt(coco / "chair_objects_trainval2014.jsonl"),
                       gender=gender, skin_tone=skin)


def _long_captions(shared, n: int, target_tokens: int = 170):
    """As ``benchmarks/bench_audit.py``: COCO human captions joined to ~170 tokens."""
    from capaudit.audit.synthetic import long_captions

    pairs = list(long_captions(shared("data", "coco2014", "captions_val2014_subset.json"), n,
                               target_tokens))
    return [i for i, _ in pairs], [c for _, c in pairs]


def _assert_identical(full, streamed):
    assert list(full.results) == list(streamed.results)
    for k, a in full.results.items():
        b = streamed.results[k]
        assert (a.value, a.n, a.ci_low, a.ci_high, a.skipped) == \
               (b.value, b.n, b.ci_low, b.ci_high, b.skipped), k
        assert a.extra == b.extra, k


def _details_equal(full, chunks):
    got = pa.concat_tables(chunks)
    assert got.num_rows == full.details.num_rows
    assert got.equals(full.details)


@pytest.mark.parametrize("corrected", [False, True])
def test_stream_equals_in_memory_on_nic(shared, corrected):
    ann = _annotations(shared)
    rows = [json.loads(line) for line in
            shared("data", "captioners", "nic_val2014_gender.jsonl").read_text("utf-8").splitlines()
            if line.strip()]
    ids = [r["image_id"] for r in rows]
    caps = [r["caption"] for r in rows]
    # a few captions without an image id: units of their own, after the images
    ids[5] = ids[2000] = None
    # the same images again later in the stream: their captions straddle chunks
    ids, caps = ids + ids[:3000], caps + caps[3000:6000]
    full = audit_captions(ids, caps, ann, n_boot=200, seed=7, workers=1, corrected=corrected)
    chunks = []
    streamed = audit_stream(zip(ids, caps), ann, n_boot=200, seed=7, workers=1, chunk_size=997,
                            details_sink=chunks.append, corrected=corrected)
    assert not full.skipped  # every metric computed, recall_disparity included
    _assert_identical(full, streamed)
    _details_equal(full, chunks)
    assert streamed.records is None and streamed.meta["n_captions"] == len(caps)
    assert streamed.meta["n_images"] == full.meta["n_images"]


def test_stream_equals_in_memory_on_long_captions(shared):
    ann = _annotations(shared)
    ids, caps = _long_captions(shared, 3000)
    full = audit_captions(ids, caps, ann, n_boot=200, seed=1, workers=2)
    streamed = audit_stream(zip(ids, caps), ann, n_boot=200, seed=1, workers=2, chunk_size=997)
    _assert_identical(full, streamed)
    # no sink: no details kept, same columns
    assert streamed.details.num_rows == 0
    assert streamed.details.schema.names == full.details.schema.names
    assert streamed.records is None


def test_a_chunk_ends_at_chunk_text_characters(shared, monkeypatch):
    """#24: 50,000 captions of ShareGPT4V length held ~200 MB more than 50,000 COCO ones; a
    chunk also ends once it holds CHUNK_TEXT characters. Same values, same details."""
    from capaudit.audit import engine

    ann = _annotations(shared)
    ids, caps = _long_captions(shared, 600)
    whole, sizes, parts = audit_captions(ids, caps, ann, n_boot=100, seed=3, workers=1), [], []
    monkeypatch.setattr(engine, "CHUNK_TEXT", 100_000)
    streamed = audit_stream(zip(ids, caps), ann, n_boot=100, seed=3, workers=1,
                            details_sink=parts.append, on_progress=sizes.append)
    longest = max(len(c) for c in caps)
    assert len(sizes) > 4 and sum(sizes) == len(caps)
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    for s, n in zip(starts, sizes):   # each chunk stops at the caption crossing the limit
        assert 100_000 <= sum(map(len, caps[s:s + n])) < 100_000 + longest or s + n == len(caps)
    _assert_identical(whole, streamed)
    _details_equal(whole, parts)


def test_recall_disparity_categories_are_chosen_on_the_full_data(shared):
    """With chunks far smaller than min_images allows, the category set is still that of
    the whole input (a per-chunk choice would find none and skip the metric)."""
    ann = _annotations(shared)
    rows = [json.loads(line) for line in islice(
        shared("data", "captioners", "nic_val2014_gender.jsonl").open(encoding="utf-8"), 4000)]
    ids = [r["image_id"] for r in rows]
    caps = [r["caption"] for r in rows]
    metrics = ["recall_disparity"]
    full = audit_captions(ids, caps, ann, metrics=metrics, n_boot=100, workers=1)
    streamed = audit_stream(zip(ids, caps), ann, metrics=metrics, n_boot=100, workers=1,
                            chunk_size=50)
    assert full.results["recall_disparity"].extra["m"] > 0
    _assert_identical(full, streamed)


def test_stream_toy_skips_and_empty():
    ids = [1, 1, 2, 3, None]
    caps = ["A man riding a horse.", "A woman on a horse next to a dog.", "A cat on a sofa.",
            "Two dogs and a frisbee.", "A red bus."]
    for ann in (Annotations(), Annotations(gender={1: "male"})):
        full = audit_captions(ids, caps, ann, n_boot=30, workers=1)
        streamed = audit_stream(zip(ids, caps), ann, n_boot=30, workers=1, chunk_size=2)
        _assert_identical(full, streamed)
    res = audit_stream(iter(()), Annotations(), n_boot=10, workers=1)
    assert res.meta["n_captions"] == 0 and res.details.num_rows == 0


def test_two_shards_merge_into_the_whole(shared):
    """StreamStats of two disjoint halves (two shards / workers), merged, give exactly the
    single-pass results: every metric's state is mergeable (the sharded audit's contract)."""
    import numpy as np

    from capaudit.audit.engine import image_id_array, stream_results
    from capaudit.metrics import default_metrics
    from capaudit.metrics.base import MetricContext
    from capaudit.metrics.stream import StreamStats
    from capaudit.text.records import build_records

    ann = _annotations(shared)
    rows = [json.loads(line) for line in islice(
        shared("data", "captioners", "nic_val2014_gender.jsonl").open(encoding="utf-8"), 3000)]
    ids = [r["image_id"] for r in rows]
    caps = [r["caption"] for r in rows]
    ids[7] = ids[2500] = None
    ids, caps = ids + ids[:800], caps + caps[1000:1800]   # images in both shards

    def shard(lo, hi):
        acc = StreamStats(default_metrics(), "reference", ann)
        acc.add(MetricContext(build_records(caps[lo:hi], workers=1), image_id_array(ids[lo:hi]),
                              ann, offset=lo, captions=caps[lo:hi]))
        return acc

    merged = shard(0, 1700).merge(shard(1700, len(caps)))
    whole = shard(0, len(caps))
    a, _ = stream_results(merged, 200, 5, 1)
    b, _ = stream_results(whole, 200, 5, 1)
    assert list(a) == default_metrics()
    for k in a:
        assert (a[k].value, a[k].n, a[k].ci_low, a[k].ci_high, a[k].extra) == \
               (b[k].value, b[k].n, b[k].ci_low, b[k].ci_high, b[k].extra), k
    assert np.isfinite(a["recall_disparity"].value)
