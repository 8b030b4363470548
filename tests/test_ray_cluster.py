"""A Ray cluster whose nodes share no disk (#32): two ``ray start`` nodes on this machine,
each with its own temporary folder, started here and stopped in teardown.

The shards are read from the local S3 endpoint and the work folder is on it too; the JSON
must be byte-identical to the local executor's on the same shards as local files, through
both task kinds (the shard pass and the replicate sums of the Poisson bootstrap). A local
work folder is refused on two nodes; a task whose worker dies is retried. Every Ray driver
runs in a subprocess (``--address auto``, as a user runs it): the test process itself never
starts Ray, so no Ray thread or exit handler is copied into a process it later forks.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from storage_servers import KEY_ID, SECRET, free_port, moto_endpoint, s3, subprocess_env  # noqa: F401
from test_audit_sharded import _rows, _write_parquet
from test_hostile_shards import cli  # noqa: F401  (fixture: the CLI in-process)

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NODE = ["--num-cpus", "1", "--object-store-memory", str(80 * 2 ** 20),
        "--disable-usage-stats", "--block"]
TESTS = str(Path(__file__).parent)
# `ray` of this interpreter's own environment, not the first one on PATH (none where the venv is
# not activated, or another environment's)
RAY = [sys.executable, "-m", "ray.scripts.scripts"]


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
            p.wait(3)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def _node_env(endpoint: str) -> dict:
    env = subprocess_env({"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": KEY_ID,
                          "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1",
                          "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"})
    env["PYTHONPATH"] = TESTS + os.pathsep + env["PYTHONPATH"]   # the retry test's task
    return env


def _alive_nodes(env: dict) -> int:
    probe = ("import ray; ray.init(address='auto', log_to_driver=False); "
             "print('NODES', sum(1 for n in ray.nodes() if n['Alive']))")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, timeout=120)
    return int(out.stdout.split("NODES")[-1]) if "NODES" in out.stdout else 0


def _client_port() -> list[str]:
    """Ray's client server on a free port where ``ray[client]`` (grpc) is installed: ``ray
    start`` would take port 10001 otherwise (one shared by every run on the machine); without
    grpc (a minimal ``ray``, as CI installs it) no client server starts, and naming a port is an
    error there."""
    try:
        import grpc  # noqa: F401
    except ImportError:
        return []
    return ["--ray-client-server-port", str(free_port())]


@pytest.fixture(scope="module")
def cluster(moto_endpoint):
    """The environment of a driver on a head and a second node (``RAY_ADDRESS``); both nodes
    see the S3 endpoint through their environment (the nodes' own credentials)."""
    pytest.importorskip("ray")
    env = _node_env(moto_endpoint)
    temps = [Path(tempfile.mkdtemp(prefix="capaudit-ray-")) for _ in range(2)]
    procs: list[subprocess.Popen] = []
    try:
        procs.append(subprocess.Popen(
            [*RAY, "start", "--head", "--port", str(free_port()), "--node-ip-address",
             "127.0.0.1", "--include-dashboard=false", *_client_port(), "--temp-dir",
             str(temps[0]), *NODE],
            env=env, start_new_session=True, stdout=open(temps[0] / "out", "w"),
            stderr=subprocess.STDOUT))
        text = _wait_for(temps[0] / "out", procs[0])
        env["RAY_ADDRESS"] = text.split("ray start --address='")[1].split("'")[0]
        procs.append(subprocess.Popen(
            [*RAY, "start", "--address", env["RAY_ADDRESS"], "--temp-dir", str(temps[1]),
             *NODE], env=env, start_new_session=True, stdout=open(temps[1] / "out", "w"),
            stderr=subprocess.STDOUT))
        _wait_for(temps[1] / "out", procs[1])
        for _ in range(60):   # the second node registers a moment after it starts
            if _alive_nodes(env) == 2:
                break
            time.sleep(0.5)
        assert _alive_nodes(env) == 2
        yield env
    finally:
        _stop(procs)
        for t in temps:
            shutil.rmtree(t, ignore_errors=True)


def _capaudit(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "capaudit.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=600)


def test_two_nodes_on_s3_give_the_json_of_the_local_executor(shared, tmp_path, s3, cluster,
                                                             cli):
    ids, caps = _rows(shared, 1500)
    pairs = sorted(zip(ids, caps), key=lambda p: (isinstance(p[0], str), str(p[0]).zfill(12)))
    ids, caps = [p[0] for p in pairs], [p[1] for p in pairs]   # shards of disjoint id ranges
    files = sorted(_write_parquet(tmp_path / "set", ids, caps, 6).iterdir())
    for f in files:
        s3.put_file(f"set/{f.name}", f)
    c = shared("data", "coco2014")
    (tmp_path / "poisson.yaml").write_text("audit:\n  bootstrap: poisson\n")
    args = ["--instances", str(c / "instance_categories_val2014.jsonl"), "--chair-gt",
            str(c / "chair_objects_trainval2014.jsonl"), "--n-boot", "100", "--config",
            str(tmp_path / "poisson.yaml")]   # two task kinds on Ray: shards, then their sums
    local = cli("audit", "run", "--shards", str(tmp_path / "set"), *args, "--json",
                str(tmp_path / "local.json"), "--db", str(tmp_path / "l.duckdb"))
    assert local.returncode == 0, local.stderr
    ray_run = _capaudit(cluster, "audit", "run", "--shards", s3.url("set/{00000..00005}.parquet"),
                        "--executor", "ray", "--address", "auto", "--work-dir", s3.url("work"),
                        *args, "--json", s3.url("out/ray.json"), "--db",
                        str(tmp_path / "r.duckdb"))
    assert ray_run.returncode == 0, ray_run.stderr
    summary = " ".join(ray_run.stdout.split())
    assert "6 audited" in summary and "driver merge: replicate sums per shard" in summary
    got, want = json.loads(s3.cat("out/ray.json")), json.loads((tmp_path / "local.json")
                                                               .read_text())
    assert json.dumps(got["sets"], sort_keys=True) == json.dumps(want["sets"], sort_keys=True)
    assert got["sets"]["set"]["chair_s"]["n"] > 0 and s3.keys("work") == []


def test_a_local_work_folder_is_refused_on_two_nodes(shared, tmp_path, cluster):
    ids, caps = _rows(shared, 200)
    _write_parquet(tmp_path / "set", ids, caps, 2)
    res = _capaudit(cluster, "audit", "run", "--shards", str(tmp_path / "set"), "--executor",
                    "ray", "--address", "auto", "--work-dir", str(tmp_path / "w"),
                    "--metrics", "length", "--db", str(tmp_path / "s.duckdb"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "2 nodes" in res.stderr and "--work-dir s3://" in res.stderr
    assert not (tmp_path / "w").exists()


def test_a_lost_task_is_retried(tmp_path, cluster):
    driver = ("from capaudit.executors import get_executor\n"
              "from storage_servers import die_once\n"
              "ex = get_executor('ray', workers=2, address='auto')\n"
              f"print('GOT', [r for _, r in ex.map_unordered(die_once, [{str(tmp_path / 'f')!r}])])\n"
              "ex.close()\n")
    out = subprocess.run([sys.executable, "-c", driver], env=cluster, capture_output=True,
                         text=True, timeout=300)
    assert "GOT ['second try']" in out.stdout, out.stdout + out.stderr
    assert (tmp_path / "f").read_text() == "died"     # the first try did die


def test_two_nodes_filter_s3_shards_to_the_local_bytes(tmp_path, s3, cluster, cli):
    """``filter run --shards`` S3 to S3 on two nodes: the cleaned shards and their logs are the
    bytes of the local run; the evidence file reaches the second node under the work URL."""
    from shard_fixtures import write_evidence, write_tar

    from test_filter_shards_s3 import _corpus

    shards = _corpus(tmp_path / "in") + [write_tar(tmp_path / "in" / "shard-00003.tar")]
    gt = write_evidence(tmp_path / "gt.jsonl")
    for p in shards:
        s3.put_file(f"in/{p.name}", p)
    s3.put_file("gt.jsonl", gt)
    flags = ["--filter", "hallucination"]
    local = cli("filter", "run", "--shards", str(tmp_path / "in"), "--out",
                str(tmp_path / "ref"), *flags, "--chair-gt", str(gt), "--db",
                str(tmp_path / "l.duckdb"))
    assert local.returncode == 0, local.stderr
    run = _capaudit(cluster, "filter", "run", "--shards", s3.url("in/"), "--out", s3.url("ref"),
                    *flags, "--chair-gt", s3.url("gt.jsonl"), "--executor", "ray", "--address",
                    "auto", "--workers", "2", "--work-dir", s3.url("work"), "--db",
                    str(tmp_path / "r.duckdb"))
    assert run.returncode == 0, run.stderr
    assert "4 shards: 4 filtered" in " ".join(run.stdout.split())
    for p in sorted((tmp_path / "ref").iterdir()) + sorted((tmp_path / "ref.log").iterdir()):
        assert s3.cat(f"{p.parent.name}/{p.name}") == p.read_bytes(), p.name
    assert s3.keys("work") == []
    assert SECRET not in run.stdout + run.stderr and KEY_ID not in run.stdout + run.stderr


def test_a_local_work_folder_for_the_filter_is_refused_on_two_nodes(tmp_path, cluster):
    from shard_fixtures import write_evidence, write_tar

    write_tar(tmp_path / "in" / "s.tar")
    res = _capaudit(cluster, "filter", "run", "--shards", str(tmp_path / "in"), "--out",
                    str(tmp_path / "out"), "--filter", "hallucination", "--chair-gt",
                    str(write_evidence(tmp_path / "gt.jsonl")), "--executor", "ray",
                    "--address", "auto", "--work-dir", str(tmp_path / "w"), "--db",
                    str(tmp_path / "s.duckdb"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "2 nodes" in res.stderr and "--work-dir s3://" in res.stderr
    assert not (tmp_path / "w").exists() and not (tmp_path / "out").exists()


def test_two_nodes_judge_capability_files_from_s3_or_the_drivers_disk(tmp_path, s3, cluster,
                                                                      cli):
    """``audit capability --annotations/--qa`` on two nodes sharing no disk: the files on S3,
    and on the driver's disk alone (refused on such a cluster before i5c), give the values
    and verdicts of the local executor: the driver reads them, each task carries their
    content."""
    from capaudit.enrich.testing import FakeOpenAIServer
    from judge_script import scripted_answer
    from judged_runs import corpus
    from test_judge_remote_inputs import QA

    c = corpus(tmp_path / "c")
    qa = tmp_path / "c" / "qa.jsonl"
    qa.write_text("\n".join(json.dumps({"image_id": i, "dimension": k, "element": e,
                                        "correct": ok}) for i, k, e, ok in QA))
    remote = (s3.put_file("in/el.jsonl", c["el"]), s3.put_file("in/qa.jsonl", qa))
    out = {}
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        def judged(tag, ann, answers, *run):
            (tmp_path / f"{tag}.yaml").write_text(f"judge:\n  cache: {tmp_path / tag}.sqlite\n")
            args = ["audit", "capability", str(c["m"]), str(c["n"]), "--annotations", str(ann),
                    "--qa", str(answers), "--judge-url", srv.base_url, "--n-boot", "50",
                    "--config", str(tmp_path / f"{tag}.yaml"), "--json",
                    str(tmp_path / f"{tag}.json"), "--db", str(tmp_path / f"{tag}.duckdb"), *run]
            res = cli(*args) if not run else _capaudit(cluster, *args)
            assert res.returncode == 0, res.stderr
            out[tag] = json.loads((tmp_path / f"{tag}.json").read_text())
        judged("local", c["el"], qa)
        on_ray = ["--executor", "ray", "--address", "auto", "--workers", "2", "--work-dir",
                  s3.url("work")]
        judged("s3", *remote, *on_ray)
        judged("disk", c["el"], qa, *on_ray)
    for tag in ("s3", "disk"):
        for part in ("values", "items", "extra"):
            assert out[tag][part] == out["local"][part], (tag, part)
    assert out["s3"]["values"]["m"]["object.kt_bar"]["n"] >= 1
    assert s3.keys("work") == []
