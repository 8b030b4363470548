"""Worker processes only on idle cores (#24): on a busy machine a second record worker adds
its start-up and pickling to the CPU bill and saves no wall time; the records are the same
whichever way they are built."""

from __future__ import annotations

import json
import os

import numpy as np

from capaudit.text import records


def _same(a, b) -> bool:
    return (all(np.array_equal(getattr(a, f), getattr(b, f)) for f in (
        "n_tokens", "n_sentences", "gender", "m_offsets", "m_word", "m_cat", "m_tok", "m_sent"))
        and a.token_counts == b.token_counts and a.postings == b.postings)


def test_records_use_no_more_processes_than_idle_cores(monkeypatch):
    cores = len(os.sched_getaffinity(0))
    words = ["dog", "cat", "man", "woman", "bus", "pizza", "kite", "horse"]
    caps = [f"A {words[i % 8]} and {i} {words[(i // 8) % 8]}s near the table." for i in
            range(2 * records.CHUNK + 5)]  # three chunks: a pool would be worth starting
    pools = []
    real = records._run_pool
    monkeypatch.setattr(records, "_run_pool",
                        lambda fn, jobs, workers: pools.append(workers) or real(fn, jobs, workers))
    monkeypatch.setattr(os, "getloadavg", lambda: (float(cores), 0.0, 0.0))  # every core busy
    busy = records.build_records(caps, workers=2)
    assert pools == []  # built in this process
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # idle machine
    idle = records.build_records(caps, workers=2)
    assert pools == ([2] if cores >= 2 else [])
    assert _same(busy, idle)
    assert _same(busy, records.build_records(caps, workers=1))
    assert busy.m_cat.size > 2 * records.CHUNK  # the captions did mention objects


def _local_workers(executor: str, workers: int, shards: list) -> int:
    """Local workers worth starting for an audit of these shards."""
    from capaudit.audit.shards.run import AuditStep
    from capaudit.runner.step import shard_bytes, worker_budget

    return worker_budget(executor, workers, shard_bytes(shards), AuditStep.worker_mb)


def test_sharded_audit_starts_workers_only_for_idle_cores_and_enough_input(monkeypatch, tmp_path,
                                                                          shared):
    """#24: 810k captions in 8 parquet shards (33 MB) on 2 workers cost 1.67x the CPU of one;
    a worker is started per idle core and per CAPAUDIT_WORKER_MB (64) of shards at most."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from capaudit.audit.runner import DEFAULTS
    from capaudit.audit.shards import run as shards_run

    cores = len(os.sched_getaffinity(0))
    path = shared("data", "captioners", "oscar_val2014_gender.jsonl")
    caps = [json.loads(line)["caption"] for line in path.read_text().splitlines()[:300]]
    folder = tmp_path / "shards"
    folder.mkdir()
    for s in range(3):
        pq.write_table(pa.table({"key": [str(s * 100 + i) for i in range(100)],
                                 "caption": caps[s * 100:(s + 1) * 100]}),
                       folder / f"{s:05d}.parquet")
    shards = sorted(folder.iterdir())
    size = sum(p.stat().st_size for p in shards)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))   # idle machine
    assert _local_workers("local", 2, shards) == 1           # a few KB of shards
    monkeypatch.setenv("CAPAUDIT_WORKER_MB", str(size / 2 ** 20 / 2.5))  # 2.5 workers' worth
    assert _local_workers("local", 8, shards) == min(2, cores)
    assert _local_workers("ray", 8, shards) == 8              # a cluster's own cores
    monkeypatch.setattr(os, "getloadavg", lambda: (float(cores), 0.0, 0.0))  # every core busy
    assert _local_workers("local", 8, shards) == 1
    monkeypatch.setenv("CAPAUDIT_WORKER_MB", "0")                        # the pool's tests
    assert _local_workers("local", 8, shards) == 8
    monkeypatch.setenv("CAPAUDIT_WORKER_MB", "64")
    cfg = {**DEFAULTS, "metrics": ["length", "vocab"], "n_boot": 20, "workers": 2}
    res, _ = shards_run.run_sharded(str(folder), cfg, _no_annotations(), tmp_path / "work",
                                    workers=2)
    assert res.meta["workers"] == 1 and res.meta["n_captions"] == 300


def _no_annotations():
    from capaudit.io.annotation_files import Annotations

    return Annotations()
