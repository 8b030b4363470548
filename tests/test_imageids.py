"""The image id rule (``io/imageids.py``), value by value, with the expectation written out
by hand from the rule in the module's docstring: a whole number of 0 to 18 digits, or the
number of a COCO-style file name (the whole base name is ``<digits>.jpg`` or
``COCO_<split><year>_<digits>.jpg``); everything else is a custom id (``None``). Then the
namespace (dataset) an id belongs to, from the evidence the docstring lists."""

from __future__ import annotations

import re

import pytest

from capaudit.io.imageids import (annotation_namespace, compatible, document_namespace,
                                  exact_image_id, file_evidence, infer_namespace, is_row_key,
                                  key_image_id, parse_image_id, require_image_id,
                                  set_namespace)


def _ids(cases) -> list[str]:
    """Test ids a shell and pytest's node-id selection take as written (mutmut reruns by id)."""
    return [f"{i}-" + re.sub(r"[^A-Za-z0-9.]+", "_", repr(c[0]))[:40] for i, c in enumerate(cases)]


PARSED = [
    # integers: 0 up to 18 digits; negatives and 19 digits are not ids
    (0, 0), (318219, 318219), (10**18 - 1, 10**18 - 1), (10**18, None), (-1, None), (-7, None),
    (True, None), (False, None), (None, None),
    # floats are no ids, whole ones included: 3.0 rounded would name another image's id
    (3.0, None), (0.0, None), (1.5, None), (-1.0, None), (-4.5, None), (1e18, None), (1e30, None),
    # text: ASCII digits with surrounding spaces, in canonical form (a leading zero makes
    # text: an Open Images key), except COCO's 12-digit padding
    ("12", 12), (" 12 ", 12), ("000123", None), ("000000000123", 123), ("\uff11\uff12", None), ("9" * 18, 10**18 - 1), ("1" + "0" * 18, None),
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


@pytest.mark.parametrize("value, expected", PARSED, ids=_ids(PARSED))
def test_parse_image_id(value, expected):
    got = parse_image_id(value)
    assert got == expected and type(got) is type(expected)


EXACT = [(0, 0), (7, 7), ("7", 7), (10**18 - 1, 10**18 - 1), (10**18, None), (-1, None),
         ("-1", None), (1.0, None), ("1.0", None), (True, None), (None, None),
         ("COCO_val2014_000000000042.jpg", None)]


@pytest.mark.parametrize("value, expected", EXACT, ids=_ids(EXACT))
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


# -- namespaces: which dataset an id belongs to (the module docstring's list) -------------------
NAMESPACES = [
    (None, None), (318219, None), (5.0, None), (True, None),
    ("318219", None), (" 318219 ", None), ("000000000009.jpg", None), ("sa_1.jpg", None),
    ("COCO_val2014_000000318219.jpg", "coco2014"), ("x/COCO_train2017_000000000009.jpg", "coco2017"),
    ("coco/train2017/000000000009.jpg", "coco2017"),
    ("data/mscoco/images/val2014/000000000042.jpg", "coco2014"),
    ("coco\\val2014\\000000000042.jpg", "coco2014"),          # a Windows path
    ("flickr30k/images/1000092795.jpg", "flickr30k"), ("Flickr8k_Dataset/123.jpg", "flickr8k"),
    ("llava_pretrain/images/00000/000000012.jpg", "path:llava_pretrain"),
    ("/abs/folder/12.jpg", "path:abs"),
    ("https://Host.Example/img/12.jpg", None),   # a URL names an image, not a dataset ...
    ("http://images.cocodataset.org/val2017/000000000139.jpg", "coco2017"),  # ... but COCO's
    ("a/b/sa_1.jpg", None),                                     # a custom id has no namespace
    ("/000000000009.jpg", None),                                # a leading slash: no folder
    ("XL_images/00001/12.jpg", "path:xl_images"), ("X/12.jpg", "path:x"),
]


@pytest.mark.parametrize("value, expected", NAMESPACES, ids=_ids(NAMESPACES))
def test_infer_namespace(value, expected):
    assert infer_namespace(value) == expected


@pytest.mark.parametrize("key, meta, row_number", [
    ("000000012", {"url": "http://x/a.jpg"}, True),             # img2dataset: the 13th URL
    ("000000012", {"url": "http://x/a.jpg", "image_id": 12}, False),
    ("000000012", {}, False), ("abc", {"url": "http://x/a.jpg"}, False),
    (12, {"url": "http://x/a.jpg"}, False), ("000000012", None, False),
])
def test_is_row_key(key, meta, row_number):
    assert is_row_key(key, meta) is row_number


def test_key_image_id_of_other_types_is_the_id_rule():
    assert key_image_id(12) == 12 and key_image_id(None) is None
    assert key_image_id(" COCO_val2014_000000011340 ") == 11340


@pytest.mark.parametrize("info, images, expected", [
    ({"description": "COCO 2014 Dataset", "url": "http://cocodataset.org"}, [], "coco2014"),
    ({"year": 2017, "description": "COCO"}, [], "coco2017"),
    ({"description": "nocaps validation"},
     [{"coco_url": "http://x/val/0013ea2087020901.jpg", "file_name": "0013ea2087020901.jpg"}],
     "nocaps"),
    (None, [{"file_name": "0013ea2087020901.jpg", "open_images_id": "0013ea2087020901"}],
     "openimages"),
    (None, [{"file_name": "COCO_val2014_000000000042.jpg"}], "coco2014"),
    (None, [{"coco_url": "http://images.cocodataset.org/val2017/000000000139.jpg"}], "coco2017"),
    (None, [{"file_name": "000000000042.jpg"}], None),     # the layout alone is no evidence
    (None, [{"flickr_url": "http://farm4.staticflickr.com/1/2.jpg"}], None),
    ({"description": "Flickr30k captions"}, [], "flickr30k"),
    # COCO named with no year: 2014 (2014 and 2017 share ids); both years named: 2014
    ({"description": "MS COCO captions"}, [], "coco2014"),
    ({"description": "COCO 2014 images, 2017 split"}, [], "coco2014"),
    # a year the images' URLs or names give outweighs years in the prose
    ({"description": "a re-split of the 2014 images"},
     [{"coco_url": "http://images.cocodataset.org/train2017/000000000009.jpg"}], "coco2017"),
    # a URL on another host names nothing (a URL is an image's name, not a dataset's)
    ({"description": "a re-split of the 2014 images"},
     [{"coco_url": "http://h/coco/train2017/000000000009.jpg"}], "coco2014"),
    ({"description": "2017 export"}, [{"file_name": "COCO_val2014_000000000042.jpg"}],
     "coco2014"),
    # entries that are not objects are skipped, not the end of the list
    (None, ["junk", {"file_name": "COCO_val2014_000000000042.jpg"}], "coco2014"),
    ({"description": "COCO 2017"}, None, "coco2017"),            # no image list at all
    # each text is read on its own: a URL ending in "coco" names COCO
    (None, [{"url": "http://example.org/datasets/coco"}, {"url": "http://example.org/b"}],
     "coco2014"),
])
def test_document_namespace(info, images, expected):
    assert document_namespace(info, images) == expected


def test_namespaces_that_join():
    assert compatible(None, "coco2014") and compatible("flickr30k", None)
    assert compatible("coco2014", "coco2017") and compatible("coco", "coco2017")
    assert compatible("flickr30k", "flickr30k")
    assert not compatible("coco2014", "flickr30k") and not compatible("path:a", "path:b")
    assert file_evidence("coco2014", [None, "coco2017"]) == "coco2014"
    assert file_evidence("coco2014", [None, "flickr30k"]) is None
    assert file_evidence(None, [None]) is None
    assert set_namespace([]) is None and set_namespace([None, None]) is None
    assert set_namespace(["coco2014", "coco2014"]) == "coco2014"
    assert set_namespace(["coco2014", None]) == "mixed"
    assert set_namespace(["coco2014", "coco2017"]) == "mixed"


ANNOTATION_FILES = [
    ("instances_val2014.json", "coco2014"), ("/data/annotations/captions_train2017.json", "coco2017"),
    ("chair_objects_trainval2014.jsonl", "coco2014"), ("val2014.json", "coco2014"),
    ("C:\\ann\\instances_val2017.json", "coco2017"), ("instances.json", None),
    ("data_2014.json", None), ("val20140.json", None), ("val2014/instances.json", None),
    ("INSTANCES_VAL2014.JSON", "coco2014"), ("C:\\ann\\val2014.json", "coco2014"),
    # only the file's own name is evidence, not a folder's
    ("/data/x_val2014.d/instances.json", None), ("C:\\data\\x_val2014.d\\instances.json", None),
]


@pytest.mark.parametrize("path, expected", ANNOTATION_FILES, ids=_ids(ANNOTATION_FILES))
def test_annotation_namespace_from_the_file_name(path, expected):
    assert annotation_namespace(path) == expected


def test_require_image_id_names_the_value_file_and_row(tmp_path):
    from capaudit.errors import InputError

    assert require_image_id("42") == 42
    with pytest.raises(InputError) as err:
        require_image_id(1.5, what="cocoid", path=tmp_path / "k.json", row=3)
    msg = str(err.value)
    assert "k.json, row 3: cocoid 1.5 is not an integer image id" in msg
    assert msg.endswith("(fix: ids are whole numbers of 0 to 18 ASCII digits (no fractions, "
                        "booleans, names or leading zeros))")
    # the value as repr() shows it, whole up to 40 characters, else its first 37 and "..."
    for value, shown in (("x" * 38, repr("x" * 38)), ("x" * 39, "'" + "x" * 36 + "..."),
                         ("x" * 50, "'" + "x" * 36 + "...")):
        with pytest.raises(InputError) as err:
            require_image_id(value)
        assert f"image_id {shown} is not" in str(err.value), value


def test_an_info_block_in_prose_or_with_parsed_values():
    # an em dash is U+2014: escaped to ASCII it would read as the year 2014
    assert document_namespace({"description": "COCO \u2014 the 2017 split"}, []) == "coco2017"
    # a streamed reader's numbers (Decimal) and a date: read as text, never a crash
    from datetime import datetime
    from decimal import Decimal

    info = {"version": Decimal("1.0"), "date_created": datetime(2017, 9, 1),
            "description": "COCO"}
    assert document_namespace(info, []) == "coco2017"
