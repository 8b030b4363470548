"""``audit capability --annotations/--qa``: an empty file, or a row whose image id is not a
number, is one line naming the file (the row) and a fix; the two lines named no fix, and an
empty ``--qa`` file was called "no annotations"."""

from __future__ import annotations

import pytest

from capaudit.errors import InputError
from capaudit.judge.capability import read_inputs

ELEMENT = '{"image_id": 1, "dimension": "object", "element": "a dog"}\n'


@pytest.mark.parametrize("key, text, said", [
    ("annotations", "", "no rows"),
    ("qa", "", "no rows"),
    ("annotations", '{"image_id": "x", "dimension": "object", "element": "a dog"}\n',
     "row 1: image_id is not an integer"),
])
def test_an_empty_file_or_a_bad_id_is_one_line_with_a_fix(key, text, said, tmp_path):
    (tmp_path / "el.jsonl").write_text(ELEMENT)
    (tmp_path / "bad.jsonl").write_text(text)
    cfg = {"annotations": str(tmp_path / "el.jsonl"), key: str(tmp_path / "bad.jsonl")}
    with pytest.raises(InputError) as got:
        read_inputs(cfg)
    line = str(got.value)
    assert "bad.jsonl" in line and said in line and "(fix: " in line, line
    assert "\n" not in line
    if key == "qa":
        assert "annotations" not in line and "correct" in line, line


@pytest.mark.parametrize("key", ["annotations", "qa"])
def test_a_missing_file_is_named_by_the_option_that_gave_it(key, tmp_path):
    """A missing --qa file was "annotation file not found" (so the user looked at the wrong
    file); each is named by its own option."""
    (tmp_path / "el.jsonl").write_text(ELEMENT)
    cfg = {"annotations": str(tmp_path / "el.jsonl"), key: str(tmp_path / "gone.jsonl")}
    with pytest.raises(InputError) as got:
        read_inputs(cfg)
    line = str(got.value)
    assert f"gone.jsonl: --{key} file not found" in line, line
    assert f"(fix: pass --{key} an existing JSONL file" in line, line
