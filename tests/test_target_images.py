"""The distinct images of a caption file, as the coverage guard counts them: each key once,
in the order of its first row, with that row's id; a bare number is evidence of no
namespace, a COCO file name of COCO's, a row without an id keeps none."""

import json

from capaudit.io.targets import resolve_target, target_images


def _images(tmp_path, records):
    path = tmp_path / "caps.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return target_images(None, resolve_target(None, str(path)))


def test_bare_numbers_once_each_in_first_row_order(tmp_path):
    got = _images(tmp_path, [{"image_id": 5, "caption": "a"}, {"image_id": 3, "caption": "b"},
                             {"image_id": 5, "caption": "c"}, {"image_id": 7, "caption": "d"}])
    assert got == [("5", 5, None), ("3", 3, None), ("7", 7, None)]


def test_file_names_and_missing_ids_take_the_per_key_rule(tmp_path):
    got = _images(tmp_path, [{"image_id": "COCO_val2014_000000000042.jpg", "caption": "a"},
                             {"image_id": 3, "caption": "b"}, {"image_id": None, "caption": "c"},
                             {"image_id": "COCO_val2014_000000000042.jpg", "caption": "d"}])
    assert got == [("COCO_val2014_000000000042.jpg", 42, "coco2014"), ("3", 3, None),
                   (None, None, None)]
