"""A file's dataset comes from its evidence, never from its layout alone (#23)."""

from __future__ import annotations

import json

import pytest

from capaudit.audit.annotation_coverage import target_images
from capaudit.audit.runner import DEFAULTS, run_audit
from capaudit.io.targets import resolve_target
from capaudit.io.annotation_store import add_annotations
from capaudit.io.ingest import add_caption_set

# nocaps_val_4500_captions.json, as nocaps ships it: COCO's captions layout (even its
# ``coco_url`` key), pictures from Open Images, ids 0..4,499: 42, 73 and 74 are also
# val2014 ids with instance categories (of 0..9 none is)
NOCAPS_IDS = [0, 1, 2, 3, 4, 5, 6, 42, 73, 74]
OI_NAMES = ["0013ea2087020901", "0036e6c3a4b6a1f7", "003a5d8a04e67c48", "00474f0a1f3e61a5",
            "004c5e7ff8f0b7b1", "00537e0ef9f3f2b6", "0064f8c8d7d0e4f4", "006aba1a0f0ec8f2",
            "007cd1f2d1b3a0a9", "0086d2f7bd84fb2b"]


def nocaps_document(info=True, urls=True, oi_ids=True) -> dict:
    images = []
    for iid, oi in zip(NOCAPS_IDS, OI_NAMES):
        img = {"id": iid, "file_name": f"{oi}.jpg", "height": 768, "width": 1024,
               "date_captured": "2018-11-06 11:04:33.412304", "license": 2}
        if urls:
            img["coco_url"] = f"https://s3.amazonaws.com/nocaps/val/{oi}.jpg"
        if oi_ids:
            img["open_images_id"] = oi
        images.append(img)
    doc = {"licenses": [{"url": "http://creativecommons.org/licenses/by/2.0/", "id": 2,
                         "name": "Attribution License"}],
           "images": images,
           "annotations": [{"image_id": iid, "id": 10 * iid + k, "caption": f"a man {k}"}
                           for iid in NOCAPS_IDS for k in range(2)]}
    if info:
        doc["info"] = {"url": "https://nocaps.org", "date_created": "2018/11/06",
                       "version": "0.1", "description": "nocaps validation dataset",
                       "contributor": "nocaps team", "year": 2018}
    return doc


