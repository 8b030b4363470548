"""Caption readers on the real shared files and on small files in each format."""

from __future__ import annotations

import json
import tarfile
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capaudit.io.imageids import parse_image_id
from capaudit.io.ingest import add_caption_set
from capaudit.io.readers import detect_format


def test_coco_subset_counts(store, shared):
    path = shared("data", "coco2014", "captions_val2014_subset.json")
    assert detect_format(path) == "coco"
    info = add_caption_set(store, "coco", path).info
    assert (info.n_captions, info.n_images) == (24019, 4800)
    # every caption of the file is stored, in file order
    doc = json.loads(path.read_text())
    first = doc["annotations"][0]
    row = store.one("SELECT image_id, caption FROM captions WHERE row_idx = 0")
    assert row == (first["image_id"], first["caption"])


def test_jsonl_captioner_file(store, shared):
    path = shared("data", "captioners", "oscar_val2014_all.jsonl")
    assert detect_format(path) == "jsonl"
    info = add_caption_set(store, "oscar", path).info
    assert (info.n_captions, info.n_images) == (40504, 40504)
    lines = path.read_text().splitlines()
    last = json.loads(lines[-1])
    assert store.one("SELECT image_id, caption FROM captions ORDER BY row_idx DESC LIMIT 1") == \
        (last["image_id"], last["caption"])


def test_add_same_file_is_noop_and_changed_needs_replace(store, tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text('{"image_id": 1, "caption": "a dog"}\n')
    assert add_caption_set(store, "a", p).added
    assert not add_caption_set(store, "a", p).added
    assert store.one("SELECT count(*) FROM captions")[0] == 1
    p.write_text('{"image_id": 1, "caption": "a cat"}\n{"image_id": 2, "caption": "a cow"}\n')
    from capaudit.errors import InputError
    with pytest.raises(InputError, match="--replace"):
        add_caption_set(store, "a", p)
    assert add_caption_set(store, "a", p, replace=True).info.n_captions == 2


@pytest.mark.parametrize("value,expected", [
    ("COCO_val2014_000000318219.jpg", 318219), ("000000000009.jpg", 9),
    ("coco/train2017/000000000009.jpg", 9), (42, 42), ("42", 42), ("my-image-7", None),
    ("http://x/y.jpg", None),
])
def test_image_ids(value, expected):
    assert parse_image_id(value) == expected


def _sharegpt4v(tmp_path):
    recs = [{"id": "000000000009", "image": "coco/train2017/000000000009.jpg",
             "conversations": [{"from": "human", "value": "<image>\nDescribe."},
                               {"from": "gpt", "value": "A bowl of broccoli and oranges."}]},
            {"id": "sa_1", "image": "sam/images/sa_1.jpg",
             "conversations": [{"from": "human", "value": "Describe."},
                               {"from": "gpt", "value": "A street at night."}]}]
    p = tmp_path / "sharegpt4v.json"
    p.write_text(json.dumps(recs))
    return p


def test_sharegpt4v(store, tmp_path):
    p = _sharegpt4v(tmp_path)
    assert detect_format(p) == "sharegpt4v"
    add_caption_set(store, "s", p)
    rows = store.sql("SELECT image_key, image_id, caption FROM captions ORDER BY row_idx")
    assert rows == [("coco/train2017/000000000009.jpg", 9, "A bowl of broccoli and oranges."),
                    ("sam/images/sa_1.jpg", None, "A street at night.")]


def test_fusecap_mapping_and_list(store, tmp_path):
    p = tmp_path / "fusecap.json"
    p.write_text(json.dumps({"COCO_train2014_000000000009.jpg": "a bowl of green broccoli",
                             "COCO_train2014_000000000025.jpg": "a tall giraffe"}))
    assert detect_format(p) == "fusecap"
    assert add_caption_set(store, "f", p).info.n_captions == 2
    q = tmp_path / "fusecap_list.json"
    q.write_text(json.dumps([{"image": "000000000009.jpg", "caption": "x y"}]))
    add_caption_set(store, "g", q, "fusecap")
    assert store.one("SELECT image_id FROM captions c JOIN caption_sets s USING (set_id) "
                     "WHERE s.name = 'g'") == (9,)


def test_capsfusion_parquet_column_choice(store, tmp_path):
    p = tmp_path / "caps.parquet"
    pq.write_table(pa.table({"image_url": ["http://a/1.jpg", "http://a/2.png"],
                             "laion_2b": ["raw 1", "raw 2"], "laion_coco": ["syn 1", "syn 2"],
                             "capsfusion": ["fused 1", "fused 2"]}), p)
    assert detect_format(p) == "capsfusion"
    add_caption_set(store, "cf", p)
    add_caption_set(store, "cf_raw", p, caption_col="laion_2b")
    caps = store.sql("SELECT s.name, c.caption, c.image_key FROM captions c JOIN caption_sets s "
                     "USING (set_id) ORDER BY s.name, row_idx")
    assert [c[1] for c in caps] == ["fused 1", "fused 2", "raw 1", "raw 2"]
    assert caps[0][2] == "http://a/1.jpg"


def test_csv_and_parquet_custom_columns(store, tmp_path):
    c = tmp_path / "caps.csv"
    c.write_text("key,text\nimg-a,a red bus\nimg-b,\"two dogs, one cat\"\n")
    add_caption_set(store, "c", c, id_col="key", caption_col="text")
    assert store.sql("SELECT image_key, image_id, caption FROM captions ORDER BY row_idx") == [
        ("img-a", None, "a red bus"), ("img-b", None, "two dogs, one cat")]
    p = tmp_path / "caps.parquet"
    pq.write_table(pa.table({"image_id": [5, 6], "caption": ["x", "y"]}), p)
    assert add_caption_set(store, "p", p).info.format == "parquet"


def test_webdataset_txt_and_json(store, tmp_path):
    p = tmp_path / "shard-00000.tar"
    with tarfile.open(p, "w") as tf:
        for name, data in [("000000000009.txt", b"a bowl of food"),
                           ("000000000009.jpg", b"\xff\xd8"),
                           ("000000000025.json", json.dumps(
                               {"image_id": 25, "captions": ["a giraffe", "tall giraffe"]}).encode())]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    assert detect_format(tmp_path) == "webdataset"
    add_caption_set(store, "w", tmp_path)
    assert store.sql("SELECT image_id, caption FROM captions ORDER BY row_idx") == [
        (9, "a bowl of food"), (25, "a giraffe"), (25, "tall giraffe")]


def test_hf_disk(store, tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"image_id": [1, 2], "caption": ["a", "b"]})
    ds.save_to_disk(str(tmp_path / "ds"))
    assert detect_format(tmp_path / "ds") == "hf"
    assert add_caption_set(store, "h", tmp_path / "ds").info.n_captions == 2


def test_export_roundtrip(store, tmp_path, shared):
    from capaudit.io.export import export_set

    add_caption_set(store, "nic", shared("data", "captioners", "nic_val2014_gender.jsonl"))
    for fmt in ("jsonl", "parquet", "webdataset"):
        out = export_set(store, "nic", fmt, tmp_path / f"nic_{fmt}")
        back = add_caption_set(store, f"nic_{fmt}", out, fmt).info
        assert back.n_captions == 10780
        assert store.sql(
            "SELECT count(*) FROM (SELECT image_id, caption FROM captions c JOIN caption_sets s "
            "USING (set_id) WHERE s.name = 'nic' EXCEPT SELECT image_id, caption FROM captions c "
            "JOIN caption_sets s USING (set_id) WHERE s.name = ?)", [f"nic_{fmt}"]) == [(0,)]
