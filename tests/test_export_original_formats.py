"""``sets export --to original`` for parquet and CSV/TSV sets (#36 point 5): the same schema
(metadata included) and row order, the same delimiter, header and quoting; untouched rows as
they were; revised captions and dropped rows derived by hand from the evidence
(:mod:`shard_fixtures`). Also the changes listing: edits, not whole captions."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capaudit.filters.runner import run_filter
from capaudit.io.export import export_set
from capaudit.io.ingest import add_caption_set
from shard_fixtures import CAPTIONS, write_evidence


def _filter(store, tmp_path, name="s"):
    run_filter(store, name, "hallucination",
               {"chair_gt": str(write_evidence(tmp_path / "gt.jsonl"))}, out="f")


def test_parquet_set_back_with_its_schema_and_order(store, tmp_path):
    rows = CAPTIONS * 2
    table = pa.table({"image_id": [r[0] for r in rows], "caption": [r[1] for r in rows],
                      "url": [f"http://x/{i}.jpg" for i in range(len(rows))],
                      "size": pa.array([[i, i + 1] for i in range(len(rows))],
                                       pa.list_(pa.int16()))})
    table = table.replace_schema_metadata({b"made_by": b"test"})
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=4)
    add_caption_set(store, "s", tmp_path / "in.parquet")
    export_set(store, "s", "original", tmp_path / "same.parquet")
    assert pq.read_table(tmp_path / "same.parquet").equals(table)
    _filter(store, tmp_path)
    export_set(store, "f", "original", tmp_path / "out.parquet")
    got = pq.read_table(tmp_path / "out.parquet")
    assert got.schema == table.schema and got.schema.metadata == {b"made_by": b"test"}
    kept = [i for i, r in enumerate(rows) if r[2] is not None]
    assert got.column("caption").to_pylist() == [rows[i][2] for i in kept]
    assert got.column("url").to_pylist() == [f"http://x/{i}.jpg" for i in kept]
    assert got.column("size").to_pylist() == [[i, i + 1] for i in kept]


@pytest.mark.parametrize("delimiter,header,quote_all", [(",", True, False), ("\t", True, True),
                                                        (",", False, False)])
def test_csv_set_back_with_its_delimiter_header_and_quoting(store, tmp_path, delimiter, header,
                                                            quote_all):
    import csv
    import io

    # a quoted note spanning two lines (DuckDB's sniffer needs a header to read those)
    second = "\nsecond line" if header else " second part"
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter=delimiter, lineterminator="\r\n",
                        quoting=csv.QUOTE_ALL if quote_all else csv.QUOTE_MINIMAL)
    if header:
        writer.writerow(["image_id", "caption", "note"])
    # no header: the image is a COCO file name (what tells a data row from a header)
    image = (lambda i: i) if header else (lambda i: f"COCO_val2014_{i:012d}.jpg")
    for iid, cap, _ in CAPTIONS:
        writer.writerow([image(iid), cap, f"note, {iid}{second}"])
    suffix = ".tsv" if delimiter == "\t" else ".csv"
    src = tmp_path / ("in" + suffix)
    src.write_text(buf.getvalue(), newline="")
    cols = {} if header else {"id_col": "column0", "caption_col": "column1"}
    add_caption_set(store, "s", src, **cols)
    export_set(store, "s", "original", tmp_path / ("same" + suffix))
    assert (tmp_path / ("same" + suffix)).read_bytes() == src.read_bytes()
    _filter(store, tmp_path)
    out = export_set(store, "f", "original", tmp_path / ("out" + suffix))
    want = io.StringIO()
    writer = csv.writer(want, delimiter=delimiter, lineterminator="\r\n",
                        quoting=csv.QUOTE_ALL if quote_all else csv.QUOTE_MINIMAL)
    if header:
        writer.writerow(["image_id", "caption", "note"])
    for iid, cap, new in CAPTIONS:
        if new is not None:
            writer.writerow([image(iid), new, f"note, {iid}{second}"])
    assert out.read_bytes() == want.getvalue().encode()


def test_the_changes_listing_gives_edits_not_whole_captions(store, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"image_id": iid, "caption": cap}) + "\n"
                            for iid, cap, _ in CAPTIONS))
    add_caption_set(store, "s", path)
    _filter(store, tmp_path)
    export_set(store, "f", "original", tmp_path / "out.jsonl")
    log = [json.loads(x) for x in open(tmp_path / "out.jsonl.changes.jsonl")]
    assert [(e["record"], e["action"]) for e in log] == [(0, "revised"), (2, "dropped"),
                                                         (3, "revised")]
    for e in log:
        before = CAPTIONS[e["record"]][1]
        if e["action"] == "dropped":
            assert e["chars"] == len(before) and "before" not in e
            continue
        text = before
        for at, removed, inserted in reversed(e["edits"]):
            assert text[at:at + len(removed)] == removed
            text = text[:at] + inserted + text[at + len(removed):]
        assert text == CAPTIONS[e["record"]][2]
    assert log[0]["edits"] == [[24, " A giraffe stands nearby.", ""]]
