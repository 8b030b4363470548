"""Worker processes only on idle cores (#24): on a busy machine a second record worker adds
its start-up and pickling to the CPU bill and saves no wall time; the records are the same
whichever way they are built."""

from __future__ import annotations

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
