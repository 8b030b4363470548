"""Messages that sent a newcomer the wrong way (issue 46, point 6), each checked word for word.

The filter's message on a set of another dataset is in ``test_foreign_ids.py``.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capaudit.cli.main import main


def _run(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in args])
    got = capsys.readouterr()
    return code, " ".join(got.out.split()), " ".join(got.err.split())


def test_json_formats_on_an_indented_object_say_what_they_want(tmp_path, capsys):
    # the CHAIR script's output: an indented object, not a list of records
    path = tmp_path / "chair_out.json"
    path.write_text(json.dumps({"sentences": [{"image_id": 391895, "caption": "a man"}],
                                "overall_metrics": {"CHAIRs": 0.1}}, indent=2))
    db = tmp_path / "s.duckdb"
    code, _, err = _run(capsys, "sets", "add", "x", path, "--format", "json", "--db", db)
    assert code == 2 and err == (
        f"capaudit: error: {path}: --format json wants a JSON list of records with an id and "
        "a caption field; the file is one JSON object with keys sentences, overall_metrics "
        "(fix: give the list of records (as a file of its own, or JSONL), or --format auto to "
        "have the layout recognised)")
    code, _, err = _run(capsys, "sets", "add", "x", path, "--format", "coco-results", "--db", db)
    assert code == 2 and "--format coco-results wants a JSON list of {\"image_id\", " \
        "\"caption\"} records (COCO results); the file is one JSON object" in err
    assert "one JSON object per line" not in err
    # JSONL given as --format json is still read; a damaged document names its line
    lines = tmp_path / "l.json"
    lines.write_text('{"image_id": 1, "caption": "a dog"}\n{"image_id": 2, "caption": "a cat"}\n')
    assert _run(capsys, "sets", "add", "l", lines, "--format", "json", "--db", db)[0] == 0
    broken = tmp_path / "b.json"
    broken.write_text('{"image_id": 1,\n "caption": "a dog"\n')
    code, _, err = _run(capsys, "sets", "add", "b", broken, "--format", "json", "--db", db)
    assert code == 2 and "malformed JSON at line 3, column 1" in err


def test_a_write_refused_names_the_flag(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    src = tmp_path / "c.jsonl"
    src.write_text('{"image_id": 1, "caption": "a dog"}\n')
    assert _run(capsys, "sets", "add", "c", src, "--db", db)[0] == 0
    code, _, err = _run(capsys, "query", "DELETE FROM captions", "--db", db)
    assert code == 2 and err == (
        "capaudit: error: query refused: the store is opened read-only and this statement "
        "(DELETE) would change it (fix: capaudit query --write \"...\" allows statements that "
        "modify the store (copy the .duckdb file first: there is no undo))")
    assert _run(capsys, "query", "DELETE FROM captions WHERE image_id = 7", "--write",
                "--db", db)[0] == 0


def test_re_adding_with_another_namespace_says_what_differs(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    src = tmp_path / "c.jsonl"
    src.write_text('{"image_id": 391895, "caption": "a man on a bike"}\n')
    assert _run(capsys, "sets", "add", "c", src, "--db", db)[0] == 0
    code, _, err = _run(capsys, "sets", "add", "c", src, "--namespace", "coco2014", "--db", db)
    assert code == 2 and err == (
        "capaudit: error: a caption set named 'c' already exists from the same file with other "
        "options: --namespace coco2014 (was none) (fix: pass --replace to register it again "
        "with these options, or choose another name)")
    src.write_text('{"image_id": 391895, "caption": "a man on a red bike"}\n')
    code, _, err = _run(capsys, "sets", "add", "c", src, "--db", db)
    assert code == 2 and "already exists with other content (the file differs" in err
    code, out, _ = _run(capsys, "sets", "add", "c", src, "--namespace", "coco2014", "--replace",
                        "--db", db)
    assert code == 0 and "ids: coco2014" in out


def test_annotations_re_added_with_another_namespace_say_so(tmp_path, capsys, shared):
    db = tmp_path / "s.duckdb"
    src = tmp_path / "inst.jsonl"          # no split in the name: no namespace of its own
    with shared("data", "coco2014", "instance_categories_val2014.jsonl").open() as fh:
        src.write_text("".join(next(fh) for _ in range(20)))
    add = ["annotations", "add", "instances", src, "--db", db]
    assert _run(capsys, *add)[0] == 0
    assert _run(capsys, *add)[0] == 0                    # the same file again: nothing to do
    code, _, err = _run(capsys, *add, "--namespace", "coco2014")
    assert code == 2 and err == (
        "capaudit: error: annotations named 'instances' already exist from the same file with "
        "namespace none, not coco2014 (fix: pass --replace to store them again with "
        "--namespace coco2014)")
    assert _run(capsys, *add, "--namespace", "coco2014", "--replace")[0] == 0
    assert _run(capsys, *add)[0] == 0                    # no --namespace: the stored one kept
    code, out, _ = _run(capsys, "query", "SELECT namespace FROM annotation_sources",
                        "--print-json", "--db", db)
    assert json.loads(out) == {"namespace": "coco2014"}


def test_an_integer_id_column_is_offered_and_an_image_struct_is_never_the_id(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    caps = ["a dog on a bed", "a cat on a sofa", "a man riding a horse"]
    named = tmp_path / "nsd.parquet"       # NSD-style: stimulus file names and an integer id
    pq.write_table(pa.table({"image": ["shared0001_nsd02951.png", "shared0002_nsd02992.png",
                                       "shared0003_nsd03050.png"],
                             "id": [2950, 2991, 3049], "caption": caps}), named)
    code, out, _ = _run(capsys, "sets", "add", "nsd", named, "--db", db)
    assert code == 0 and "(parquet; ids: none)" in out
    assert ("note: column 'id' holds integer ids in every sampled row and 'image' holds names: "
            "if 'id' names the images, add it again with --id-col id --replace") in out
    code, out, _ = _run(capsys, "sets", "show", "nsd", "--db", db)
    assert code == 0 and "note: column 'id' holds integer ids" in out
    code, out, _ = _run(capsys, "sets", "add", "nsd", named, "--id-col", "id", "--replace",
                        "--db", db)
    assert code == 0 and "ids: unassigned" in out and "note:" not in out
    hf = tmp_path / "hf.parquet"           # a Hugging Face Image feature: {bytes, path}
    pq.write_table(pa.table({"image": [{"bytes": b"\x89PNG", "path": "a.png"}] * 3,
                             "id": [2950, 2991, 3049], "caption": caps}), hf)
    code, out, _ = _run(capsys, "sets", "add", "hf", hf, "--db", db)
    assert code == 0 and "3 captions of 3 images (parquet; ids: unassigned)" in out


@pytest.mark.parametrize("suffix", ["jsonl", "json"])
def test_coco_file_names_propose_the_namespace(tmp_path, capsys, suffix):
    db = tmp_path / "s.duckdb"
    rows = [{"image_id": i, "file_name": f"COCO_val2014_{i:012d}.jpg", "caption": "a dog"}
            for i in (391895, 522418, 184613)]
    path = tmp_path / f"r.{suffix}"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) if suffix == "jsonl"
                    else json.dumps(rows))
    code, out, _ = _run(capsys, "sets", "add", "r", path, "--db", db)
    assert code == 0 and "ids: unassigned" in out
    assert ("note: the 'file_name' field names coco2014 images with the record's id in every "
            "sampled record (3): if every id is a coco2014 image id, add it again with "
            "--namespace coco2014 --replace") in out
    # one file name of another image: no evidence, no proposal
    rows[1]["file_name"] = "COCO_val2014_000000000042.jpg"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) if suffix == "jsonl"
                    else json.dumps(rows))
    code, out, _ = _run(capsys, "sets", "add", "r2", path, "--db", db)
    assert code == 0 and "note:" not in out


def test_metrics_have_n_images_and_status_columns(tmp_path, capsys):
    from capaudit.store.db import Store

    db = tmp_path / "s.duckdb"
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps({"image_id": i // 2, "caption": "a dog on a bed"}) + "\n"
                           for i in range(8)))
    assert _run(capsys, "sets", "add", "c", src, "--db", db)[0] == 0
    assert _run(capsys, "audit", "run", "c", "--metrics", "length", "--n-boot", "10",
                "--db", db)[0] == 0
    code, out, _ = _run(capsys, "query", "SELECT metric, n, n_images, status FROM metrics "
                        "WHERE metric = 'length'", "--print-json", "--db", db)
    # 4 images, under --min-n 30: the status says so in its own column
    assert code == 0 and json.loads(out) == {"metric": "length", "n": 8, "n_images": 4,
                                             "status": "too-few"}
    # a store written before the columns: filled from each row's extra when it is opened
    with Store(db) as store:
        store.con.execute("DELETE FROM meta WHERE key = 'schema_ddl'")
        store.con.execute("ALTER TABLE metrics DROP COLUMN n_images")
        store.con.execute("ALTER TABLE metrics DROP COLUMN status")
    with Store(db) as store:
        assert store.one("SELECT n_images, status FROM metrics WHERE metric = 'length'") == \
            (4, "too-few")
