"""Annotations: COCO instances JSON, JSONL forms, stored sources, derived demographics."""

from __future__ import annotations

import json

import pytest

from capaudit.cli.main import main
from capaudit.io.annotation_store import resolve_annotations
from capaudit.io.annotation_files import load_chair_gt, load_demographics, load_instances


def test_coco_instances_json(tmp_path):
    p = tmp_path / "instances.json"
    p.write_text(json.dumps({
        "images": [{"id": 1}, {"id": 2}, {"id": 3}],
        "categories": [{"id": 1, "name": "person"}, {"id": 18, "name": "dog"}],
        "annotations": [{"image_id": 1, "category_id": 1}, {"image_id": 1, "category_id": 1},
                        {"image_id": 1, "category_id": 18}, {"image_id": 2, "category_id": 18}]}))
    cats, counts = load_instances(p)
    assert cats == {1: frozenset({"person", "dog"}), 2: frozenset({"dog"}), 3: frozenset()}
    assert counts[1] == {"person": 2, "dog": 1}


def test_stored_annotations_equal_files(tmp_path, shared, capsys):
    coco = shared("data", "coco2014")
    db = str(tmp_path / "a.duckdb")
    for kind, f in (("instances", "instance_categories_val2014.jsonl"),
                    ("chair-gt", "chair_objects_trainval2014.jsonl"),
                    ("demographics", "demographics_val2014.jsonl")):
        assert main(["annotations", "add", kind, str(coco / f), "--db", db]) == 0
    from capaudit.store import Store
    with Store(db) as store:
        ann = resolve_annotations(store)
    cats, _ = load_instances(coco / "instance_categories_val2014.jsonl")
    assert ann.instances == cats
    assert ann.chair_gt == load_chair_gt(coco / "chair_objects_trainval2014.jsonl")
    gender, skin = load_demographics(coco / "demographics_val2014.jsonl")
    assert ann.gender == gender and ann.skin_tone == skin
    assert sum(1 for g in gender.values() if g) == 10780


def test_derived_demographics_agree_with_labels(tmp_path, shared, capsys):
    db = str(tmp_path / "d.duckdb")
    assert main(["sets", "add", "coco", str(shared("data", "coco2014",
                                                   "captions_val2014_subset.json")), "--db", db]) == 0
    out = tmp_path / "derived.jsonl"
    assert main(["annotations", "derive-demographics", "coco", "--rule", "all", "--out", str(out),
                 "--db", db]) == 0
    derived, _ = load_demographics(out)
    labels, _ = load_demographics(shared("data", "coco2014", "demographics_val2014.jsonl"))
    both = [i for i in derived if i in labels]
    agree = sum(derived[i] == labels[i] for i in both) / len(both)
    assert len(both) > 300 and agree >= 0.99


def test_build_chair_gt_cli_is_within_reference_gt(tmp_path, shared, capsys):
    """Objects parsed from the human captions are all in the reference ground truth.

    (Instance categories are left out here: the shared instance-category file,
    from kayburns/women-snowboard, lists 'person' or 'train' for 34 of these
    4,800 images where the CHAIR ground truth's instances do not.)
    """
    coco = shared("data", "coco2014")
    db = str(tmp_path / "g.duckdb")
    assert main(["sets", "add", "coco", str(coco / "captions_val2014_subset.json"), "--db", db]) == 0
    out = tmp_path / "gt.jsonl"
    assert main(["annotations", "build-chair-gt", "coco", "--out", str(out), "--db", db]) == 0
    built = load_chair_gt(out)
    ref = load_chair_gt(coco / "chair_objects_trainval2014.jsonl")
    assert len(built) == 4800
    # the subset holds only some captions per image, so built must be contained in ref
    assert all(built[i] <= ref[i] for i in built)
    assert sum(bool(built[i]) for i in built) / len(built) > 0.95  # captions name objects


def test_demographic_labels_file_named_source_latest_and_neither(tmp_path, shared):
    """One lookup for every command: file, stored source by name, latest stored, else a clear error."""
    from capaudit.errors import InputError
    from capaudit.filters.gender import GenderNeutralFilter
    from capaudit.filters.base import FilterContext
    from capaudit.io.annotation_store import add_annotations, demographic_labels
    from capaudit.store import Store

    f = shared("data", "coco2014", "demographics_val2014.jsonl")
    gender, skin = load_demographics(f)
    with Store(tmp_path / "d.duckdb") as store:
        assert demographic_labels(store) == ({}, {}, None)  # nothing stored, nothing asked
        with pytest.raises(InputError, match="needs image labels"):
            GenderNeutralFilter(when="unknown").setup(FilterContext(store=store))
        assert demographic_labels(store, f) == (gender, skin, str(f))
        add_annotations(store, "demographics", f, name="zhao")
        assert demographic_labels(store, "zhao") == (gender, skin, "store:zhao")
        assert demographic_labels(store) == (gender, skin, "store:zhao")
        with pytest.raises(InputError, match="neither a demographics file nor a stored source"):
            demographic_labels(store, "zhao2")
        flt = GenderNeutralFilter(when="unknown")  # no --demographics: the stored labels
        flt.setup(FilterContext(store=store))
        assert flt.labels == {i: g for i, g in gender.items() if g in ("male", "female")}
        assert len(flt.labels) == 10780


