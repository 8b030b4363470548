"""A Ray cluster whose nodes share no disk (#32): two ``ray start`` nodes on this machine,
each with its own temporary folder, started here and stopped in teardown.

The shards are read from the local S3 endpoint and the work folder is on it too; the JSON
must be byte-identical to the local executor's on the same shards as local files, through
both task kinds (the shard pass and the replicate sums of the Poisson bootstrap). A local
work folder is refused on two nodes; a task whose worker dies is retried.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from storage_servers import KEY_ID, SECRET, free_port, moto_endpoint, s3, subprocess_env  # noqa: F401
from test_audit_sharded import _annotations, _rows, _write_parquet
from test_hostile_shards import cli  # noqa: F401  (fixture: the CLI in-process)

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NODE = ["--num-cpus", "1", "--object-store-memory", str(80 * 2 ** 20),
        "--disable-usage-stats", "--block"]


def _wait_for(log: Path, proc: subprocess.Popen, word: str = "--block", seconds: int = 120):
    for _ in range(seconds * 4):
        text = log.read_text(errors="replace") if log.exists() else ""
        if word in text:
            return text
        assert proc.poll() is None, text
        time.sleep(0.25)
    raise AssertionError(f"ray start did not come up: {log.read_text(errors='replace')}")


def _stop(procs: list[subprocess.Popen]) -> None:
    """End the nodes this test started: their process groups, by id (never `ray stop`, which
    would end every Ray cluster on the machine)."""
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in procs:
        try:
            p.wait(8)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.fixture(scope="module")
def cluster(moto_endpoint):
    """``RAY_ADDRESS`` of a head and a second node; both see the S3 endpoint through their
    environment (the nodes' own credentials), and this repo's sources."""
    pytest.importorskip("ray")
    env = subprocess_env({"AWS_ENDPOINT_URL": moto_endpoint, "AWS_ACCESS_KEY_ID": KEY_ID,
                          "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1",
                          "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"})
    env["PYTHONPATH"] = str(Path(__file__).parent) + os.pathsep + env["PYTHONPATH"]
    temps = [Path(tempfile.mkdtemp(prefix="capaudit-ray-")) for _ in range(2)]
    procs: list[subprocess.Popen] = []
    try:
        procs.append(subprocess.Popen(
            ["ray", "start", "--head", "--port", str(free_port()), "--node-ip-address",
             "127.0.0.1", "--include-dashboard=false", "--ray-client-server-port",
             str(free_port()), "--temp-dir", str(temps[0]), *NODE],
            env=env, start_new_session=True, stdout=open(temps[0] / "out", "w"),
            stderr=subprocess.STDOUT))
        text = _wait_for(temps[0] / "out", procs[0])
        address = text.split("ray start --address='")[1].split("'")[0]
        procs.append(subprocess.Popen(
            ["ray", "start", "--address", address, "--temp-dir", str(temps[1]), *NODE],
            env=env, start_new_session=True, stdout=open(temps[1] / "out", "w"),
            stderr=subprocess.STDOUT))
        _wait_for(temps[1] / "out", procs[1])
        yield address
    finally:
        _stop(procs)
        for t in temps:
            shutil.rmtree(t, ignore_errors=True)


@pytest.fixture
def on_cluster(cluster, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", cluster)   # what `--address auto` connects to
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    import ray

    ray.init(address="auto", log_to_driver=False)
    for _ in range(120):   # the second node registers a moment after it starts
        if sum(1 for n in ray.nodes() if n["Alive"]) == 2:
            break
        time.sleep(0.25)
    assert sum(1 for n in ray.nodes() if n["Alive"]) == 2
    ray.shutdown()
    return cluster


def _cfg(**kw):
    from capaudit.audit.runner import DEFAULTS

    return {**DEFAULTS, "n_boot": 100, "workers": 2, "chunk_size": 400, **kw}


def test_two_nodes_on_s3_give_the_json_of_the_local_executor(shared, tmp_path, s3, on_cluster,
                                                             cli):
    from capaudit.audit.shards.run import run_sharded

    ann = _annotations(shared)
    ids, caps = _rows(shared, 1500)
    pairs = sorted(zip(ids, caps), key=lambda p: (isinstance(p[0], str), str(p[0]).zfill(12)))
    ids, caps = [p[0] for p in pairs], [p[1] for p in pairs]   # shards of disjoint id ranges
    files = sorted(_write_parquet(tmp_path / "set", ids, caps, 6).iterdir())
    for f in files:
        s3.put_file(f"set/{f.name}", f)
    cfg = _cfg(bootstrap="poisson")   # two task kinds on Ray: the shards, then their sums
    local, _ = run_sharded(str(tmp_path / "set"), cfg, ann, tmp_path / "w")
    remote, summaries = run_sharded(s3.url("set/{00000..00005}.parquet"), cfg, ann,
                                    s3.url("work"), executor="ray", workers=2,
                                    address="auto")
    assert {s["status"] for s in summaries} == {"done"} and len(summaries) == 6
    assert remote.meta["merge"] == "replicate sums per shard"
    assert json.dumps(local.to_dict(), sort_keys=True) == \
        json.dumps(remote.to_dict(), sort_keys=True)
    c = shared("data", "coco2014")
    res = cli("audit", "run", "--shards", s3.url("set/"), "--executor", "ray", "--address",
              "auto", "--work-dir", s3.url("cliwork"), "--instances",
              str(c / "instance_categories_val2014.jsonl"), "--chair-gt",
              str(c / "chair_objects_trainval2014.jsonl"), "--n-boot", "50",
              "--json", s3.url("out/ray.json"), "--db", str(tmp_path / "s.duckdb"))
    assert res.returncode == 0, res.stderr
    assert json.loads(s3.cat("out/ray.json"))["sets"]["set"]["chair_s"]["n"] > 0


def test_a_local_work_folder_is_refused_on_two_nodes(shared, tmp_path, s3, on_cluster, cli):
    ids, caps = _rows(shared, 200)
    _write_parquet(tmp_path / "set", ids, caps, 2)
    res = cli("audit", "run", "--shards", str(tmp_path / "set"), "--executor", "ray",
              "--address", "auto", "--work-dir", str(tmp_path / "w"), "--metrics", "length",
              "--db", str(tmp_path / "s.duckdb"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "2 nodes" in res.stderr and "--work-dir s3://" in res.stderr
    assert not (tmp_path / "w").exists()


def _die_once(flag: str) -> str:
    if not os.path.exists(flag):
        Path(flag).write_text("died")
        os._exit(1)        # the worker process is lost, as with a node that goes away
    return "second try"


def test_a_lost_task_is_retried(tmp_path, on_cluster):
    from capaudit.executors import get_executor

    ex = get_executor("ray", workers=2, address="auto")
    try:
        flag = str(tmp_path / "flag")
        assert [r for _, r in ex.map_unordered(_die_once, [flag])] == ["second try"]
    finally:
        ex.close()
