"""Image ids belong to a dataset: namespaces, and the coverage check before an audit (#12)."""

from __future__ import annotations

import json

import pytest

from capaudit.audit.runner import DEFAULTS, run_audit
from capaudit.errors import InputError
from capaudit.io.annotation_store import add_annotations
from capaudit.io.imageids import annotation_namespace, compatible, infer_namespace
from capaudit.io.ingest import add_caption_set


def test_namespace_only_from_unambiguous_evidence():
    assert infer_namespace("COCO_val2014_000000318219.jpg") == "coco2014"
    assert infer_namespace("coco/train2017/000000000009.jpg") == "coco2017"
    assert infer_namespace("data/coco/images/val2014/COCO_val2014_000000000042.jpg") == "coco2014"
    assert infer_namespace("flickr30k-images/1000092795.jpg") == "flickr30k"
    # a numeric name under another folder is that folder's, not COCO's
    assert infer_namespace("llava/llava_pretrain/images/00000/000000012.jpg") == "path:llava"
    # bare numbers stay unassigned: the coverage check decides at audit time
    for bare in ("318219", "000000000009.jpg", "1000092795.jpg", 7):
        assert infer_namespace(bare) is None
    assert compatible("coco2014", "coco2017") and compatible(None, "nocaps")
    assert not compatible("nocaps", "coco2014") and not compatible("flickr30k", "coco2014")
    assert annotation_namespace("instances_val2014.json") == "coco2014"
    assert annotation_namespace("chair_objects_trainval2014.jsonl") == "coco2014"
    assert annotation_namespace("nocaps_val_4500_captions.json") is None


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def coco_store(store, shared):
    add_annotations(store, "instances", shared("data", "coco2014",
                                               "instance_categories_val2014.jsonl"))
    return store


def _val2014(shared) -> dict[int, list]:
    path = shared("data", "coco2014", "instance_categories_val2014.jsonl")
    return {r["image_id"]: r["categories"] for r in map(json.loads, path.open())}


def _cfg(**kw):
    return {**DEFAULTS, "n_boot": 20, "workers": 1, "metrics": ["recall", "length"], **kw}


def test_nocaps_ids_colliding_with_val2014_stop_the_audit(coco_store, shared, tmp_path):
    # nocaps image ids are 0..4,499; some are also val2014 ids (the issue counts 320)
    val = _val2014(shared)
    collide = len([i for i in val if i < 4500])
    assert collide == 320
    with_category = len([i for i in val if i < 4500 and val[i]])   # recall skips the others
    path = _write(tmp_path / "nocaps.jsonl", [{"image_id": i, "caption": "a man riding a horse"}
                                              for i in range(4500)])
    add_caption_set(coco_store, "nocaps", path)
    with pytest.raises(InputError, match=r"only 320 of the 4,500 images of 'nocaps' \(7\.1%"):
        run_audit(coco_store, ["nocaps"], _cfg())
    assert coco_store.one("SELECT count(*) FROM metrics")[0] == 0     # nothing stored
    # --allow-partial does not join unassigned ids that only collide with coco2014's (#46)
    with pytest.raises(InputError, match=r"no evidence that they are coco2014 images"):
        run_audit(coco_store, ["nocaps"], _cfg(allow_partial=True))
    # instances of no named dataset: --allow-partial audits the 320 annotated images only
    unnamed = tmp_path / "instances.jsonl"    # no split in the name: no namespace
    unnamed.write_bytes(shared("data", "coco2014", "instance_categories_val2014.jsonl")
                        .read_bytes())
    res = run_audit(coco_store, ["nocaps"], _cfg(allow_partial=True, instances=str(unnamed))
                    )["nocaps"]
    assert res.meta["coverage"]["covered"] == {"instances": 320}
    assert res.results["recall"].n == with_category
    # declared nocaps: nothing joins COCO, recall is skipped, never 0.00
    add_caption_set(coco_store, "nocaps2", path, namespace="nocaps")
    res = run_audit(coco_store, ["nocaps2"], _cfg())["nocaps2"]
    assert res.results["recall"].value is None
    assert res.results["recall"].skipped == ("the instances annotations are for coco2014, "
                                              "another dataset than this set's nocaps")
    assert res.results["length"].value == pytest.approx(5.0)


def test_flickr_names_and_reimported_row_numbers_stop(coco_store, tmp_path):
    flickr = _write(tmp_path / "flickr.jsonl", [{"image": f"{1000092795 + i}.jpg",
                                                 "caption": "a dog runs"} for i in range(300)])
    with pytest.raises(InputError, match=r"only 0 of the 300 images"):
        run_audit(coco_store, [str(flickr)], _cfg())
    # a set without image ids (CapsFusion: row numbers) exported and read back as "0", "1", ...
    rows = [{"image_id": str(i), "caption": "a car"} for i in range(1000)]
    add_caption_set(coco_store, "reimport", _write(tmp_path / "re.jsonl", rows))
    with pytest.raises(InputError, match=r"images of 'reimport' \([0-9.]+%, below 50%\)"):
        run_audit(coco_store, ["reimport"], _cfg())


