"""``filter run --shards`` (#31): every format back in its own layout, byte for byte where
nothing changed; the expected captions derived by hand from the evidence
(:mod:`shard_fixtures`)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shard_fixtures import (CAPTIONS, run_cli, tar_members, write_evidence, write_tar)


def _run(tmp_path, src, out, *extra):
    return run_cli("filter", "run", "--shards", src, "--out", out, "--filter", "hallucination",
                   "--chair-gt", write_evidence(tmp_path / "gt.jsonl"),
                   "--db", tmp_path / "s.duckdb", *extra)


@pytest.mark.parametrize("caption_in", ["txt", "json"])
def test_tar_members_preserved_byte_for_byte(tmp_path, caption_in):
    src = write_tar(tmp_path / "in" / "shard-00000.tar", caption_in=caption_in)
    assert _run(tmp_path, tmp_path / "in", tmp_path / "out") == 0
    before, after = tar_members(src), tar_members(tmp_path / "out" / "shard-00000.tar")
    expected = {f"{iid:09d}": kept for iid, _, kept in CAPTIONS}
    want = []
    for m in before:
        key, ext = m[0].split(".", 1)
        if expected[key] is None:
            continue                     # the caption went whole: the sample with its image
        caption_member = ext == caption_in
        if caption_member and caption_in == "txt":
            m = m[:-1] + (expected[key].encode(),)
        elif caption_member:
            meta = json.loads(m[-1])
            assert after[len(want)][:-1] == m[:-1]
            assert json.loads(after[len(want)][-1]) == {**meta, "caption": expected[key]}
            m = after[len(want)]          # the JSON's bytes: checked as JSON above
        want.append(m)
    assert after == want                 # names, modes, mtimes, owners, image bytes, order
    assert sum(1 for m in after if m[0].endswith(".jpg")) == 4


def test_parquet_schema_metadata_and_order_preserved(tmp_path):
    rows = CAPTIONS * 3                  # 15 rows, two row groups
    table = pa.table({"uid": [f"u{i:03d}" for i in range(len(rows))],
                      "image_id": [r[0] for r in rows],
                      "caption": [r[1] for r in rows],
                      "width": pa.array([640 + i for i in range(len(rows))], pa.int32()),
                      "tags": [[f"t{i}"] * (i % 3) for i in range(len(rows))]})
    table = table.replace_schema_metadata({b"origin": b"img2dataset", b"x": b"1"})
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "in" / "part-0.parquet", row_group_size=8,
                   compression="zstd")
    assert _run(tmp_path, tmp_path / "in" / "part-0.parquet", tmp_path / "out") == 0
    got = pq.read_table(tmp_path / "out" / "part-0.parquet")
    assert got.schema == table.schema and got.schema.metadata == table.schema.metadata
    kept = [(i, r) for i, r in enumerate(rows) if r[2] is not None]
    assert got.column("uid").to_pylist() == [f"u{i:03d}" for i, _ in kept]     # order
    assert got.column("caption").to_pylist() == [r[2] for _, r in kept]
    assert got.column("width").to_pylist() == [640 + i for i, _ in kept]
    assert got.column("tags").to_pylist() == [[f"t{i}"] * (i % 3) for i, _ in kept]
    meta = pq.ParquetFile(tmp_path / "out" / "part-0.parquet").metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"


def test_jsonl_and_json_array_records_in_place(tmp_path):
    (tmp_path / "in").mkdir()
    lines = [json.dumps({"image_id": iid, "caption": cap, "extra": [iid, "é"]},
                        ensure_ascii=False) for iid, cap, _ in CAPTIONS]
    (tmp_path / "in" / "a.jsonl").write_text("\n".join(lines) + "\n\n", "utf-8")
    recs = [{"image_id": iid, "caption": cap} for iid, cap, _ in CAPTIONS]
    (tmp_path / "in" / "b.json").write_text(json.dumps(recs, indent=4), "utf-8")
    assert _run(tmp_path, tmp_path / "in", tmp_path / "out") == 0
    out_lines = (tmp_path / "out" / "a.jsonl").read_text("utf-8").split("\n")
    kept = [(line, r) for line, r in zip(lines, CAPTIONS) if r[2] is not None]
    for got, (line, (_, cap, new)) in zip(out_lines, kept):
        if cap == new:
            assert got == line                                  # untouched: byte for byte
        else:
            assert json.loads(got) == {**json.loads(line), "caption": new}
    assert out_lines[len(kept):] == ["", ""]                    # the blank line kept
    want = [{"image_id": iid, "caption": new} for iid, _, new in CAPTIONS if new is not None]
    assert (tmp_path / "out" / "b.json").read_text("utf-8") == json.dumps(want, indent=4)


def test_summary_counts_and_the_log(tmp_path):
    write_tar(tmp_path / "in" / "s.tar")
    assert _run(tmp_path, tmp_path / "in", tmp_path / "out") == 0
    record = json.loads((tmp_path / "out.summary.json").read_text())
    s = record["summary"]
    # by hand: 5 captions, 2+1+1+3+1 = 8 sentences; 3 dropped (giraffe, giraffe, truck), the
    # "It is sunny." after the truck kept but flagged for review; 1 sample gone whole
    assert (s["captions_in"], s["captions_out"], s["sentences_in"]) == (5, 4, 8)
    assert s["sentences_dropped"] == 3 and s["sentences_kept"] == 5
    assert s["actions"] == {"keep": 4, "flag": 1, "revise": 0, "drop": 3}
    assert s["records"] == {"records_in": 5, "records_out": 4, "records_dropped": 1}
    assert s["evidence"]["covered"] == 5 and s["reasons"]["unsupported"] == 3
    assert record["provenance"]["config"]["filter"] == "hallucination"
    log = pq.read_table(tmp_path / "out.log" / "s.tar.log.parquet").to_pylist()
    assert len(log) == 8 and [r["action"] for r in log].count("drop") == 3
    dropped = [(r["record"], r["original"]) for r in log if r["action"] == "drop"]
    assert dropped == [(0, "A giraffe stands nearby."), (2, "A giraffe eats leaves from a tree."),
                       (3, "A truck waits behind them.")]


def test_filter_log_review_export_and_query_read_the_shard_logs(tmp_path, capsys):
    write_tar(tmp_path / "in" / "s.tar")
    assert _run(tmp_path, tmp_path / "in", tmp_path / "out") == 0
    db = tmp_path / "s.duckdb"
    capsys.readouterr()
    assert run_cli("filter", "log", tmp_path / "out", "--all", "--db", db) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "8 sentences = 5 kept + 3 dropped (adds up)" in printed
    assert "truck" in printed and "s.tar#3" in printed
    assert run_cli("filter", "log", tmp_path / "out", "--json", "--db", db) == 0
    counts = json.loads(capsys.readouterr().out)["log_counts"]
    assert counts["ok"] and (counts["captions_in"], counts["captions_out"]) == (5, 4)
    # review: the one caption with a flagged sentence ("It is sunny." after the truck)
    assert run_cli("review", "export", tmp_path / "out", "--out", tmp_path / "r.jsonl",
                   "--db", db) == 0
    rows = [json.loads(x) for x in open(tmp_path / "r.jsonl")]
    assert [(r["shard"], r["record"], r["caption"]) for r in rows] == \
        [("s.tar", 3, "Two people ride bicycles. It is sunny.")]
    capsys.readouterr()
    assert run_cli("query", "SELECT action, count(*) AS n FROM filter_log_shards GROUP BY "
                   "action ORDER BY action", "--csv", "--db", db) == 0
    assert capsys.readouterr().out.split() == ["action,n", "drop,3", "flag,1", "keep,4"]
    # the sandbox still refuses every other file, one beside the logs too
    assert run_cli("query", f"SELECT * FROM read_parquet('{tmp_path / 'in' / 's.tar'}')",
                   "--db", db) == 2
    pq.write_table(pa.table({"secret": [1]}), tmp_path / "out.log" / "other.parquet")
    assert run_cli("query", "SELECT * FROM read_parquet("
                   f"'{tmp_path / 'out.log' / 'other.parquet'}')", "--db", db) == 2


def test_a_list_of_captions_loses_only_its_dropped_entries(tmp_path):
    """A webdataset JSON with ``captions`` (``shards build``'s layout) and a parquet column of
    caption lists: each entry is its own caption (its turn), a dropped one leaves the list."""
    import io
    import tarfile

    (tmp_path / "in").mkdir()
    lists = {1: [CAPTIONS[0][1], "A dog sleeps."], 3: [CAPTIONS[2][1]]}   # by hand below
    with tarfile.open(tmp_path / "in" / "c.tar", "w") as tf:
        for iid, caps in lists.items():
            data = json.dumps({"image_id": iid, "captions": caps}).encode()
            info = tarfile.TarInfo(f"{iid:09d}.json")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    pq.write_table(pa.table({"image_id": list(lists), "captions": list(lists.values())}),
                   tmp_path / "in" / "c.parquet")
    assert _run(tmp_path, tmp_path / "in", tmp_path / "out") == 0
    with tarfile.open(tmp_path / "out" / "c.tar") as tf:
        got = [json.loads(tf.extractfile(m).read()) for m in tf]
    # image 1: the giraffe sentence goes, "A dog sleeps." stays; image 3: its one caption
    # loses its one sentence, so the sample goes
    assert got == [{"image_id": 1, "captions": ["A dog runs on the grass.", "A dog sleeps."]}]
    table = pq.read_table(tmp_path / "out" / "c.parquet")
    assert table.to_pylist() == got


def test_the_coverage_guard_stops_before_any_shard_is_written(tmp_path, capsys):
    write_tar(tmp_path / "in" / "a.tar", CAPTIONS[:3])
    write_tar(tmp_path / "in" / "b.tar", CAPTIONS[3:])
    gt = write_evidence(tmp_path / "few.jsonl", {1: ["dog"], 99: ["cat"]})   # 1 of 5 images
    args = ["filter", "run", "--shards", tmp_path / "in", "--out", tmp_path / "out", "--filter",
            "hallucination", "--chair-gt", gt, "--db", tmp_path / "s.duckdb"]
    capsys.readouterr()
    assert run_cli(*args) == 2
    err = capsys.readouterr().err
    assert "only 1 of the 5 images" in err and "--allow-partial" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.log").exists()
    assert run_cli(*args, "--allow-partial") == 0
    s = json.loads((tmp_path / "out.summary.json").read_text())["summary"]
    assert (s["evidence"]["set_images"], s["evidence"]["covered"]) == (5, 1)
    # image 1: the giraffe goes; images 2-5 (1+1+3+1 sentences) are kept unjudged
    assert s["reasons"] == {"unsupported": 1}
    assert s["actions"] == {"keep": 7, "flag": 0, "revise": 0, "drop": 1}


def test_detector_evidence_with_its_scores(tmp_path):
    """Detector output (``capaudit detect --json``): a category below ``--min-score`` (0.5
    for a detector) does not support its mention."""
    write_tar(tmp_path / "in" / "d.tar", CAPTIONS[:2])
    dets = tmp_path / "dets.jsonl"
    dets.write_text(json.dumps({"image_id": 1, "detections": [
        {"label": "dog", "score": 0.9}, {"label": "giraffe", "score": 0.3}]}) + "\n" +
        json.dumps({"image_id": 2, "detections": [{"label": "cat", "score": 0.8},
                                                  {"label": "bed", "score": 0.6}]}) + "\n")
    args = ["filter", "run", "--shards", tmp_path / "in", "--filter", "hallucination",
            "--evidence", "detector", "--detections", dets, "--db", tmp_path / "s.duckdb"]
    assert run_cli(*args, "--out", tmp_path / "out") == 0
    caps = [m[-1] for m in tar_members(tmp_path / "out" / "d.tar") if m[0].endswith(".txt")]
    assert caps == [b"A dog runs on the grass.", b"A cat sleeps on a bed."]
    assert run_cli(*args, "--out", tmp_path / "low", "--min-score", "0.2") == 0   # giraffe 0.3
    caps = [m[-1] for m in tar_members(tmp_path / "low" / "d.tar") if m[0].endswith(".txt")]
    assert caps == [CAPTIONS[0][1].encode(), b"A cat sleeps on a bed."]
