"""Annotation files read in columnar form (#24): the same tables as the row loader, no Python
loop over rows, and every file outside the plain shape left to the row loader's checks."""

from __future__ import annotations

import json

import pytest

from capaudit.core.columnar import ColumnarSets
from capaudit.errors import InputError
from capaudit.io.annotation_columns import read_name_sets
from capaudit.io.annotation_files import load_chair_gt, load_instances


def _by_hand(path, field):
    """The table as a plain reading of the file gives it: one json.loads per line."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            out[rec["image_id"]] = frozenset(rec[field])
    return out


@pytest.mark.parametrize("name, field", [("chair_objects_trainval2014.jsonl", "objects"),
                                         ("instance_categories_val2014.jsonl", "categories")])
def test_coco_files_are_read_in_columnar_form_with_the_same_table(shared, name, field):
    path = shared("data", "coco2014", name)
    sets = load_chair_gt(path) if field == "objects" else load_instances(path)[0]
    assert isinstance(sets, ColumnarSets)
    want = _by_hand(path, field)
    assert len(sets) == len(want) == {"objects": 123_287, "categories": 40_504}[field]
    assert dict(sets.items()) == want
    assert list(sets.ids) == sorted(want)  # what the metrics' gather needs


def test_repeated_ids_names_and_blank_lines_read_as_a_dict_would(tmp_path):
    """The last line of a repeated image wins (as a dict built line by line); a name listed twice
    counts once; blank lines and CRLF endings are skipped; an empty list keeps the image."""
    p = tmp_path / "gt.jsonl"
    p.write_bytes(b'{"image_id": 3, "objects": ["dog", "cat", "dog"]}\n\n'
                  b'{"image_id": 1, "objects": []}\r\n'
                  b'{"image_id": 7, "objects": ["caf\\u00e9", "o\'neil"]}\n'
                  b'{"image_id": 3, "objects": ["bus"]}\n   \n')
    sets = load_chair_gt(p)
    assert isinstance(sets, ColumnarSets)
    assert dict(sets.items()) == {3: frozenset({"bus"}), 1: frozenset(),
                                  7: frozenset({"café", "o'neil"})}
    assert list(sets.ids) == [1, 3, 7]
    row = {int(i): sets.codes[sets.offsets[k]:sets.offsets[k + 1]].tolist()
           for k, i in enumerate(sets.ids)}
    assert [sets.names[c] for c in row[3]] == ["bus"] and row[1] == []


@pytest.mark.parametrize("text", [
    '\ufeff{"image_id": 1, "objects": ["a"]}\n',                                # a BOM
    '{"image_id": 1, "objects": ["a"]} {"image_id": 2, "objects": ["b"]}\n',    # two on a line
    '{"image_id": 1,\n "objects": ["a"]}\n',                                    # one over two lines
    '{"image_id": -4, "objects": ["a"]}\n',                                     # not a COCO id
    '{"image_id": 1000000000000000000, "objects": ["a"]}\n',                    # past 18 digits
    '{"image_id": "COCO_val2014_000000000042.jpg", "objects": ["a"]}\n',        # a file name
    '{"image_id": 2.0, "objects": ["a"]}\n',                                    # a float
    '{"image_id": true, "objects": ["a"]}\n',                                   # a bool
    '{"image_id": 1, "objects": null}\n',                                       # null list
    '{"image_id": 1}\n',                                                        # no list
    '{"objects": ["a"]}\n',                                                     # no id
    '{"image_id": 1, "objects": ["a", null]}\n',                                # a null name
    '{"image_id": 1, "objects": [1]}\n',                                        # not a string
    '{"image_id": 1, "objects": "ab"}\n',                                       # not a list
    '{"image_id": 1, "objects": ["a"], "split": "val"}\n',                      # another field
    '[1, ["a"]]\n',                                                             # not an object
    '{"image_id": 1, "objects": ["a\tb"]}\n',                                  # raw control char
    '{"image_id": 01, "objects": ["a"]}\n',                                     # leading zero
    '{"image_id": 1, "objects": ["a",]}\n',                                     # trailing comma
    '',                                                                         # empty
])
def test_files_outside_the_plain_shape_go_to_the_row_loader(tmp_path, text):
    """The columnar reader answers None for anything but plain lines, so the row loader (its
    checks and one-line errors, named by row) decides every other file."""
    p = tmp_path / "gt.jsonl"
    p.write_text(text, encoding="utf-8")
    assert read_name_sets(p, "objects") is None


def test_row_loader_errors_still_name_the_row(tmp_path):
    p = tmp_path / "gt.jsonl"
    p.write_text('{"image_id": 1, "objects": ["a"]}\n{"image_id": -4, "objects": ["a"]}\n')
    with pytest.raises(InputError, match=r"row 2: image_id -4 is not an integer image id"):
        load_chair_gt(p)
    p.write_text('{"image_id": 1, "objects": ["a"]}\n{"image_id": 2}\n')
    with pytest.raises(InputError, match=r"row 2: missing column 'objects'"):
        load_chair_gt(p)
    p.write_text('{"image_id": 1, "categories": ["a"]} {"image_id": 2, "categories": []}\n')
    with pytest.raises(InputError, match=r"row 1: malformed JSON"):
        load_instances(p)


def test_stored_sources_come_back_columnar_with_empty_images(tmp_path):
    """``annotations add`` then an audit's lookup: the stored source is grouped in the store and
    handed back as arrays, the image with an empty ground truth kept as an empty set."""
    from capaudit.io.annotation_store import add_annotations, resolve_annotations
    from capaudit.store import Store

    gt = tmp_path / "gt.jsonl"
    gt.write_text('{"image_id": 9, "objects": ["dog", "hot dog"]}\n'
                  '{"image_id": 4, "objects": []}\n{"image_id": 5, "objects": ["dog"]}\n')
    inst = tmp_path / "instances.json"
    inst.write_text(json.dumps({
        "images": [{"id": 1}, {"id": 2}], "categories": [{"id": 18, "name": "dog"}],
        "annotations": [{"image_id": 1, "category_id": 18}, {"image_id": 1, "category_id": 18}]}))
    with Store(tmp_path / "s.duckdb") as st:
        assert add_annotations(st, "chair-gt", gt) == ("chair-gt", 3)
        assert add_annotations(st, "instances", inst) == ("instances", 2)
        ann = resolve_annotations(st)
        assert sorted(st.sql("SELECT image_id, category, count FROM instance_categories"),
                      key=str) == [(1, "dog", 2), (2, None, None)]
    assert isinstance(ann.chair_gt, ColumnarSets) and isinstance(ann.instances, ColumnarSets)
    assert dict(ann.chair_gt.items()) == {9: frozenset({"dog", "hot dog"}), 4: frozenset(),
                                          5: frozenset({"dog"})}
    assert dict(ann.instances.items()) == {1: frozenset({"dog"}), 2: frozenset()}