def test_sets_without_ids_are_not_joined_and_not_stopped(coco_store, shared, tmp_path):
    records = json.loads(shared("data", "real", "capsfusion_example_data.json").read_text())
    path = tmp_path / "capsfusion_100.json"      # the real records, fewer of them
    path.write_text(json.dumps(records[:100]))
    add_caption_set(coco_store, "cf", path)
    res = run_audit(coco_store, ["cf"], _cfg())["cf"]
    assert res.results["recall"].skipped == "no annotated images"
    assert res.results["length"].n == 100


@pytest.mark.slow
def test_captioner_files_with_bare_coco_ids_keep_working(store, shared):
    for kind, name in (("instances", "instance_categories_val2014.jsonl"),
                       ("chair-gt", "chair_objects_trainval2014.jsonl"),
                       ("demographics", "demographics_val2014.jsonl")):
        add_annotations(store, kind, shared("data", "coco2014", name))
    add_caption_set(store, "nic", shared("data", "captioners", "nic_val2014_gender.jsonl"))
    add_caption_set(store, "oscar", shared("data", "captioners", "oscar_val2014_all.jsonl"))
    from capaudit.audit import annotation_coverage as coverage
    from capaudit.io.annotation_store import resolve_annotations

    ann = resolve_annotations(store)
    nic = coverage.measure("nic", store.set_images("nic"), ann, store)
    assert nic.covered == {"instances": 10780, "chair_gt": 10780, "demographics": 10780}
    oscar = coverage.measure("oscar", store.set_images("oscar"), ann, store)
    # demographics label 13,057 of val2014's 40,504 images by design: not a reason to stop
    assert oscar.covered["demographics"] == 13057 and oscar.covered["instances"] == 40504
    coverage.check(oscar)
    assert oscar.dropped == []
    # every id may join: the rows the metrics see are exactly the stored ones
    assert coverage.kept_ids(store.set_images("oscar"), ann, oscar) is None


def test_rows_of_another_namespace_never_join(store, tmp_path):
    ann = _write(tmp_path / "toy_val2014.jsonl", [{"image_id": i, "categories": ["dog"]}
                                                  for i in (9, 25, 30)])
    add_annotations(store, "instances", ann)
    assert store.one("SELECT namespace FROM annotation_sources")[0] == "coco2014"
    recs = [{"image": "coco/train2017/000000000009.jpg", "conversations": [
                {"from": "human", "value": "Describe."}, {"from": "gpt", "value": "A dog."}]},
            {"image": "coco/train2017/000000000030.jpg", "conversations": [
                {"from": "human", "value": "Describe."}, {"from": "gpt", "value": "A cat."}]},
            {"image": "llava/llava_pretrain/images/00000/000000025.jpg", "conversations": [
                {"from": "human", "value": "Describe."}, {"from": "gpt", "value": "A dog."}]}]
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(recs))
    info = add_caption_set(store, "mixed", path).info
    assert info.namespace == "mixed"
    res = run_audit(store, ["mixed"], _cfg())["mixed"]
    # recall over the two COCO images (dog found in 9, missed in 30): 1/2; id 25 is LLaVA's
    assert res.results["recall"].n == 2
    assert res.results["recall"].value == pytest.approx(50.0)


def test_declared_namespace_conflicting_with_evidence_is_refused_by_row(store, tmp_path):
    path = _write(tmp_path / "x.jsonl", [{"image": "1.jpg", "caption": "a"},
                                         {"image": "COCO_val2014_000000000042.jpg",
                                          "caption": "b"}])
    with pytest.raises(InputError, match=r"row 2: image 'COCO_val2014_000000000042.jpg' is a "
                                         r"coco2014 image, not nocaps"):
        add_caption_set(store, "x", path, namespace="nocaps")
    assert store.find_set("x") is None


def test_namespaces_are_assigned_page_by_page(store, tmp_path, monkeypatch):
    """Keys are read in pages of rows (memory bounded by a page, #31): a key whose rows lie in
    several pages gets its namespace in all of them, mixed keys keep their own, and a
    declared namespace that a key contradicts names that key's first row."""
    from capaudit.store import captions

    monkeypatch.setattr(captions, "NAMESPACE_PAGE", 3)
    keys = ["COCO_val2014_000000000042.jpg", "7", "flickr30k-images/1000092795.jpg",
            "8", "9", "COCO_val2014_000000000042.jpg", "coco/train2017/000000000009.jpg"]
    path = _write(tmp_path / "mixed.jsonl", [{"image": k, "caption": f"a dog {i}"}
                                             for i, k in enumerate(keys)])
    add_caption_set(store, "mixed", path)
    got = store.sql("SELECT row_idx, namespace FROM captions ORDER BY row_idx")
    assert got == [(0, "coco2014"), (1, None), (2, "flickr30k"), (3, None), (4, None),
                   (5, "coco2014"), (6, "coco2017")]
    assert store.one("SELECT count(*) FROM duckdb_tables() WHERE temporary")[0] == 0
    with pytest.raises(InputError, match=r"row 3: image 'flickr30k-images/1000092795.jpg' is "
                                         r"a flickr30k image, not coco2014"):
        add_caption_set(store, "declared", path, namespace="coco2014")
    assert store.find_set("declared") is None
