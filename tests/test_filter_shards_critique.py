"""``filter run --shards --filter critique-revise`` (#44): the judge and the reviser built once
per worker, the decisions those of ``filter run SET`` on the same captions.

The judge is the critique tests' local OpenAI-compatible server (:mod:`test_filters_critique`:
'surfboard' is in no image; the reviser turns it into 'towel'); every request it gets is
recorded, so the test also holds that both paths asked the same questions (sentence, the
earlier sentences as revised, the image's annotated objects) the same number of times.

The corpus: 38 real GPT-4V ShareGPT4V captions (8 of them name a surfboard), ~9 sentences
each, in 3 JSON shards, with the CHAIR ground truth of their COCO images as evidence.
"""

from __future__ import annotations

import json
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shard_fixtures import records_json, run_cli, split_json
from test_filters_critique import _Judge, server  # noqa: F401 (the fixture)

LOG_COLUMNS = ["filter", "image_id", "sentence_idx", "action", "reason", "original",
               "revised", "critique", "score"]
SURF = (96, 117, 186, 298, 490, 497, 539, 541)


def _asked() -> Counter:
    return Counter(json.dumps(r, sort_keys=True) for r in _Judge.requests)


def _without_time(summary: dict) -> dict:
    return {**summary, "judge": {k: v for k, v in summary["judge"].items() if k != "seconds"}}


@pytest.fixture
def corpus(shared, tmp_path):
    recs = records_json(shared, 30) + [records_json(shared, 1, i)[0] for i in SURF]
    (tmp_path / "one.json").write_text(json.dumps(recs, indent=1, ensure_ascii=False))
    split_json(recs, tmp_path / "in", 3)
    gt = shared("data", "coco2014", "chair_objects_trainval2014.jsonl")
    return tmp_path, recs, gt


def test_shards_decide_as_the_registered_set(corpus, server):  # noqa: F811
    from capaudit.filters.runner import filter_run_info, read_log
    from capaudit.store import Store

    tmp, recs, gt = corpus
    opts = ["--filter", "critique-revise", "--judge-url", server, "--judge-model", "judge",
            "--chair-gt", gt, "--concurrency", "2"]
    db = tmp / "set.duckdb"
    assert run_cli("sets", "add", "d", tmp / "one.json", "--db", db) == 0
    _Judge.requests = []
    assert run_cli("filter", "run", "d", "--out", "d_rev", *opts, "--db", db) == 0
    asked_by_set = _asked()
    assert run_cli("sets", "export", "d_rev", "--to", "original", "--out", tmp / "exp.json",
                   "--db", db) == 0
    with Store(db, read_only=True) as store:
        want_log = read_log(store, "d_rev", actions=None).sort_by(
            [("row_idx", "ascending"), ("sentence_idx", "ascending")])
        want = filter_run_info(store, "d_rev")["summary"]

    _Judge.requests = []
    assert run_cli("filter", "run", "--shards", tmp / "in", "--out", tmp / "out", *opts,
                   "--workers", "2", "--db", tmp / "s.duckdb") == 0
    assert _asked() == asked_by_set                   # the same questions, as often
    got = [r for k in range(3) for r in json.loads((tmp / "out" / f"part-{k}.json")
                                                    .read_text())]
    assert got == json.loads((tmp / "exp.json").read_text())
    log = pa.concat_tables(pq.read_table(p) for p in
                           sorted((tmp / "out.log").glob("*.parquet")))
    assert log.select(LOG_COLUMNS).equals(want_log.select(LOG_COLUMNS))
    summary = json.loads((tmp / "out.summary.json").read_text())["summary"]
    assert _without_time({k: v for k, v in summary.items() if k not in ("shards", "records")}) \
        == _without_time(want)
    # by hand: every sentence naming a surfboard is revised to a towel, none other changes
    surf = sum(s.count("surfboard") > 0 for s in log.column("original").to_pylist())
    assert summary["actions"]["revise"] == surf >= len(SURF)
    assert summary["calls"]["revise"] == surf and summary["calls"]["errors"] == 0
    assert summary["calls"]["judge"] == summary["sentences_in"] == log.num_rows
    assert any(r["objects"] not in (None, "(unknown)") for r in _Judge.requests)
    assert "surfboard" not in json.dumps(got) and "towel" in json.dumps(got)


@pytest.mark.ray
def test_ray_with_two_workers_matches_local(corpus, server):  # noqa: F811
    pytest.importorskip("ray")
    import ray

    tmp, _, gt = corpus
    opts = ["--filter", "critique-revise", "--judge-url", server, "--judge-model", "judge",
            "--chair-gt", gt]
    assert run_cli("filter", "run", "--shards", tmp / "in", "--out", tmp / "local", *opts,
                   "--db", tmp / "l.duckdb") == 0
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        assert run_cli("filter", "run", "--shards", tmp / "in", "--out", tmp / "ray", *opts,
                       "--executor", "ray", "--workers", "2", "--db", tmp / "r.duckdb") == 0
    finally:
        ray.shutdown()
    for k in range(3):
        name = f"part-{k}.json"
        assert (tmp / "ray" / name).read_bytes() == (tmp / "local" / name).read_bytes()
        log = f"{name}.log.parquet"
        assert pq.read_table(tmp / "ray.log" / log).equals(pq.read_table(tmp / "local.log" / log))
    got, want = (json.loads((tmp / f"{n}.summary.json").read_text())["summary"]
                 for n in ("ray", "local"))
    assert _without_time({k: v for k, v in got.items() if k != "shards"}) == \
        _without_time({k: v for k, v in want.items() if k != "shards"})
