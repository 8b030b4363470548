"""Three published layouts no other test reads, tried as a new user would (#23): Google's
Localized Narratives (COCO split), TextCaps and Conceptual Captions. Each file is written in
the layout its project documents."""

from __future__ import annotations

import json

import pytest

from capaudit.audit.annotation_coverage import target_images
from capaudit.errors import InputError
from capaudit.io.export_original import export_original
from capaudit.io.ingest import add_caption_set
from capaudit.io.targets import resolve_target

# coco_val_localized_narratives.jsonl: one object per line; image_id a string; the val2017
# ids are COCO 2014 ids (6497, 6701 and 1176 are val2014 images)
LN_IDS = ["6497", "6701", "1176"]


def write_localized_narratives(path) -> bytes:
    lines = []
    for k, iid in enumerate(LN_IDS):
        rec = {"dataset_id": "mscoco_val2017", "image_id": iid, "annotator_id": 93 + k,
               "caption": "In this image we can see a person. In the background there is a "
                          "wall.",
               "timed_caption": [{"utterance": "In this", "start_time": 0.0, "end_time": 0.4},
                                 {"utterance": "image", "start_time": 0.4, "end_time": 0.9}],
               "traces": [[{"x": 0.2086, "y": -0.0533, "t": 0.022},
                           {"x": 0.2111, "y": -0.0439, "t": 0.056}]],
               "voice_recording": f"coco_val/coco_val_{iid}_{93 + k}.ogg"}
        lines.append(json.dumps(rec))
    raw = ("\n".join(lines) + "\n").encode()
    path.write_bytes(raw)
    return raw


def test_localized_narratives_dataset_id_names_coco2017_on_both_paths(store, tmp_path):
    # before: "ids: unassigned" (bare numbers), though every record says mscoco_val2017
    path = tmp_path / "coco_val_localized_narratives.jsonl"
    raw = write_localized_narratives(path)
    info = add_caption_set(store, "ln", path).info
    assert (info.namespace, info.n_captions, info.n_images) == ("coco2017", 3, 3)
    direct = {ns for _, _, ns in target_images(store, resolve_target(store, str(path)))}
    assert direct == {"coco2017"}
    out, _ = export_original(store, "ln", tmp_path / "back.jsonl")
    assert out.read_bytes() == raw


def test_a_dataset_column_that_names_no_known_dataset_is_no_evidence(store, tmp_path):
    path = tmp_path / "ade20k_localized_narratives.jsonl"
    path.write_text(json.dumps({"dataset_id": "ADE20k", "image_id": "17",
                                "caption": "In this picture we can see a room."}) + "\n")
    assert add_caption_set(store, "ade", path).info.namespace is None


def test_a_key_that_names_another_dataset_outweighs_the_dataset_column(store, tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps({"dataset_id": "mscoco_val2017", "caption": "a dog",
                                "image_id": "flickr30k_images/1000092795.jpg"}) + "\n")
    assert add_caption_set(store, "mixed", path).info.namespace == "flickr30k"


def write_textcaps(path) -> None:
    data = [{"image_id": "011e7e629fb9ae7b", "image_classes": ["Vehicle", "Car"],
             "flickr_original_url": "https://farm2.staticflickr.com/1/2_011e7e629f_o.jpg",
             "flickr_300k_url": "https://c2.staticflickr.com/2/1/2_011e7e629f_z.jpg",
             "image_width": 1024, "image_height": 683, "set_name": "val",
             "image_name": "011e7e629fb9ae7b", "image_path": "train/011e7e629fb9ae7b.jpg",
             "caption_id": 5, "caption_str": "a car with the license plate 7xr 221",
             "caption_tokens": ["<s>", "a", "car", "</s>"],
             "reference_strs": ["a car with the license plate 7xr 221"],
             "reference_tokens": [["<s>", "a", "car", "</s>"]]}]
    path.write_text(json.dumps({"dataset_type": "val", "dataset_name": "textcaps",
                                "dataset_version": "0.1", "data": data}))


