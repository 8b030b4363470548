"""Resume: a real `capaudit enrich` subprocess killed with SIGKILL, then rerun.

The rerun must redo only the shards without a completion marker, and the
registered set must hold every caption exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from capaudit.cli.main import main
from capaudit.enrich.testing import FakeOpenAIServer
from capaudit.store import Store
from test_enrich_fixtures import make_dataset


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
def test_sigkill_then_rerun_finishes_missing_shards_without_duplicates(tmp_path):
    db, shards, ids = make_dataset(tmp_path, n_images=12, shard_size=2)
    work = tmp_path / "work"
    with FakeOpenAIServer(delay_s=0.25) as srv:
        args = ["enrich", "sharegpt4v", "--shards", str(shards), "--out", "coco-sg",
                "--llm", "openai", "--model", "vlm", "--base-url", srv.base_url,
                "--concurrency", "1", "--work-dir", str(work), "--db", str(db)]
        proc = subprocess.Popen([sys.executable, "-m", "capaudit.cli.main", *args],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 120
        while time.time() < deadline and not list(work.glob("*.done.json")):
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.05)
        time.sleep(0.3)  # land somewhere inside a later shard
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stderr.close()
        done = {p.name: p.stat().st_mtime_ns for p in work.glob("*.done.json")}
        assert 1 <= len(done) < 6, "the kill should land mid-run"
        with Store(db) as store:
            assert store.find_set("coco-sg") is None  # nothing registered by the killed run
        srv.delay_s = 0.0
        calls_before = srv.calls
        assert main(args) == 0
        redo_calls = srv.calls - calls_before
    assert redo_calls <= 2 * (6 - len(done))       # only the missing shards were requested
    for name, mtime in done.items():                # finished shards were not touched
        assert (work / name).stat().st_mtime_ns == mtime
    assert not list(work.glob("*.tmp-*"))
    with Store(db) as store:
        rows = store.sql("SELECT image_id FROM captions c JOIN caption_sets s USING (set_id) "
                         "WHERE s.name = 'coco-sg' ORDER BY row_idx")
    assert [r[0] for r in rows] == ids              # every image once, in shard order