def test_annotation_files_are_parsed_once_per_content(tmp_path, monkeypatch):
    """A file given on the command line is parsed on the first audit and read back from the
    store's cache afterwards (same table); a changed file is parsed again."""
    from capaudit.io import annotation_files as ann_mod
    from capaudit.io.annotation_store import resolve_annotations
    from capaudit.store import Store

    gt = tmp_path / "gt.jsonl"
    gt.write_text('{"image_id": 1, "objects": ["dog", "hot dog"]}\n{"image_id": 2, "objects": []}\n')
    inst = tmp_path / "inst.jsonl"
    inst.write_text('{"image_id": 1, "categories": ["dog"]}\n')
    calls = []
    real_gt, real_inst = ann_mod.load_chair_gt, ann_mod.load_instances
    monkeypatch.setattr(ann_mod, "load_chair_gt", lambda p: calls.append(p) or real_gt(p))
    monkeypatch.setattr(ann_mod, "load_instances", lambda p: calls.append(p) or real_inst(p))
    with Store(tmp_path / "c.duckdb") as st:
        first = resolve_annotations(st, inst, gt)
        second = resolve_annotations(st, inst, gt)
        assert len(calls) == 2  # parsed once each
        assert first.chair_gt == second.chair_gt == {1: frozenset({"dog", "hot dog"}), 2: frozenset()}
        assert first.instances == second.instances == {1: frozenset({"dog"})}
        assert second.sources["chair_gt"] == str(gt)
        # the audit reads the cached (columnar) table exactly as the parsed dict
        from capaudit.audit.engine import audit_captions
        caps = ["A dog eats a hot dog.", "A cat and a dog.", "A red bus."]
        a, b = (audit_captions([1, 2, None], caps, x, n_boot=20, workers=1) for x in (first, second))
        assert a.to_dict() == b.to_dict() and a.results["chair_i"].value == 50.0
        assert a.details.equals(b.details)
        gt.write_text('{"image_id": 3, "objects": ["cat"]}\n')
        assert resolve_annotations(st, None, gt).chair_gt == {3: frozenset({"cat"})}
        assert len(calls) == 3


def test_parse_cache_round_trips_odd_names_and_empty_files(tmp_path):
    """Names are read back through a DuckDB ENUM: quotes, non-ASCII and images with no
    names come back as parsed; a file whose images all have none too."""
    from capaudit.io.annotation_store import _load_sets
    from capaudit.store import Store

    gt = tmp_path / "gt.jsonl"
    gt.write_text('{"image_id": 5, "objects": ["o\'brien\'s cat", "caf\\u00e9", "hot dog"]}\n'
                  '{"image_id": 2, "objects": []}\n{"image_id": 9, "objects": ["caf\\u00e9"]}\n')
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"image_id": 1, "objects": []}\n{"image_id": 4, "objects": []}\n')
    with Store(tmp_path / "c.duckdb") as st:
        for path, want in [(gt, {5: frozenset({"o'brien's cat", "café", "hot dog"}), 2: frozenset(),
                                 9: frozenset({"café"})}),
                           (empty, {1: frozenset(), 4: frozenset()})]:
            parsed, cached = _load_sets(st, "chair-gt", path), _load_sets(st, "chair-gt", path)
            assert type(cached).__name__ == "ColumnarSets"
            assert dict(parsed) == dict(cached) == want


def test_parse_cache_of_the_coco_ground_truth_is_the_parsed_table(tmp_path, shared):
    from capaudit.io.annotation_store import _load_sets
    from capaudit.store import Store

    path = shared("data", "coco2014", "chair_objects_trainval2014.jsonl")
    parsed = load_chair_gt(path)
    with Store(tmp_path / "c.duckdb") as st:
        _load_sets(st, "chair-gt", path)
        cached = _load_sets(st, "chair-gt", path)
    assert type(cached).__name__ == "ColumnarSets" and len(cached) == len(parsed) == 123_287
    assert dict(cached.items()) == parsed
