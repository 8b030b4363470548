"""gender-balance and gender-neutral with ``--shards`` as long jobs where the data lives (#44):
a run SIGKILLed in its count pass and in its filter pass resumes to the bytes of a run never
killed; a changed shard is counted again, the corpus decision taken again on the new counts
(the bytes of a fresh run on the changed corpus); shards, output, work folder and labels on
S3 (moto) give the local bytes, and a rerun finds every shard done.

The corpus: the first 720 captions Show-Tell wrote for gender-labelled COCO val2014 images, in
12 JSONL shards, with the images' real labels (Zhao et al.).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shard_fixtures import run_cli
from storage_servers import moto_endpoint, s3  # noqa: F401 (fixtures)
from test_filter_shards_gender import outputs, shard_log, shard_run
from test_filter_shards_resume import _kill_when

PARTS, SIZE = 12, 60
BALANCE = ["--by", "object", "--min-images", "8", "--tolerance", "0.1"]   # caption words


@pytest.fixture
def corpus(shared, tmp_path):
    lines = shared("data", "captioners", "nic_val2014_gender.jsonl").read_text().splitlines()
    for k in range(PARTS):
        part = tmp_path / "in" / f"part-{k:02d}.jsonl"
        part.parent.mkdir(exist_ok=True)
        part.write_text("\n".join(lines[k * SIZE:(k + 1) * SIZE]) + "\n")
    return tmp_path, shared("data", "coco2014", "demographics_val2014.jsonl")


def _args(src, out: Path, db: Path, *extra) -> list[str]:
    return ["filter", "run", "--shards", str(src), "--out", str(out), "--filter",
            "gender-balance", *BALANCE, "--db", str(db), *map(str, extra)]


def test_sigkill_in_both_passes_then_resume_gives_the_same_output(corpus):
    tmp, _ = corpus
    ref = shard_run(tmp, tmp / "in", tmp / "ref", "gender-balance", BALANCE)
    work = tmp / "work"
    cmd = _args(tmp / "in", tmp / "out", tmp / "s.duckdb", "--work-dir", work)
    for where, folder, n in ((work, "coverage-", 5), (tmp / "out.log", ".claims", 3)):
        _kill_when(cmd, where, folder, n, tmp)
    assert not (tmp / "out.summary.json").exists()            # no run finished yet
    assert run_cli(*cmd) == 0
    assert outputs(tmp / "out") == outputs(tmp / "ref")
    assert shard_log(tmp / "out").equals(shard_log(tmp / "ref"))
    summary = json.loads((tmp / "out.summary.json").read_text())["summary"]
    assert summary["shards"]["resumed"] >= 1                  # the kills' work was kept
    assert {k: v for k, v in summary.items() if k != "shards"} == \
        {k: v for k, v in ref.items() if k != "shards"}


def test_a_changed_shard_changes_the_corpus_decision(corpus):
    tmp, _ = corpus
    cmd = _args(tmp / "in", tmp / "out", tmp / "s.duckdb", "--work-dir", tmp / "work",
                "--keep-work")
    assert run_cli(*cmd) == 0
    assert run_cli(*cmd) == 0
    again = json.loads((tmp / "out.summary.json").read_text())["summary"]
    assert (again["shards"]["resumed"], again["shards"]["filtered"]) == (PARTS, 0)
    part = tmp / "in" / "part-03.jsonl"     # a man with a surfboard more: the counts change
    recs = [json.loads(line) for line in part.read_text().splitlines()]
    recs[0]["caption"] = "a man riding a wave on top of a surfboard ."
    part.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert run_cli(*cmd) == 0
    fresh = shard_run(tmp, tmp / "in", tmp / "fresh", "gender-balance", BALANCE)
    assert outputs(tmp / "out") == outputs(tmp / "fresh")
    summary = json.loads((tmp / "out.summary.json").read_text())["summary"]
    assert summary["balance"] == fresh["balance"] != again["balance"]
    assert summary["shards"]["filtered"] >= 1


@pytest.mark.parametrize("filt, extra", [("gender-neutral", []),
                                         ("gender-balance", ["--seed", "3"])])
def test_s3_to_s3_gives_the_local_bytes_and_resumes(s3, corpus, filt, extra):  # noqa: F811
    tmp, demo = corpus
    opts = ["--demographics", demo, *extra]
    local = shard_run(tmp, tmp / "in", tmp / "ref", filt, opts)
    for p in sorted((tmp / "in").iterdir()):
        s3.put_file(f"in/{p.name}", p)
    s3.put_file("demo.jsonl", demo)
    args = ["filter", "run", "--shards", s3.url("in/"), "--out", s3.url("ref"), "--filter",
            filt, "--demographics", s3.url("demo.jsonl"), *extra, "--work-dir", s3.url("work"),
            "--db", tmp / "r.duckdb"]
    assert run_cli(*args, "--keep-work") == 0
    assert any(k.endswith(".done.json") for k in s3.keys("work"))
    got = {k[len("ref/"):]: s3.cat(k) for k in s3.keys("ref/")}
    want = {p.name: p.read_bytes() for p in (tmp / "ref").iterdir()}
    assert got == want and len(got) == PARTS + 1              # the shards and the manifest
    logs = {k[len("ref.log/"):]: s3.cat(k) for k in s3.keys("ref.log/")}
    assert logs == {p.name: p.read_bytes() for p in (tmp / "ref.log").iterdir()}
    remote = json.loads(s3.cat("ref.summary.json"))["summary"]
    skip = ("shards", "evidence")
    assert {k: v for k, v in remote.items() if k not in skip} == \
        {k: v for k, v in local.items() if k not in skip}
    assert remote["captions_in"] == PARTS * SIZE
    assert run_cli(*args) == 0
    again = json.loads(s3.cat("ref.summary.json"))["summary"]["shards"]
    assert (again["resumed"], again["filtered"], again["failed"]) == (PARTS, 0, [])
    assert s3.keys("work") == []            # a finished run leaves nothing in its work folder
