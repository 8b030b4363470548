"""Instance counts as hallucination evidence (issue #42, counts): a number a sentence states
for an object is held to the image's number of instances in a COCO instances JSON.

../shared holds no instances JSON (its instance file is JSONL of categories), so the file
here is hand-made in the layout of COCO's ``instances_val2014.json`` (its keys, its crowd
region as RLE), and every expected count is read off it by hand: image 139 holds two dogs,
one couch and a crowd of people drawn as one ``iscrowd`` region (no exact number of people).
"""

from __future__ import annotations

import json

import pytest

from capaudit.filters.reference_evidence import WithReferences
from capaudit.io.annotation_files import load_instances
from capaudit.text.objects import VISUAL_MODE


def _ann(ann_id: int, cat: int, bbox: list[float], crowd: int = 0) -> dict:
    seg = {"counts": [272, 2, 4, 4, 4, 4], "size": [240, 320]} if crowd else \
        [[bbox[0], bbox[1], bbox[0] + bbox[2], bbox[1], bbox[0] + bbox[2], bbox[1] + bbox[3]]]
    return {"segmentation": seg, "area": bbox[2] * bbox[3], "iscrowd": crowd,
            "image_id": 139, "bbox": bbox, "category_id": cat, "id": ann_id}


def write_instances(path) -> None:
    """A COCO instances JSON (``info``, ``images``, ``licenses``, ``annotations``,
    ``categories``, as COCO's own) with image 139: dogs 2, couch 1, person crowd only."""
    data = {
        "info": {"description": "hand-made in COCO's layout", "url": "", "version": "1.0",
                 "year": 2014, "contributor": "capaudit tests", "date_created": "2026-11-29"},
        "images": [{"license": 1, "file_name": "COCO_val2014_000000000139.jpg",
                    "coco_url": "", "height": 426, "width": 640,
                    "date_captured": "2013-11-21 01:34:01", "flickr_url": "", "id": 139}],
        "licenses": [{"url": "http://creativecommons.org/licenses/by/2.0/", "id": 1,
                      "name": "Attribution License"}],
        "annotations": [_ann(1, 18, [10.0, 200.0, 120.0, 90.0]),
                        _ann(2, 18, [300.0, 210.0, 110.0, 80.0]),
                        _ann(3, 63, [150.0, 180.0, 300.0, 140.0]),
                        _ann(4, 1, [0.0, 0.0, 640.0, 150.0], crowd=1)],
        "categories": [{"supercategory": "person", "id": 1, "name": "person"},
                       {"supercategory": "animal", "id": 18, "name": "dog"},
                       {"supercategory": "furniture", "id": 63, "name": "couch"}],
    }
    path.write_text(json.dumps(data))


def test_exact_counts_leave_out_crowd_categories(tmp_path):
    p = tmp_path / "instances_val2014.json"
    write_instances(p)
    cats, exact = load_instances(p, exact=True)
    assert cats == {139: frozenset({"dog", "couch", "person"})}
    assert exact == {139: {"dog": 2, "couch": 1}}          # person: a crowd region only
    assert load_instances(p)[1] == {139: {"dog": 2, "couch": 1, "person": 1}}   # as before
    jsonl = tmp_path / "cats.jsonl"
    jsonl.write_text(json.dumps({"image_id": 139, "categories": ["dog"]}) + "\n")
    assert load_instances(jsonl, exact=True)[1] is None


def _run(tmp_path, captions: list[str], instances, **options) -> list[tuple[str, str]]:
    """``(action, reason)`` per caption of image 139, flagged by the instances evidence."""
    import capaudit

    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps({"image_id": 139, "caption": c,
                                       "refs": ["Two dogs sleep on a couch."]}) + "\n"
                           for c in captions))
    store = capaudit.open(tmp_path / f"s{len(list(tmp_path.glob('*.duckdb')))}.duckdb")
    store.add_set("a", src)
    store.filter("a", "hallucination", "a_f", action="flag", evidence="instances",
                 instances=str(instances), **options)
    return [tuple(r) for r in store.query(
        "SELECT action, reason FROM filter_log ORDER BY row_idx, sentence_idx").rows]


SENTENCES = ["Two dogs are lying on the couch.",          # 2 dogs: kept
             "Three dogs are lying on the couch.",        # 2 dogs, 3 stated: flagged
             "Two people watch the dogs from the couch.",  # person: crowd, no exact count
             "A dog sleeps on a couch.",                  # "a" is no count
             "One dog sleeps on two couches."]            # dog 2 against 1; couch 1 against 2


@pytest.fixture
def instances(tmp_path):
    p = tmp_path / "instances_val2014.json"
    write_instances(p)
    return p


def test_stated_numbers_against_the_instance_counts(tmp_path, instances):
    got = _run(tmp_path, SENTENCES, instances)
    assert [a for a, _ in got] == ["keep", "flag", "keep", "keep", "flag"]
    assert "instances: 3 against 2 (count)" in got[1][1]
    assert "instances" not in got[2][1] and "person" in got[2][1]
    assert "dog->dog [instances: 1 against 2 (count)]" in got[4][1]    # the sentence's first
    assert "couch->couch [instances: 2 against 1 (count)]" in got[4][1]


def test_without_an_instances_json_numbers_decide_nothing(tmp_path):
    """The same categories as JSONL (no instances, no counts): as before, every sentence kept."""
    jsonl = tmp_path / "cats.jsonl"
    jsonl.write_text(json.dumps({"image_id": 139, "categories": ["dog", "couch", "person"]})
                     + "\n")
    assert [a for a, _ in _run(tmp_path, SENTENCES, jsonl)] == ["keep"] * 5


def test_counts_beside_references(tmp_path, instances):
    """With reference texts over the instances, the counts still decide (the references say
    two dogs, agreeing with the instances: only the instances contradict "three")."""
    got = _run(tmp_path, SENTENCES[:2], instances, reference_col="refs",
               object_mode=VISUAL_MODE)
    assert [a for a, _ in got] == ["keep", "flag"]
    assert "instances: 3 against 2 (count)" in got[1][1]
    ev = WithReferences({139: {"dog": 1.0}}, {"dog"}, {139: ["a dog"]}, VISUAL_MODE, 2.0)
    assert ev[139].base_check is None            # a base without counts: no check added


def test_shards_decide_as_the_set_run(tmp_path, instances):
    from shard_fixtures import run_cli

    from capaudit.filters.logs import read_shard_log, sharded_run
    from capaudit.store import Store

    want = _run(tmp_path, SENTENCES, instances)
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "a.jsonl").write_text((tmp_path / "a.jsonl").read_text())
    db = tmp_path / "j.duckdb"
    assert run_cli("filter", "run", "--shards", tmp_path / "j", "--out", tmp_path / "out",
                   "--filter", "hallucination", "--action", "flag", "--evidence", "instances",
                   "--instances", instances, "--db", db) == 0
    with Store(db, read_only=True) as st:
        info = sharded_run(st, str(tmp_path / "out"))
    got = [(r["action"], r["reason"]) for r in read_shard_log(info, None).to_pylist()]
    assert got == want
