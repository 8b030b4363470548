"""One file, 7 shards, 2 local workers and Ray with 2 workers clean a corpus to the same bytes,
logs and summary (#31), and the same bytes as the registered-set path: ``filter run SET``
then ``sets export --to original`` of the same file, an independent way to the answer.

The corpus: 84 real GPT-4V ShareGPT4V captions (COCO 2017 ids, each its own image) with the
CHAIR ground truth of COCO 2014 (the same images).
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shard_fixtures import records_json, run_cli, split_json

LOG_COLUMNS = ["filter", "image_id", "sentence_idx", "action", "reason", "original",
               "revised", "critique", "score", "turn"]


def _shards(tmp_path, src, out, gt, *extra):
    assert run_cli("filter", "run", "--shards", src, "--out", out, "--filter", "hallucination",
                   "--chair-gt", gt, "--db", tmp_path / f"{out.name}.duckdb", *extra) == 0
    return json.loads(out.with_name(out.name + ".summary.json").read_text())["summary"]


def _records(out) -> list:
    return [r for p in sorted(out.glob("*.json")) for r in json.loads(p.read_text())]


def _log(out) -> pa.Table:
    folder = out.with_name(out.name + ".log")
    return pa.concat_tables(pq.read_table(p) for p in sorted(folder.glob("*.parquet")))


def _same_summary(a: dict, b: dict) -> None:
    skip = {"shards", "coverage_guard"}
    assert {k: v for k, v in a.items() if k not in skip} == \
        {k: v for k, v in b.items() if k not in skip}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from conftest import shared_path as shared

    tmp = tmp_path_factory.mktemp("exact")
    recs = records_json(shared, 84)
    (tmp / "one").mkdir()
    (tmp / "one" / "corpus.json").write_text(json.dumps(recs, indent=1, ensure_ascii=False))
    split_json(recs, tmp / "seven", 7)
    gt = shared("data", "coco2014", "chair_objects_trainval2014.jsonl")
    out = {"one": _shards(tmp, tmp / "one" / "corpus.json", tmp / "o1", gt),
           "seven": _shards(tmp, tmp / "seven", tmp / "o7", gt),
           "two": _shards(tmp, tmp / "seven", tmp / "o7w2", gt, "--workers", "2")}
    return tmp, gt, out


def test_one_file_matches_the_registered_set_export(runs):
    tmp, gt, _ = runs
    db = tmp / "set.duckdb"
    assert run_cli("sets", "add", "d", tmp / "one" / "corpus.json", "--db", db) == 0
    assert run_cli("filter", "run", "d", "--filter", "hallucination", "--chair-gt", gt,
                   "--out", "d_clean", "--db", db) == 0
    assert run_cli("sets", "export", "d_clean", "--to", "original", "--out", tmp / "exp.json",
                   "--db", db) == 0
    assert (tmp / "o1" / "corpus.json").read_bytes() == (tmp / "exp.json").read_bytes()
    changed = sum(a != b for a, b in zip(json.loads((tmp / "one" / "corpus.json").read_text()),
                                          _records(tmp / "o1")))
    assert changed > 10                        # the filter did change captions


def test_seven_shards_and_two_workers_match_one_file(runs):
    tmp, _, summary = runs
    assert _records(tmp / "o7") == _records(tmp / "o1")
    for name in sorted(p.name for p in (tmp / "o7").glob("*.json")):
        assert (tmp / "o7w2" / name).read_bytes() == (tmp / "o7" / name).read_bytes()
    one, seven, two = (_log(tmp / n) for n in ("o1", "o7", "o7w2"))
    assert one.select(LOG_COLUMNS).equals(seven.select(LOG_COLUMNS))
    assert seven.equals(two)
    _same_summary(summary["one"], summary["seven"])
    _same_summary(summary["seven"], summary["two"])
    assert summary["seven"]["sentences_in"] == \
        summary["seven"]["sentences_kept"] + summary["seven"]["sentences_dropped"]


@pytest.mark.ray
def test_ray_with_two_workers_matches_local(runs):
    pytest.importorskip("ray")
    import ray

    tmp, gt, summary = runs
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        got = _shards(tmp, tmp / "seven", tmp / "oray", gt, "--executor", "ray",
                      "--workers", "2")
    finally:
        ray.shutdown()
    for name in sorted(p.name for p in (tmp / "o7").glob("*.json")):
        assert (tmp / "oray" / name).read_bytes() == (tmp / "o7" / name).read_bytes()
    assert _log(tmp / "oray").equals(_log(tmp / "o7"))
    _same_summary(got, summary["seven"])


def test_a_csv_shard_matches_the_registered_set_export(runs, tmp_path):
    """A CSV shard is read through a text wrapper over the hashing stream (it once asked the
    stream ``seekable()`` and stopped with a traceback): same bytes as the set path."""
    import csv

    _, gt, _ = runs
    recs = json.loads((runs[0] / "one" / "corpus.json").read_text())
    (tmp_path / "csv").mkdir()
    with open(tmp_path / "csv" / "corpus.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["image_id", "caption"])
        w.writerows([int(r["id"]), r["conversations"][-1]["value"]] for r in recs)
    _shards(tmp_path, tmp_path / "csv", tmp_path / "ocsv", gt)
    db = tmp_path / "set.duckdb"
    assert run_cli("sets", "add", "c", tmp_path / "csv" / "corpus.csv", "--db", db) == 0
    assert run_cli("filter", "run", "c", "--filter", "hallucination", "--chair-gt", gt,
                   "--out", "c_clean", "--db", db) == 0
    assert run_cli("sets", "export", "c_clean", "--to", "original", "--out",
                   tmp_path / "exp.csv", "--db", db) == 0
    got = (tmp_path / "ocsv" / "corpus.csv").read_bytes()
    assert got == (tmp_path / "exp.csv").read_bytes()
    assert got != (tmp_path / "csv" / "corpus.csv").read_bytes()     # captions did change
