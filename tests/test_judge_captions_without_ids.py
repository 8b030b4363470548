"""Captions without an image id (named by image files that are no COCO ids) given to a
judged command: one line saying how many captions of which set have no id, with a fix that
names what gives one. It said "1 image(s) not found for the VLM judge, first image id (a
caption without image id) (fix: put the images there ...)" whatever their number, with the
images right there; the same "1 image(s) have no caption in the reference set" for a
text-only judge."""

from __future__ import annotations

import json

import pytest

from capaudit.cli.main import main


@pytest.mark.parametrize("evidence", ["image", "reference-captions"])
def test_captions_without_image_ids_are_one_line_naming_their_count(evidence, tmp_path,
                                                                    capsys):
    from PIL import Image

    (tmp_path / "img").mkdir()
    for name in ("cat", "dog"):
        Image.new("RGB", (8, 8), (9, 9, 9)).save(tmp_path / "img" / f"{name}.jpg")
    (tmp_path / "named.jsonl").write_text("".join(
        json.dumps({"image": f"{n}.jpg", "caption": f"A {n} sits on a mat."}) + "\n"
        for n in ("cat", "dog", "cat", "dog", "cat")))
    (tmp_path / "ref.jsonl").write_text('{"image_id": 1, "caption": "A cat."}\n')
    extra = ["--images", tmp_path / "img"] if evidence == "image" else \
        ["--evidence", evidence, "--reference", tmp_path / "ref.jsonl"]
    rc = main([str(a) for a in ["audit", "factuality", tmp_path / "named.jsonl", *extra,
                                "--judge-url", "http://127.0.0.1:9/v1", "--judge-model", "j",
                                "--db", tmp_path / "s.duckdb"]])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "5 caption(s) of 'named' have no image id (first: caption 1)" in err, err
    assert "not found" not in err and "give each caption its image id" in err, err
