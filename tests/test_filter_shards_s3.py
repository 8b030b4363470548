"""``filter run --shards`` where the data lives (#31 + #32): shards, DST, the work folder and
the evidence file all on an S3 endpoint (moto on 127.0.0.1), through the fsspec layer.

The cleaned shards and their logs must be the bytes of the same run on local files; the
summary the same counts, derived by hand (:mod:`shard_fixtures`: each shard's 5 captions
keep 4, its 8 sentences lose 3); no credential anywhere in what is written or printed; a
rerun finds every shard done and rewrites nothing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shard_fixtures import CAPTIONS, run_cli, write_evidence, write_tar
from storage_servers import KEY_ID, SECRET, moto_endpoint, s3  # noqa: F401


def _corpus(folder: Path) -> list[Path]:
    """Three shards of the hand-derived captions: a webdataset tar, a parquet file, JSONL."""
    tar = write_tar(folder / "shard-00000.tar")
    pq.write_table(pa.table({"image_id": [r[0] for r in CAPTIONS],
                             "caption": [r[1] for r in CAPTIONS],
                             "width": pa.array([640 + r[0] for r in CAPTIONS], pa.int32())}),
                   folder / "shard-00001.parquet", row_group_size=2)
    lines = [json.dumps({"image_id": iid, "caption": cap, "extra": iid}) for iid, cap, _ in
             CAPTIONS]
    (folder / "shard-00002.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    return [tar, folder / "shard-00001.parquet", folder / "shard-00002.jsonl"]


def _args(src, out, gt, db, *extra) -> list[str]:
    return ["filter", "run", "--shards", str(src), "--out", str(out), "--filter",
            "hallucination", "--chair-gt", str(gt), "--db", str(db), *map(str, extra)]


def _objects(s3, prefix: str) -> dict[str, bytes]:
    return {k[len(prefix):]: s3.cat(k) for k in s3.keys(prefix)}


def _modified(s3, keys: list[str]) -> dict:
    fs = s3.fs
    fs.invalidate_cache()
    return {k: fs.info(f"{s3.bucket}/{k}")["LastModified"] for k in keys}


def _without_source(summary: dict) -> dict:
    """A summary less where its evidence file was (a path here, a URL there)."""
    return {**summary, "evidence": {k: v for k, v in summary["evidence"].items()
                                    if k != "source"}}


@pytest.fixture
def local_run(tmp_path):
    """The reference: the same shards, DST and evidence as local files."""
    shards = _corpus(tmp_path / "in")
    gt = write_evidence(tmp_path / "gt.jsonl")
    assert run_cli(*_args(tmp_path / "in", tmp_path / "ref", gt, tmp_path / "l.duckdb")) == 0
    return shards, gt, tmp_path / "ref"


def test_s3_to_s3_gives_the_local_bytes_and_resumes(s3, local_run, tmp_path, capsys):
    shards, gt, ref = local_run
    for p in shards:
        s3.put_file(f"in/{p.name}", p)
    s3.put_file("gt.jsonl", gt)
    capsys.readouterr()
    args = _args(s3.url("in/"), s3.url("ref"), s3.url("gt.jsonl"), tmp_path / "r.duckdb",
                 "--work-dir", s3.url("work"))
    assert run_cli(*args, "--keep-work") == 0
    first = capsys.readouterr()
    got = _objects(s3, "ref/")
    want = {p.relative_to(ref).as_posix(): p.read_bytes() for p in sorted(ref.rglob("*"))
            if p.is_file()}
    assert set(got) == set(want) == {"shard-00000.tar", "shard-00001.parquet",
                                     "shard-00002.jsonl", ".capaudit-files.json"}
    for name in want:
        assert got[name] == want[name], name
    logs, ref_logs = _objects(s3, "ref.log/"), {p.name: p.read_bytes() for p in
                                                  (tmp_path / "ref.log").iterdir()}
    assert logs == ref_logs and len(logs) == 4      # three shard logs and the manifest
    remote = json.loads(s3.cat("ref.summary.json"))
    local = json.loads((tmp_path / "ref.summary.json").read_text())
    assert _without_source(remote["summary"]) == _without_source(local["summary"])
    assert remote["summary"]["evidence"]["source"] == f"file:{s3.url('gt.jsonl')}"
    s = remote["summary"]   # by hand: 3 shards x (5 captions -> 4; 8 sentences, 3 dropped)
    assert (s["captions_in"], s["captions_out"], s["sentences_in"]) == (15, 12, 24)
    assert s["sentences_dropped"] == 9 and s["records"]["records_dropped"] == 3
    assert s["shards"]["filtered"] == 3 and remote["log_dir"] == s3.url("ref.log")
    work = s3.keys("work")
    assert any(k.endswith(".done.json") for k in work)     # kept: --keep-work

    outputs = [f"ref/{n}" for n in want] + [f"ref.log/{n}" for n in ref_logs]
    before = _modified(s3, outputs)
    time.sleep(1.1)        # S3's modification times have a second's resolution
    assert run_cli(*args) == 0
    second = capsys.readouterr()
    again = json.loads(s3.cat("ref.summary.json"))["summary"]["shards"]
    assert (again["resumed"], again["filtered"], again["failed"]) == (3, 0, [])
    assert _modified(s3, [k for k in outputs if not k.endswith(".capaudit-files.json")]) == \
        {k: v for k, v in before.items() if not k.endswith(".capaudit-files.json")}
    assert s3.keys("work") == []            # a finished run leaves nothing in its work folder
    written = b"".join(s3.cat(k) for k in s3.keys()) + (tmp_path / "r.duckdb").read_bytes()
    for text in (first.out, first.err, second.out, second.err):
        written += text.encode()
    assert KEY_ID.encode() not in written and SECRET.encode() not in written


def test_a_brace_list_of_objects_and_a_missing_one(s3, local_run, tmp_path, capsys):
    shards, gt, ref = local_run
    for p in shards:
        s3.put_file(f"in/{p.name}", p)
    src = s3.url("in/shard-{00000..00001}.{tar,parquet}")   # 4 names, 2 objects
    assert run_cli(*_args(src, s3.url("c"), gt, tmp_path / "b.duckdb")) == 2
    err = capsys.readouterr().err
    assert "no such object" in err and "Traceback" not in err and SECRET not in err
    s3.put_file("tars/shard-00000.tar", shards[0])
    s3.put_file("tars/shard-00001.tar", shards[0])
    assert run_cli(*_args(s3.url("tars/shard-{00000..00001}.tar"), s3.url("c"), gt,
                          tmp_path / "b.duckdb")) == 0
    want = (ref / "shard-00000.tar").read_bytes()
    assert s3.cat("c/shard-00000.tar") == want and s3.cat("c/shard-00001.tar") == want


def test_an_output_is_never_half_written(s3, local_run, tmp_path, monkeypatch, capsys):
    """A shard that fails mid-write leaves no object at its name (the upload discarded), and
    the run's one line names it; the next run writes it whole."""
    shards, gt, ref = local_run
    s3.put_file("in/shard-00000.tar", shards[0])
    from capaudit.filters.shards import task

    def boom(*a, **k):
        raise OSError("disk on fire")
    args = _args(s3.url("in/"), s3.url("o"), gt, tmp_path / "h.duckdb", "--work-dir",
                 s3.url("w"))
    with monkeypatch.context() as patch:   # the fixture's endpoint variables stay set
        patch.setattr(task, "_check_unchanged", boom)
        assert run_cli(*args) == 2
    assert "disk on fire" in capsys.readouterr().err
    assert s3.keys("o/") == []      # neither the shard nor its log: only the claim
    assert [k.rsplit("/", 2)[-2] for k in s3.keys("o.log/")] == [".claims"]
    assert run_cli(*args) == 0
    assert s3.cat("o/shard-00000.tar") == (ref / "shard-00000.tar").read_bytes()
