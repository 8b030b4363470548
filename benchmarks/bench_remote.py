"""Benchmark data where it lives (#32): a sharded audit read from an S3 endpoint against the
same shards on local disk, and a Ray cluster auditing shards on S3 with 1 and 2 nodes.

    PYTHONPATH=src python benchmarks/bench_remote.py s3-cpu --captions 1000000 --shards 100
    PYTHONPATH=src python benchmarks/bench_remote.py ray --captions 10000000 --shards 100

The S3 endpoint is moto's server in a process of its own on 127.0.0.1 (its CPU is the
store's, not the audit's, and is not counted). Captions: ``oscar_val2014_all.jsonl``
repeated with fresh image ids in parquet shards (``bench_shards.make_shards``); the
text-only audit (vocabulary, length, gender words), 1 worker, a fresh store and work
folder per run. Each run is a fresh ``capaudit audit run --shards`` process whose CPU
seconds (user + sys) and peak RSS come from ``os.wait4``.

``s3-cpu``: local shards and local work folder; shards on S3 and a local work folder;
shards and work folder on S3. The goal: reading from S3 costs <= 1.3x the CPU of local.

``ray``: a Ray cluster started here (``ray start``, its own temporary folders, stopped by
process group at the end), first one node of 1 CPU, then a second node added (2 workers);
shards and work folder on S3; wall time, the driver's peak RSS and each Ray worker
process's peak RSS (sampled every 0.2 s with psutil). The load average is printed: other
processes on the machine distort wall times; CPU seconds are the figure to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_shards import make_shards  # noqa: E402

KEY, SECRET = "AKIABENCHMARKKEY0001", "bench-secret-0123456789"
METRICS = ["--metrics", "vocab,length,gender_error"]
RAY = [sys.executable, "-m", "ray.scripts.scripts"]   # this interpreter's ray, not PATH's


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto() -> tuple[subprocess.Popen, dict]:
    port = _port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    env = {**os.environ, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
           "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET,
           "AWS_DEFAULT_REGION": "us-east-1", "RAY_AUTH_MODE": "disabled",
           "RAY_USAGE_STATS_ENABLED": "0"}
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    return proc, env


def upload(folder: Path, bucket: str, prefix: str, env: dict) -> str:
    os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
    import s3fs

    fs = s3fs.S3FileSystem()
    if not fs.exists(bucket):
        fs.mkdir(bucket)
    fs.put(str(folder) + "/", f"{bucket}/{prefix}/", recursive=True)
    return f"s3://{bucket}/{prefix}/"


def run(cmd: list[str], env: dict, sample=None) -> dict:
    """One fresh process: wall, CPU (user + sys) and peak RSS of it (os.wait4)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out_thread = threading.Thread(target=lambda: setattr(proc, "captured", (
        proc.stdout.read(), proc.stderr.read())), daemon=True)
    out_thread.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    out_thread.join()
    if status:
        raise SystemExit(b"".join(proc.captured)[-3000:].decode(errors="replace"))
    return {"wall_s": round(wall, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_mb": round(usage.ru_maxrss / 1024), "load1": round(os.getloadavg()[0], 1)}


def audit_cmd(spec: str, work: str, tmp: Path, n_boot: int, extra=()) -> list[str]:
    return [sys.executable, "-m", "capaudit.cli.main", "audit", "run", "--shards", spec,
            *METRICS, "--workers", "1", "--n-boot", str(n_boot), "--work-dir", work,
            "--db", str(tmp / f"{time.time_ns()}.duckdb"), *extra]


def s3_cpu(args, shards: Path, tmp: Path) -> None:
    moto, env = start_moto()
    try:
        url = upload(shards, "bench", "shards", env)
        runs = {"local shards, local work": (str(shards), str(tmp / "w1")),
                "s3 shards, local work": (url, str(tmp / "w2")),
                "s3 shards, s3 work": (url, "s3://bench/work")}
        out = {}
        for label, (spec, work) in runs.items():
            out[label] = run(audit_cmd(spec, work, tmp, args.n_boot), env)
            print(json.dumps({label: out[label]}), flush=True)
        base = out["local shards, local work"]["cpu_s"]
        print(json.dumps({k: round(v["cpu_s"] / base, 3) for k, v in out.items()}), flush=True)
    finally:
        os.killpg(moto.pid, signal.SIGTERM)


class RaySampler(threading.Thread):
    """Peak RSS of each Ray worker process (``ray::...``, a child of one of the cluster's
    raylets: the process groups of the ``ray start`` commands started here)."""

    def __init__(self, groups: list[int]):
        super().__init__(daemon=True)
        self.groups, self.peak, self.cpu, self.stop = groups, {}, {}, threading.Event()

    def run(self) -> None:
        import psutil

        while not self.stop.wait(0.2):
            for p in psutil.process_iter(["pid", "ppid", "cmdline", "memory_info"]):
                try:
                    ours = os.getpgid(p.pid) in self.groups or \
                        os.getpgid(p.info["ppid"]) in self.groups
                    if ours and (p.info["cmdline"] or [""])[0].startswith("ray::") \
                            and "Agent" not in p.info["cmdline"][0]:
                        rss = p.info["memory_info"].rss
                        self.peak[p.pid] = max(self.peak.get(p.pid, 0), rss)
                        t = p.cpu_times()
                        self.cpu[p.pid] = max(self.cpu.get(p.pid, 0.0), t.user + t.system)
                except (OSError, psutil.Error, TypeError):
                    continue


def start_node(env: dict, head_address: str | None, tmp: Path) -> tuple[subprocess.Popen, str]:
    temp = Path(tempfile.mkdtemp(prefix="bench-ray-", dir=tmp))
    base = [*RAY, "start", "--num-cpus", "1", "--object-store-memory", str(200 * 2 ** 20),
            "--disable-usage-stats", "--block", "--temp-dir", str(temp)]
    cmd = base + (["--address", head_address] if head_address else
                  ["--head", "--port", str(_port()), "--node-ip-address", "127.0.0.1",
                   "--include-dashboard=false", "--ray-client-server-port", str(_port())])
    log = temp / "out"
    proc = subprocess.Popen(cmd, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    while "--block" not in log.read_text(errors="replace"):
        if proc.poll() is not None:
            raise SystemExit(log.read_text())
        time.sleep(0.25)
    text = log.read_text()
    address = head_address or text.split("ray start --address='")[1].split("'")[0]
    return proc, address


def ray_bench(args, shards: Path, tmp: Path) -> None:
    moto, env = start_moto()
    nodes: list[subprocess.Popen] = []
    try:
        url = upload(shards, "bench", "shards", env)
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src")
        head, address = start_node(env, None, tmp)
        nodes.append(head)
        env["RAY_ADDRESS"] = address
        for n_nodes in (1, 2):
            if n_nodes == 2:
                nodes.append(start_node(env, address, tmp)[0])
                time.sleep(3)
            sampler = RaySampler([p.pid for p in nodes])
            sampler.start()
            res = run(audit_cmd(url, f"s3://bench/work{n_nodes}", tmp, args.n_boot,
                                ["--executor", "ray", "--address", "auto"]), env)
            sampler.stop.set()
            sampler.join()
            peaks = sorted(round(v / 2 ** 20) for v in sampler.peak.values())
            print(json.dumps({"ray workers": n_nodes, "captions": args.captions, **res,
                              "driver_peak_rss_mb": res["peak_rss_mb"],
                              "worker_peak_rss_mb": peaks,
                              "worker_cpu_s": round(sum(sampler.cpu.values()), 1)}), flush=True)
    finally:
        for p in nodes:
            os.killpg(p.pid, signal.SIGTERM)
        for p in nodes:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        os.killpg(moto.pid, signal.SIGTERM)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["s3-cpu", "ray"])
    ap.add_argument("--shared", default=os.environ.get("CAPAUDIT_SHARED", "../shared"))
    ap.add_argument("--captions", type=int, default=1_000_000)
    ap.add_argument("--shards", type=int, default=100)
    ap.add_argument("--n-boot", type=int, default=200)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-remote-"))
    try:
        src = Path(args.shared) / "data" / "captioners" / "oscar_val2014_all.jsonl"
        shards = make_shards(src, tmp / "shards", args.captions, args.shards)
        print(f"{args.captions:,} captions in {args.shards} shards "
              f"({sum(p.stat().st_size for p in shards.iterdir()) / 2 ** 20:.0f} MB)", flush=True)
        (s3_cpu if args.what == "s3-cpu" else ray_bench)(args, shards, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
