"""The image id rule (``io/imageids.py``), value by value, with the expectation written out
by hand from the rule in the module's docstring: a whole number of 0 to 18 digits, or the
number of a COCO-style file name (the whole base name is ``<digits>.jpg`` or
``COCO_<split><year>_<digits>.jpg``); everything else is a custom id (``None``)."""

from __future__ import annotations

import pytest

from capaudit.io.imageids import exact_image_id, key_image_id, parse_image_id

PARSED = [
    # integers: 0 up to 18 digits; negatives and 19 digits are not ids
    (0, 0), (318219, 318219), (10**18 - 1, 10**18 - 1), (10**18, None), (-1, None), (-7, None),
    (True, None), (False, None), (None, None),
    # floats: only whole, non-negative ones below 1e18
    (3.0, 3), (0.0, 0), (1.5, None), (-1.0, None), (-4.5, None), (1e18, None), (1e30, None),
    # text: digits with surrounding spaces
    ("12", 12), (" 12 ", 12), ("000123", 123), ("9" * 18, 10**18 - 1), ("1" + "0" * 18, None),
    ("-3", None), ("+3", None), ("1.5", None), ("1e3", None), ("", None), ("12 13", None),
    # COCO file names: the number is the whole base name, or follows COCO_<split><year>_
    ("COCO_val2014_000000318219.jpg", 318219), ("COCO_train2014_000000000009.JPG", 9),
    ("coco/train2017/000000000009.jpg", 9), ("000000000042.jpeg", 42), ("x/12.png", 12),
    ("COCO_val2014_12.jpeg", 12), ("images/COCO_val2014_000000000042.jpg", 42),
    # base names that only end in a number: custom ids
    ("sa_1.jpg", None), ("img12.jpg", None), ("a/b_12.png", None), ("photo-7.jpg", None),
    ("xCOCO_val2014_000000000042.jpg", None), ("COCO_val14_000000000042.jpg", None),
    # 13 digits, other extensions, no extension
    ("1234567890123.jpg", None), ("12.gif", None), ("12.jpg.txt", None), ("12.", None),
]


@pytest.mark.parametrize("value, expected", PARSED, ids=[repr(v) for v, _ in PARSED])
def test_parse_image_id(value, expected):
    got = parse_image_id(value)
    assert got == expected and type(got) is type(expected)


EXACT = [(0, 0), (7, 7), ("7", 7), (10**18 - 1, 10**18 - 1), (10**18, None), (-1, None),
         ("-1", None), (1.0, None), ("1.0", None), (True, None), (None, None),
         ("COCO_val2014_000000000042.jpg", None)]


@pytest.mark.parametrize("value, expected", EXACT, ids=[repr(v) for v, _ in EXACT])
def test_exact_image_id_takes_only_declared_integers(value, expected):
    assert exact_image_id(value) == expected


@pytest.mark.parametrize("key, expected", [
    ("COCO_val2014_000000011340", 11340), ("COCO_val2014_000000011340.jpg", 11340),
    ("000000000012", 12), ("sa_1", None), ("xCOCO_val2014_000000011340", None),
])
def test_key_image_id_reads_coco_names_without_extension(key, expected):
    assert key_image_id(key) == expected


def test_a_negative_id_in_a_samples_json_is_no_image_id(store, tmp_path):
    """Through a reader: a webdataset sample's JSON declares its image id; -5 names no image
    (the key stays as text), 7 does, 10**18 (19 digits) does not."""
    import io
    import json
    import tarfile

    from capaudit.io.ingest import add_caption_set

    with tarfile.open(tmp_path / "shard-00000.tar", "w") as tf:
        for key, iid in (("a", -5), ("b", 7), ("c", 10**18)):
            data = json.dumps({"image_id": iid, "caption": f"caption {key}"}).encode()
            info = tarfile.TarInfo(f"{key}.json")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    add_caption_set(store, "w", tmp_path)
    assert store.sql("SELECT image_id, caption FROM captions ORDER BY row_idx") == [
        (None, "caption a"), (7, "caption b"), (None, "caption c")]
