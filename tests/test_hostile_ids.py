"""Hostile ids and annotation lists (issue #25): an id field that declares an integer
(COCO captions ``image_id`` and ``images[].id``, Karpathy ``cocoid``, COCO instances JSON)
takes exactly a whole number of at most 18 digits, every other value is one line naming
the row; a list-valued annotation field is a list of strings, never a string split into
letters."""

from __future__ import annotations

import json

import pytest

from capaudit.io.imageids import ID_LIMIT, exact_image_id
from test_hostile import cli, one_line_error as one_line


BAD_IDS = [1.7, 2.5, True, 1e20, 1.0, 10**20, -3, "abc", None, [1], "1.5"]
BAD_IDS_TEXT = ["1.7", "2.5", "true", "1e20", "1.0", str(10**20), "-3", '"abc"', "null", "[1]",
                '"1.5"']


def test_exact_image_id_by_hand():
    assert [exact_image_id(v) for v in (0, 7, "42", " 9 ", ID_LIMIT - 1)] == [0, 7, 42, 9,
                                                                            ID_LIMIT - 1]
    assert [exact_image_id(v) for v in BAD_IDS + [ID_LIMIT, False]] == [None] * 13


@pytest.mark.parametrize("bad", BAD_IDS_TEXT)
def test_coco_captions_image_id_refused_by_row(tmp_path, capsys, bad):
    f = tmp_path / "coco.json"
    # raw JSON text: 1e20 and 10**20 as the file says them
    f.write_text('{"images": [], "annotations": [{"image_id": 1, "caption": "a cat"}, '
                 '{"image_id": %s, "caption": "a dog"}]}' % bad)
    db = tmp_path / "c.duckdb"
    code, _, err = cli(["sets", "add", "c", f, "--format", "coco", "--db", db], capsys)
    line = one_line(err)
    assert code == 2 and "row 2" in line and "not an integer image id" in line, line


@pytest.mark.parametrize("images", ['[{"id": "abc"}]', '[{"id": null}]', "[1, 2]", '"x"',
                                    '[{"id": 1e20}]', '[{"id": 2.5}]'])
def test_coco_captions_bad_images_entries(tmp_path, capsys, images):
    f = tmp_path / "coco.json"
    f.write_text('{"images": %s, "annotations": [{"image_id": 1, "caption": "a cat"}]}' % images)
    code, _, err = cli(["sets", "add", "c", f, "--format", "coco", "--db", tmp_path / "c.duckdb"],
                       capsys)
    line = one_line(err)
    assert code == 2 and ("images entry 1" in line or "'images' is not" in line), line


@pytest.mark.parametrize("bad", ["1.7", "true", "1e20", '"abc"', "null"])
def test_karpathy_cocoid_refused_by_row(tmp_path, capsys, bad):
    f = tmp_path / "dataset_coco.json"
    f.write_text('{"dataset": "coco", "images": [{"filename": "a.jpg", "split": "val", "cocoid": 5,'
                 ' "sentences": [{"raw": "a cat"}]}, {"filename": "b.jpg", "split": "val", '
                 '"cocoid": %s, "sentences": [{"raw": "a dog"}]}]}' % bad)
    code, _, err = cli(["sets", "add", "k", f, "--format", "karpathy", "--db",
                        tmp_path / "k.duckdb"], capsys)
    line = one_line(err)
    assert code == 2 and "row 2" in line and "cocoid" in line, line


def _instances(tmp_path, images='[{"id": 1}, {"id": 2}]', image_id="1"):
    f = tmp_path / "instances_val2014.json"
    f.write_text('{"images": %s, "categories": [{"id": 18, "name": "dog"}], "annotations": '
                 '[{"image_id": %s, "category_id": 18}]}' % (images, image_id))
    return f


@pytest.mark.parametrize("kw", [{"image_id": "1.7"}, {"image_id": "true"}, {"image_id": "1e20"},
                                {"images": '[{"id": "abc"}]'}, {"images": '[{"id": null}]'},
                                {"images": "[1, 2]"}, {"images": '[{"id": 2.5}]'}],
                         ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_coco_instances_ids_are_exact(tmp_path, capsys, kw):
    f = _instances(tmp_path, **kw)
    code, _, err = cli(["annotations", "add", "instances", f, "--db", tmp_path / "a.duckdb"],
                       capsys)
    line = one_line(err)
    assert code == 2 and str(f) in line, line


def test_coco_instances_good_file_still_loads(tmp_path):
    from capaudit.io.annotation_files import load_instances

    cats, counts = load_instances(_instances(tmp_path))
    assert cats == {1: frozenset({"dog"}), 2: frozenset()} and counts[1] == {"dog": 1}


@pytest.mark.parametrize("kind,field", [("chair-gt", "objects"), ("instances", "categories")])
@pytest.mark.parametrize("value", ['"bowl"', "[1, null]", '{"a": 1}', "7", '["dog", 3]'])
def test_annotation_lists_must_be_lists_of_strings(tmp_path, capsys, kind, field, value):
    f = tmp_path / "ann.jsonl"
    f.write_text(json.dumps({"image_id": 1, field: ["dog"]}) + "\n"
                 + '{"image_id": 2, "%s": %s}\n' % (field, value))
    db = tmp_path / "a.duckdb"
    code, _, err = cli(["annotations", "add", kind, f, "--db", db], capsys)
    line = one_line(err)
    assert code == 2 and "row 2" in line and "list of strings" in line, line


def test_annotation_lists_of_strings_load_by_hand(tmp_path):
    from capaudit.io.annotation_files import load_chair_gt

    f = tmp_path / "gt.jsonl"
    f.write_text('{"image_id": 1, "objects": ["bowl", "dog"]}\n{"image_id": 2, "objects": []}\n')
    assert load_chair_gt(f) == {1: frozenset({"bowl", "dog"}), 2: frozenset()}
