"""Ids that never merge two images, and one count of images everywhere (#36.3-4, #33.11).

Expected ids are written out by hand; the SQL twin of the id rule is checked against the
same hand-written table, not against the Python function."""

from __future__ import annotations

import json

import duckdb
import pytest

from capaudit.errors import InputError
from capaudit.io.imageids import SQL_PARSE_IMAGE_ID, parse_image_id
from capaudit.io.ingest import add_caption_set
from test_hostile import cli, one_line_error

# (value, the image id it names, by hand)
IDS = [("391895", 391895), (" 12 ", 12), ("0", 0),
       ("000000391895", 391895),              # COCO's 12-digit padding (2017 file stems)
       ("0801961485534636", None),            # Open Images key: a leading zero, 16 digits
       ("000000012", None),                   # img2dataset's row number, not image 12
       ("0a1b2c3d4e5f6071", None), ("012", None), ("00", None),
       ("１２３", None), ("12３", None),         # full-width digits: not ASCII
       ("+12", None), ("-3", None), ("3.0", None), ("1e3", None),
       ("COCO_val2014_000000391895.jpg", 391895), ("coco/train2017/000000000009.jpg", 9),
       ("https://i.vimeocdn.com/videos/1000/thumb/1.jpg", None),   # a URL: the whole URL
       ("http://example.com/img/123.jpg", None),
       ("http://images.cocodataset.org/val2017/000000397133.jpg", 397133),  # COCO's server
       ("http://x.org/a/COCO_val2014_000000000042.jpg", 42)]


@pytest.mark.parametrize("value,expected", IDS)
def test_one_id_rule_python(value, expected):
    assert parse_image_id(value) == expected


def test_one_id_rule_sql_twin_agrees_with_the_hand_table():
    con = duckdb.connect()
    sql = SQL_PARSE_IMAGE_ID.format(col="v")
    got = [con.execute(f"SELECT {sql} FROM (SELECT ?::VARCHAR AS v)", [v]).fetchone()[0]
           for v, _ in IDS]
    assert got == [e for _, e in IDS]


def test_numbers_that_are_no_ids():
    assert parse_image_id(3.0) is None and parse_image_id(True) is None
    assert parse_image_id(10**18) is None and parse_image_id(7) == 7


def _tsv(path, rows):
    path.write_text("caption\turl\n" + "".join(f"{c}\t{u}\n" for c, u in rows))
    return path


def _thumbs(n: int = 89, repeat: int = 11) -> list[tuple[str, str]]:
    """``n`` different video thumbnails, all named ``.../thumb/1.jpg`` (Conceptual Captions
    has 89 of them), the first ``repeat`` captioned twice: n images, n + repeat captions."""
    urls = [f"https://i.vimeocdn.com/videos/{4000 + 17 * i}/thumb/1.jpg" for i in range(n)]
    rows = [(f"a thumbnail of a video number {i} about cooking pasta", u)
            for i, u in enumerate(urls)]
    return rows + [(f"another caption {i} of the same video still", urls[i])
                   for i in range(repeat)]


def test_url_images_one_count_in_every_output(tmp_path, capsys):
    src = _tsv(tmp_path / "gcc.tsv", _thumbs())
    db = tmp_path / "u.duckdb"
    code, out, _ = cli(["sets", "add", "gcc", src, "--id-col", "url", "--db", db], capsys)
    # before: 89 thumbnails were image 1 of namespace path:i.vimeocdn.com
    assert code == 0 and "100 captions of 89 images" in out
    code, out, _ = cli(["sets", "show", "gcc", "--db", db], capsys)
    assert "images 89 " in out and "with an integer id 0 " in out
    code, out, _ = cli(["sets", "list", "--db", db], capsys)
    assert "│ 100 │ 89 │" in " ".join(out.split())
    out_json = tmp_path / "r.json"
    code, out, err = cli(["audit", "run", "gcc", "--metrics", "length,vocab", "--json",
                          out_json, "--db", db], capsys)
    text = " ".join(out.split())
    # the header, the table's images column, each value's n: 89 (before: 14,922 and 172)
    assert code == 0 and "gcc: 89 images" in text, err
    assert "│ gcc │ 100 │ 89 │" in text
    res = json.loads(out_json.read_text())
    assert res["coverage"]["gcc"]["n_images"] == 89
    assert [res["sets"]["gcc"][m]["n_images"] for m in ("length", "vocab")] == [89, 89]


