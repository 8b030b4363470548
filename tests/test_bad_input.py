"""Bad input ends with one clear line on stderr, exit code 2, and an unchanged store."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from capaudit.cli.main import main


def run_cli(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def db_with_set(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    good = tmp_path / "good.jsonl"
    good.write_text('{"image_id": 1, "caption": "a dog on a couch"}\n')
    assert run_cli(["sets", "add", "good", str(good), "--db", str(db)], capsys)[0] == 0
    return db


def _snapshot(db):
    import duckdb
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT (SELECT count(*) FROM captions), "
                           "(SELECT list(name ORDER BY name) FROM caption_sets)").fetchall()
    finally:
        con.close()


CASES = {
    "malformed_json": ('{"image_id": 1, "caption": "ok"}\n{"image_id": 2, "caption": \n',
                       "bad.jsonl", ["row 2", "malformed JSON"]),
    "missing_column": ('{"image_id": 1, "text2": "ok"}\n', "nocap.jsonl",
                       ["no caption column", "--caption-col"]),
    "empty_caption": ('{"image_id": 1, "caption": "ok"}\n{"image_id": 2, "caption": "  "}\n',
                      "empty.jsonl", ["row 2", "empty or missing caption"]),
    "null_caption": ('{"image_id": 1, "caption": null}\n', "null.jsonl",
                     ["row 1", "empty or missing caption"]),
    "unknown_image": ('{"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": '
                      '[{"image_id": 1, "caption": "x"}, {"image_id": 7, "caption": "y"}]}',
                      "coco.json", ["row 2", "unknown image id 7"]),
    "malformed_document": ('{"images": [], "annotations": [', "broken.json",
                           ["malformed JSON at line 1"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_files(case, tmp_path, db_with_set, capsys):
    text, name, expected = CASES[case]
    bad = tmp_path / name
    bad.write_text(text)
    before = _snapshot(db_with_set)
    code, out, err = run_cli(["sets", "add", "x", str(bad), "--db", str(db_with_set)], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(bad) in lines[0]
    for part in expected:
        assert part in lines[0]
    assert _snapshot(db_with_set) == before


def test_non_utf8(tmp_path, db_with_set, capsys):
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes('{"image_id": 1, "caption": "ok"}\n{"image_id": 2, "caption": "caf\xe9"}\n'
                    .encode("latin-1"))
    before = _snapshot(db_with_set)
    code, _, err = run_cli(["sets", "add", "x", str(bad), "--db", str(db_with_set)], capsys)
    assert code == 2 and "UTF-8" in err and "row 2" in err and len(err.strip().splitlines()) == 1
    assert _snapshot(db_with_set) == before


def test_pickle_refused_never_loaded(tmp_path, db_with_set, capsys):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    bad = tmp_path / "caps.pkl"
    bad.write_bytes(pickle.dumps(Evil()))
    code, _, err = run_cli(["sets", "add", "x", str(bad), "--db", str(db_with_set)], capsys)
    assert code == 2 and "pickle" in err and not marker.exists()
    # also when disguised under another suffix
    disguised = tmp_path / "caps.json"
    disguised.write_bytes(pickle.dumps({"a": 1}))
    code, _, err = run_cli(["sets", "add", "x", str(disguised), "--db", str(db_with_set)], capsys)
    assert code == 2 and "pickle" in err


def test_duplicate_name_unknown_format_missing_path(tmp_path, db_with_set, capsys):
    other = tmp_path / "other.jsonl"
    other.write_text('{"image_id": 3, "caption": "a cat"}\n')
    code, _, err = run_cli(["sets", "add", "good", str(other), "--db", str(db_with_set)], capsys)
    assert code == 2 and "already exists" in err and "--replace" in err
    code, _, err = run_cli(["sets", "add", "y", str(other), "--format", "jsonlx",
                            "--db", str(db_with_set)], capsys)
    assert code == 2 and "did you mean 'jsonl'" in err
    code, _, err = run_cli(["sets", "add", "y", str(tmp_path / "nope.jsonl"),
                            "--db", str(db_with_set)], capsys)
    assert code == 2 and "no such file" in err
    code, _, err = run_cli(["sets", "show", "goood", "--db", str(db_with_set)], capsys)
    assert code == 2 and "did you mean 'good'" in err
    code, _, err = run_cli(["query", "SELECT * FROM nope", "--db", str(db_with_set)], capsys)
    assert code == 2 and "query failed" in err


def test_wrong_column_in_annotations(tmp_path, db_with_set, capsys):
    bad = tmp_path / "demo.jsonl"
    bad.write_text('{"image_id": 1, "gender": "male"}\n{"image_id": 2, "gender": "robot"}\n')
    code, _, err = run_cli(["annotations", "add", "demographics", str(bad),
                            "--db", str(db_with_set)], capsys)
    assert code == 2 and "row 2" in err and "unknown gender" in err


def test_console_script_exit_code(tmp_path):
    """The installed entry point (a real process) prints no traceback."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json}\n")
    proc = subprocess.run([sys.executable, "-m", "capaudit.cli.main", "sets", "add", "x",
                           str(bad), "--db", str(tmp_path / "d.duckdb")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "row 1" in proc.stderr