@pytest.mark.parametrize("caption_col", [None, "caption_str"])
def test_textcaps_names_where_its_records_are(store, tmp_path, caption_col):
    # before: "no caption column found (columns: dataset_type, dataset_name, ..., data)";
    # with --caption-col caption_str: "no column 'caption_str'", though the file has one
    path = tmp_path / "TextCaps_0.1_val.json"
    write_textcaps(path)
    with pytest.raises(InputError) as err:
        add_caption_set(store, "textcaps", path, caption_col=caption_col)
    text = str(err.value)
    assert "under 'data'" in text and "caption_str" in text
    assert "jq -c '.data[]'" in text and "--caption-col caption_str" in text


GCC_ROWS = [("author and illustrator attends the premiere",
             "http://i.pinimg.com/736x/57/1c/37/571c375fad.jpg"),
            ("a dog runs on the beach", "http://www.dogbreedslist.info/uploads/2017/04/139.jpg"),
            ("the kitchen of a modern apartment",
             "https://media.gettyimages.com/photos/kitchen-picture-id5132.jpg")]


def write_gcc(path, rows=GCC_ROWS) -> None:
    path.write_text("".join(f"{cap}\t{url}\n" for cap, url in rows))


def test_conceptual_captions_tsv_has_no_header(store, tmp_path):
    # before: the first caption and URL were taken for column names; the first row was lost
    path = tmp_path / "Validation_GCC-1.1.0-Validation.tsv"
    write_gcc(path)
    with pytest.raises(InputError, match="no header row"):
        add_caption_set(store, "gcc", path)
    info = add_caption_set(store, "gcc", path, caption_col="column0", id_col="column1").info
    assert (info.n_captions, info.n_images) == (3, 3)
    rows = store.con.execute("SELECT image_key, caption, namespace FROM captions "
                             "WHERE set_id = ? ORDER BY row_idx", [info.set_id]).fetchall()
    assert [r[:2] for r in rows] == [(url, cap) for cap, url in GCC_ROWS]
    # a web URL names its image by the whole URL (#36.3): no id from its trailing 139.jpg,
    # so no namespace either (before #36: "path:www.dogbreedslist.info", id 139)
    assert rows[1][2] is None
    assert store.con.execute("SELECT count(image_id) FROM captions WHERE set_id = ?",
                             [info.set_id]).fetchone()[0] == 0


def test_headerless_tsv_error_names_the_file_line(store, tmp_path):
    path = tmp_path / "Validation_GCC-1.1.0-Validation.tsv"
    write_gcc(path, [*GCC_ROWS[:1], ("   ", GCC_ROWS[1][1])])
    with pytest.raises(InputError, match="line 2|row 2"):
        add_caption_set(store, "gcc", path, caption_col="column0", id_col="column1")


def test_two_web_images_with_one_number_are_two_images(store, tmp_path):
    # before: "2 captions of 1 images", the web URL's 139.jpg in a namespace named "http:"
    path = tmp_path / "urls.csv"
    path.write_text("caption,url\n"
                    f"{GCC_ROWS[1][0]},{GCC_ROWS[1][1]}\n"
                    "a kitchen,http://images.cocodataset.org/val2014/COCO_val2014_000000000139.jpg\n")
    info = add_caption_set(store, "urls", path).info
    assert (info.n_captions, info.n_images) == (2, 2)
    spaces = store.con.execute("SELECT namespace FROM captions WHERE set_id = ? ORDER BY "
                               "row_idx", [info.set_id]).fetchall()
    assert spaces == [(None,), ("coco2014",)]   # COCO's own server: a COCO file name


def test_sets_add_says_text_ids_join_nothing_as_show_does(tmp_path, capsys):
    # before: "added ...(jsonl; ids: unassigned)" while `sets show` said "ids none (text or
    # row keys: never joined with annotations)" for the same TextCaps records
    from capaudit.cli.main import main

    path = tmp_path / "textcaps_records.jsonl"
    write_textcaps(tmp_path / "TextCaps_0.1_val.json")
    records = json.loads((tmp_path / "TextCaps_0.1_val.json").read_text())["data"]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    db = str(tmp_path / "s.duckdb")
    assert main(["sets", "add", "tc", str(path), "--caption-col", "caption_str",
                 "--db", db]) == 0
    out = capsys.readouterr().out
    assert "1 captions of 1 images (jsonl; ids: none)" in " ".join(out.split())
