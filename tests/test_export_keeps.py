"""Exports keep what the set knew (#46.3): each ``--to`` layout carries the set's namespace and
``sets add`` of the result reads it back; LLaVA/ShareGPT/COCO exports name each image by the
file name a trainer opens; ``--to llava`` is the JSON array LLaVA's ``train.py`` loads; a
parquet of 100 row groups comes back ``--to original`` byte for byte, and after a filter
with its 100 row groups. On the real COCO 2014 and 2017 captions files (trimmed) and CHAIR's
reference output."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capaudit.filters.runner import run_filter
from capaudit.io.export import export_with_provenance
from capaudit.io.ingest import add_caption_set
from shard_fixtures import CAPTIONS, write_evidence

LAYOUTS = {"parquet": ".parquet", "jsonl": ".jsonl", "coco": ".json", "llava": ".json",
           "sharegpt4v": ".json", "sharegpt": ".json", "webdataset": "", "hf": ""}


def _trimmed_coco(src, dst, n=30):
    """The first ``n`` annotations of a real COCO captions file and their images."""
    data = json.loads(src.read_text())
    anns = data["annotations"][:n]
    ids = {a["image_id"] for a in anns}
    dst.write_text(json.dumps({**{k: v for k, v in data.items() if k not in (
        "images", "annotations")}, "images": [i for i in data["images"] if i["id"] in ids],
        "annotations": anns}))
    return dst, data["images"]


def _pairs(store, name):
    return sorted(store.sql("SELECT image_id, caption FROM captions JOIN caption_sets USING "
                            "(set_id) WHERE name = ?", [name]))


@pytest.mark.parametrize("to", list(LAYOUTS))
def test_every_export_reads_back_with_its_namespace(store, shared, tmp_path, to):
    if to == "hf":
        pytest.importorskip("datasets")
    path, _ = _trimmed_coco(shared("data", "coco2014", "captions_val2014_subset.json"),
                            tmp_path / "c14.json")
    assert add_caption_set(store, "c14", path).info.namespace == "coco2014"
    out = export_with_provenance(store, "c14", to, tmp_path / f"out{LAYOUTS[to]}")
    back = add_caption_set(store, "back", out).info
    assert back.namespace == "coco2014", to       # was: unassigned for all but webdataset
    assert _pairs(store, "back") == _pairs(store, "c14")


def test_trainers_get_the_images_file_names(store, shared, tmp_path):
    path, images = _trimmed_coco(shared("data", "coco2014", "captions_val2014_subset.json"),
                                 tmp_path / "c14.json")
    names = {i["id"]: i["file_name"] for i in images}
    add_caption_set(store, "c14", path)
    llava = json.loads(export_with_provenance(store, "c14", "llava", tmp_path / "l.json")
                       .read_text())
    assert isinstance(llava, list)                 # LLaVA's train.py: json.load of an array
    assert all(r["image"] == names[int(r["id"].split("-")[0])] for r in llava)
    assert llava[0]["image"].startswith("COCO_val2014_")        # was "571635"
    sg = json.loads(export_with_provenance(store, "c14", "sharegpt", tmp_path / "s.json")
                    .read_text())
    assert [r["images"][0] for r in sg] == [r["image"] for r in llava]
    coco = json.loads(export_with_provenance(store, "c14", "coco", tmp_path / "c.json")
                      .read_text())
    assert all(i["file_name"] == names[i["id"]] for i in coco["images"])
    # COCO 2017: the name is the 12-digit id, the same in train2017 and val2017
    p17, _ = _trimmed_coco(shared("data", "coco2017", "captions_val2017.json"),
                           tmp_path / "c17.json")
    add_caption_set(store, "c17", p17, namespace="coco2017")
    store.sql("UPDATE captions SET meta = NULL WHERE set_id = ?",
              [store.get_set("c17").set_id])     # as a set read from bare ids would be
    rec = json.loads(export_with_provenance(store, "c17", "llava", tmp_path / "17.json")
                     .read_text())[0]
    assert rec["image"] == f"{int(rec['id'].split('-')[0]):012d}.jpg"
    # a bare 12-digit name says no dataset: the record's namespace field does, read back
    assert rec["namespace"] == "coco2017"
    assert add_caption_set(store, "b17", tmp_path / "17.json").info.namespace == "coco2017"


def test_a_coco2014_id_without_its_split_is_said(store, shared, tmp_path):
    """CHAIR's output names images by id only: the export cannot know COCO_val2014_ from
    COCO_train2014_, writes the id and says so (message and provenance)."""
    add_caption_set(store, "ch", shared("references", "chair_maxlinn_example",
                                        "reference_outputs.json"))
    report: dict = {}
    out = export_with_provenance(store, "ch", "llava", tmp_path / "l.json", report=report)
    assert [r["image"] for r in json.loads(out.read_text())] == ["1290", "6871"]
    assert add_caption_set(store, "back", out).info.namespace == "coco2014"
    assert "2 records name their coco2014 image by its id" in report["note"]
    assert "COCO_train2014_ or COCO_val2014_" in report["note"]
    report = {}
    export_with_provenance(store, "ch", "coco", tmp_path / "c.json", report=report)
    assert "2 coco2014 images named by their id" in report["note"]
    prov = json.loads((tmp_path / "c.json.provenance.json").read_text())
    assert prov["config"]["note"] == report["note"]


def test_parquet_of_100_row_groups_comes_back_with_them(store, tmp_path):
    rows = CAPTIONS * 40                                     # 200 rows, 2 per row group
    table = pa.table({"image_id": [r[0] for r in rows], "caption": [r[1] for r in rows]})
    src = tmp_path / "in.parquet"
    pq.write_table(table, src, row_group_size=2)
    assert pq.ParquetFile(src).metadata.num_row_groups == 100
    add_caption_set(store, "s", src)
    same = export_with_provenance(store, "s", "original", tmp_path / "same.parquet")
    assert same.read_bytes() == src.read_bytes()            # was: one row group, other bytes
    run_filter(store, "s", "hallucination",
               {"chair_gt": str(write_evidence(tmp_path / "gt.jsonl"))}, out="f")
    report: dict = {}
    out = export_with_provenance(store, "f", "original", tmp_path / "f.parquet", report=report)
    meta = pq.ParquetFile(out).metadata
    # image 3's caption is dropped whole (every sentence went): its row group keeps the other
    # row; by hand: 40 of the 200 rows go, no row group is emptied (pairs are (1,2),(3,4),...)
    assert meta.num_row_groups == 100 and meta.num_rows == 160
    assert [meta.row_group(g).num_rows for g in range(100)] == [2 if (2 * g) % 5 != 2 and
                                                                (2 * g + 1) % 5 != 2 else 1
                                                                for g in range(100)]
    assert "row groups" in report["note"] and "created_by" in report["note"]