def test_string_keyed_set_counts_its_images_in_the_table(tmp_path, capsys):
    # Open Images hex keys; two captions share an image: 3 images, 4 captions
    src = tmp_path / "oi.jsonl"
    rows = [("0801961485534636", "a red car by a wall"), ("00ff12ab34cd56ef", "a blue car"),
            ("0801961485534636", "a car parked outside"), ("1a2b3c4d5e6f7a8b", "a cat")]
    src.write_text("".join(json.dumps({"image_id": k, "caption": c}) + "\n" for k, c in rows))
    db = tmp_path / "o.duckdb"
    code, out, _ = cli(["sets", "add", "oi", src, "--db", db], capsys)
    assert code == 0 and "4 captions of 3 images" in out
    code, out, _ = cli(["audit", "run", "oi", "--metrics", "length", "--db", db], capsys)
    # before: the images column said 0 for string-keyed sets (and 801961485534636 was an id)
    text = " ".join(out.split())
    assert code == 0 and "│ oi │ 4 │ 3 │" in text and "n=3" in text
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT image_key, image_id FROM captions ORDER BY row_idx").fetchall() \
        == [(k, None) for k, _ in rows]


def test_captions_of_one_keyed_image_are_one_bootstrap_unit():
    from capaudit.audit.engine import audit_stream
    from capaudit.io.imageids import image_units

    # two images named by text, three and one captions: 2 units, not 4
    units = image_units([None] * 4, ["a.jpg", "a.jpg", "b.jpg", "a.jpg"])
    assert units[0] == units[1] == units[3] != units[2] and None not in units
    res = audit_stream(zip(units, ["a dog", "a dog on a mat", "a cat", "two dogs"]), None,
                       metrics=["length"], n_boot=50, workers=1)
    assert (res.meta["n_images"], res.results["length"].n_images) == (2, 2)


def test_full_width_digits_never_join_a_coco_image(store, tmp_path):
    # before: the Python readers took "３９１８９５" (and "３９１８９５.jpg") for image 391895
    conv = [{"from": "human", "value": "<image>"}, {"from": "gpt", "value": "a man on a bike"}]
    files = {"fw.jsonl": json.dumps({"image_id": "３９１８９５", "caption": "a man"}) + "\n",
             "fw_s4v.json": json.dumps([{"id": "1", "image": "coco/train2017/３９１８９５.jpg",
                                         "conversations": conv},
                                        {"id": "2", "image": "３９１８９５", "conversations": conv}]),
             "fw_fusecap.json": json.dumps({"３９１８９５.jpg": "a man on a bike"})}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        add_caption_set(store, name.split(".")[0], tmp_path / name)
    assert store.sql("SELECT count(*), count(image_id) FROM captions") == [(4, 0)]


GOOD = {"chair-gt": '{"image_id": 7, "objects": ["cat"]}',
        "demographics": '{"image_id": 7, "gender": "female"}',
        "instances": '{"image_id": 7, "categories": ["cat"]}'}


@pytest.mark.parametrize("kind,line", [
    ("chair-gt", '{"image_id": 3.0, "objects": ["dog"]}'),
    ("chair-gt", '{"image_id": "１２３", "objects": ["dog"]}'),
    ("demographics", '{"image_id": 3.0, "gender": "male"}'),
    ("instances", '{"image_id": "0123", "categories": ["dog"]}')])
def test_annotation_files_follow_the_same_id_rule(tmp_path, capsys, kind, line):
    # before: 3.0 read as image 3 and "１２３" as image 123, while captions refused them
    src = tmp_path / f"{kind}.jsonl"
    src.write_text(GOOD[kind] + "\n" + line + "\n")
    code, _, err = cli(["annotations", "add", kind, src, "--db", tmp_path / "a.duckdb"], capsys)
    msg = one_line_error(err)
    assert code == 2 and "row 2" in msg and "is not an integer image id" in msg


def test_coco_file_with_images_null_is_refused(tmp_path, capsys):
    src = tmp_path / "captions.json"
    src.write_text(json.dumps({"images": None, "annotations": [
        {"image_id": 1, "id": 1, "caption": "a cat"}]}))
    code, _, err = cli(["sets", "add", "c", src, "--db", tmp_path / "c.duckdb"], capsys)
    assert code == 2 and "'images' is not a list (null)" in one_line_error(err)


def test_url_keys_in_python_readers_too(store, tmp_path):
    src = tmp_path / "results.json"
    src.write_text(json.dumps([{"image": f"https://cdn.example.com/v/{i}/thumb/1.jpg",
                                "caption": f"a video still number {i}"} for i in range(3)]))
    info = add_caption_set(store, "u", src, id_col="image").info
    assert info.n_images == 3
    assert store.sql("SELECT count(image_id) FROM captions") == [(0,)]