def _file(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("evidence", [dict(), dict(urls=False, oi_ids=False),
                                      dict(info=False, oi_ids=False)])
def test_nocaps_in_coco_layout_is_nocaps_on_both_paths(store, tmp_path, evidence):
    # each piece alone (the full file, the info block only, the URLs only) names nocaps
    path = _file(tmp_path, "nocaps_val_4500_captions.json", nocaps_document(**evidence))
    assert add_caption_set(store, "nocaps", path).info.namespace == "nocaps"
    direct = {ns for _, _, ns in target_images(store, resolve_target(store, str(path)))}
    assert direct == {"nocaps"}


def test_open_images_ids_alone_are_not_coco(store, tmp_path):
    path = _file(tmp_path, "val.json", nocaps_document(info=False, urls=False))
    assert add_caption_set(store, "oi", path).info.namespace == "openimages"


def test_coco_layout_alone_is_unassigned_not_coco2014(store, tmp_path):
    path = _file(tmp_path, "caps.json", nocaps_document(info=False, urls=False, oi_ids=False))
    assert add_caption_set(store, "bare", path).info.namespace is None
    assert {ns for _, _, ns in target_images(store, resolve_target(store, str(path)))} == {None}


def test_real_coco_captions_file_is_still_coco2014(store, shared):
    path = shared("data", "coco2014", "captions_val2014_subset.json")
    assert add_caption_set(store, "coco", path).info.namespace == "coco2014"
    direct = {ns for _, _, ns in target_images(store, resolve_target(store, str(path)))}
    assert direct == {"coco2014"}


def test_nocaps_file_audited_directly_never_joins_val2014(store, shared, tmp_path):
    # 3 of its 10 ids are val2014 ids: taken as bare numbers the audit stopped ("its ids are
    # bare numbers"); as nocaps ids nothing joins COCO and recall is skipped, never computed,
    # saying why: the annotations are another dataset's
    add_annotations(store, "instances", shared("data", "coco2014",
                                               "instance_categories_val2014.jsonl"))
    path = _file(tmp_path, "nocaps_val_4500_captions.json", nocaps_document())
    cfg = {**DEFAULTS, "n_boot": 20, "workers": 1, "metrics": ["recall", "length"]}
    res = run_audit(store, [str(path)], cfg)
    only = next(iter(res.values()))
    assert only.results["recall"].skipped == ("the instances annotations are for coco2014, "
                                              "another dataset than this set's nocaps")
    assert only.results["length"].value == pytest.approx(3.0)


def test_flickr_token_lines_in_coco_naming_are_coco2014(store, tmp_path):
    path = tmp_path / "coco_captions.token"
    path.write_text("COCO_val2014_000000011340.jpg#0\tA dog on a couch.\n"
                    "COCO_val2014_000000011340.jpg#1\tA brown dog lying down.\n"
                    "COCO_val2014_000000000042.jpg#0\tA bowl of food.\n")
    info = add_caption_set(store, "tok", path).info
    assert (info.format, info.namespace) == ("flickr-token", "coco2014")
    assert store.sql("SELECT image_id, namespace FROM captions ORDER BY row_idx") == [
        (11340, "coco2014"), (11340, "coco2014"), (42, "coco2014")]
    flickr = tmp_path / "results_20130124.token"
    flickr.write_text("1000092795.jpg#0\tTwo young guys with shaggy hair.\n")
    assert add_caption_set(store, "f30k", flickr).info.namespace == "flickr30k"


def _tar(path, members):
    import io
    import tarfile

    with tarfile.open(path, "w") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize("declared", [None, "coco2014"])
def test_webdataset_keys_in_coco_naming_are_parsed(store, tmp_path, declared):
    _tar(tmp_path / "00000.tar", [("COCO_val2014_000000011340.jpg", b"\xff\xd8"),
                                  ("COCO_val2014_000000011340.txt", b"a dog on a couch")])
    info = add_caption_set(store, "w", tmp_path, namespace=declared).info
    assert info.namespace == "coco2014"
    assert store.sql("SELECT image_key, image_id FROM captions") == [("11340", 11340)]


def test_img2dataset_row_keys_are_row_keys_not_image_ids(store, tmp_path):
    # img2dataset names samples by the row of its URL list: 000000012 is the 13th URL
    rows = []
    for n in (0, 12):
        key = f"{n:09d}"
        meta = {"url": f"https://example.org/{n}.jpg", "key": key, "status": "success",
                "error_message": None, "width": 256, "height": 256, "caption": f"photo {n}"}
        rows += [(f"{key}.jpg", b"\xff\xd8"), (f"{key}.txt", f"photo {n}".encode()),
                 (f"{key}.json", json.dumps(meta).encode())]
    _tar(tmp_path / "00000.tar", rows)
    info = add_caption_set(store, "i2d", tmp_path).info
    assert info.namespace is None
    assert store.sql("SELECT image_key, image_id FROM captions ORDER BY row_idx") == [
        ("000000000", None), ("000000012", None)]
    from capaudit.cli.sets import set_summary

    assert set_summary(store, "i2d", 0)["with_coco_id"] == 0


def test_malformed_json_names_line_and_column_not_the_formats(tmp_path):
    from capaudit.errors import InputError
    from capaudit.io.readers import detect_format, get_reader

    lines = json.dumps([{"image_id": i, "caption": "A dog."} for i in range(8)],
                       indent=2).split("\n")
    assert lines[22] == '    "image_id": 5,'           # line 23: record 6 (4 lines each)
    lines[22] = '    "image_id": 5'                   # its comma lost: the parser stops at
    path = tmp_path / "captions.json"                 # line 24's "caption", column 5
    path.write_text("\n".join(lines))
    # the first record is whole: the file is sniffed as COCO results (#36.1), and the read,
    # streamed record by record, names the damaged record (not the list of formats)
    assert detect_format(path) == "coco-results"
    with pytest.raises(InputError) as err:
        list(get_reader("coco-results").read(path))
    text = str(err.value)
    assert "record 6 is not valid JSON" in text and "captions.json" in text
    assert "tried" not in text
