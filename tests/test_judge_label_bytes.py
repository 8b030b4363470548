"""Label and annotation files of the judged commands that are not UTF-8 or not JSON: one
line naming the file, the row and the fix, exit 2 (they used to end in a UnicodeDecodeError
traceback from ``Path.read_text``)."""

from __future__ import annotations

import pytest

from capaudit.cli.main import main
from capaudit.errors import InputError
from capaudit.judge.capability import read_elements
from capaudit.judge.validate import read_labels

GOOD_LABEL = b'{"image_id": 9, "caption": "a dog.", "sentence_idx": 0, "label": 1}\n'
GOOD_ELEMENT = b'{"image_id": 9, "dimension": "object", "element": "dog"}\n'


@pytest.mark.parametrize("reader, good", [(read_labels, GOOD_LABEL),
                                          (read_elements, GOOD_ELEMENT)])
def test_latin1_line_is_named_by_its_row(tmp_path, reader, good):
    path = tmp_path / "labels.jsonl"
    path.write_bytes(good + b"\n" + good.replace(b"dog", b"caf\xe9"))   # row 3: latin-1
    with pytest.raises(InputError) as err:
        reader(path)
    assert str(err.value) == f"{path}, row 3: not valid UTF-8 (fix: re-encode the file as UTF-8)"


@pytest.mark.parametrize("reader, good", [(read_labels, GOOD_LABEL),
                                          (read_elements, GOOD_ELEMENT)])
def test_cut_json_line_is_named_by_its_row(tmp_path, reader, good):
    path = tmp_path / "labels.jsonl"
    path.write_bytes(good + good[:20] + b"\n")
    with pytest.raises(InputError, match=r"labels\.jsonl, row 2: malformed JSON"):
        reader(path)


def test_good_lines_still_read(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_bytes(GOOD_LABEL + b"\n" + GOOD_LABEL.replace(b'"label": 1', b'"label": 0'))
    rows, ties = read_labels(path)
    assert [r["y"] for r in rows] == [1, 0] and ties == 0
    path.write_bytes(GOOD_ELEMENT)
    assert read_elements(path)[0]["image_id"] == 9


def test_latin1_csv_labels_exit_2_in_one_line(tmp_path, capsys):
    path = tmp_path / "labels.csv"
    path.write_bytes(b"image_id,caption,sentence_idx,label\n9,caf\xe9,0,1\n")   # 36 + 5: byte 41
    code = main(["judge", "validate", "--labels", str(path), "--db", str(tmp_path / "x.duckdb"),
                 "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1
    assert err.endswith(f"{path}: not valid UTF-8 (byte 41) (fix: re-encode the file as UTF-8)")
