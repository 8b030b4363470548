"""Shards: build, read (ours and img2dataset's layout), index, markers, resume."""

from __future__ import annotations

import io
import json
import tarfile

import pyarrow.parquet as pq
import pytest

from capaudit.errors import InputError
from capaudit.enrich.shards_build import build_shards
from capaudit.io.image_shards import list_shards, read_manifest, read_shard
from capaudit.io.markers import clean_tmp, config_hash, matches, read_marker
from test_enrich_fixtures import make_dataset, make_images


def test_build_writes_tars_index_markers_and_manifest(tmp_path):
    _, shards, ids = make_dataset(tmp_path, n_images=5, shard_size=2)
    tars = list_shards(shards)
    assert [t.name for t in tars] == ["shard-00000.tar", "shard-00001.tar", "shard-00002.tar"]
    samples = [s for t in tars for s in read_shard(t)]
    assert [s.image_id for s in samples] == ids
    assert samples[0].captions == ["a thing number 1000 view 0", "a thing number 1000 view 1"]
    assert samples[0].image[:2] == b"\xff\xd8" and samples[0].image_ext == "jpg"
    index = pq.read_table(shards / "shard-00000.parquet")
    assert index.column("image_id").to_pylist() == ids[:2]
    assert index.column("n_captions").to_pylist() == [2, 2]
    marker = read_marker(shards, "shard-00002.tar")
    assert marker["samples"] == 1 and marker["captions"] == 2
    assert read_manifest(shards)["captions_set"] == "coco"
    assert not list(shards.glob("*.tmp-*"))


def test_rebuild_skips_done_shards_and_is_byte_identical(tmp_path):
    db, shards, _ = make_dataset(tmp_path, n_images=4, shard_size=2)
    before = (shards / "shard-00001.tar").read_bytes()
    (shards / "shard-00001.done.json").unlink()       # as if killed before the marker
    (shards / ".shard-00001.tar.tmp-123-ab12").write_bytes(b"half")  # a killed writer's leftover
    from capaudit.store import Store

    with Store(db) as store:
        table = store.captions("coco")
    summary = build_shards(tmp_path / "images", table, shards, shard_size=2, set_name="coco")
    assert summary["written"] == 1 and summary["skipped_done"] == 1
    assert (shards / "shard-00001.tar").read_bytes() == before
    assert not list(shards.glob(".*.tmp-*"))


def test_unmatched_images_are_counted_and_no_match_is_an_error(tmp_path):
    import pyarrow as pa

    make_images(tmp_path / "img", 3)
    table = pa.table({"image_key": ["1000"], "image_id": pa.array([1000], pa.int64()),
                      "caption": ["x"]})
    s = build_shards(tmp_path / "img", table, tmp_path / "out", shard_size=10)
    assert s["samples"] == 1 and s["unmatched_images"] == 2
    empty = pa.table({"image_key": ["9"], "image_id": pa.array([9], pa.int64()), "caption": ["x"]})
    with pytest.raises(InputError, match="matches a caption"):
        build_shards(tmp_path / "img", empty, tmp_path / "out2")


def _member(tf, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


def test_reads_img2dataset_layout(tmp_path):
    path = tmp_path / "00000.tar"
    with tarfile.open(path, "w") as tf:
        _member(tf, "000000001.jpg", b"\xff\xd8fake")
        _member(tf, "000000001.txt", b"a man riding a horse")
        _member(tf, "000000001.json", json.dumps({"key": "000000001", "status": "success",
                                                   "url": "http://x"}).encode())
        _member(tf, "000000002.jpg", b"\xff\xd8fake2")
        _member(tf, "000000002.json", json.dumps({"caption": "two dogs",
                                                   "image_id": 42}).encode())
    samples = list(read_shard(path))
    # img2dataset's 9-digit key is its URL list's row number: no image id (a key with a
    # leading zero stays text unless it is COCO's 12-digit padding, #36.4)
    assert [(s.key, s.image_id, s.captions) for s in samples] == [
        ("000000001", None, ["a man riding a horse"]), ("000000002", 42, ["two dogs"])]


def test_config_hash_is_order_independent_and_markers_check_it(tmp_path):
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    from capaudit.io.markers import write_marker

    write_marker(tmp_path, "s.tar", "h1", {"samples": 3, "input": {"sha256": "ab"}})
    marker = read_marker(tmp_path, "s.tar")
    assert matches(marker, "h1", {"sha256": "ab"}) and not matches(marker, "h2", {"sha256": "ab"})
    assert not matches(marker, "h1", {"sha256": "cd"}) and not matches(marker, "h1", {})
    (tmp_path / "x.tmp-9").write_text("")
    assert clean_tmp(tmp_path) == 1
