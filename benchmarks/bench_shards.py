"""Benchmark the sharded audit: captions/s per core (1 and 2 local workers, Ray with 2), and a
large set end to end (wall, peak memory).

    PYTHONPATH=src python benchmarks/bench_shards.py scaling [--shared ../shared]
    PYTHONPATH=src python benchmarks/bench_shards.py big --captions 10000000 --shards 100

``scaling``: the shared ``oscar_val2014_all.jsonl`` (40,504 captions) repeated
``--repeat`` times with fresh image ids in 8 parquet shards; the text-only
audit (no annotation files: vocabulary, length, gender words; CHAIR and recall
are skipped) with a fresh work directory per run, so every shard is audited.
``big``: the same captions repeated to ``--captions`` with fresh ids in
``--shards`` parquet shards, audited with 2 local workers. Each run is a fresh
``capaudit audit run --shards`` process timed by ``/usr/bin/time``-style
``resource.getrusage`` (peak RSS of the driver and of its largest worker).
The load average is printed: other processes on the machine distort figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def make_shards(src: Path, out: Path, n_captions: int, n_shards: int) -> Path:
    """``n_captions`` captions cycling over ``src``'s, fresh image ids 1.., ``n_shards`` files."""
    caps = [json.loads(line)["caption"] for line in src.open()]
    out.mkdir(parents=True, exist_ok=True)
    per = -(-n_captions // n_shards)
    base = pa.array(caps, pa.string())
    for s in range(n_shards):
        lo, hi = s * per, min((s + 1) * per, n_captions)
        idx = pa.array([i % len(caps) for i in range(lo, hi)], pa.int64())
        pq.write_table(pa.table({"key": pa.array(range(lo + 1, hi + 1), pa.int64()),
                                 "caption": base.take(idx)}), out / f"{s:05d}.parquet",
                       row_group_size=65_536)
    return out


def audit(shards: Path, executor: str, workers: int, n_boot: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix="bench-shards-"))
    cmd = [sys.executable, "-m", "capaudit.cli.main", "audit", "run", "--shards", str(shards),
           "--executor", executor, "--workers", str(workers), "--n-boot", str(n_boot),
           "--work-dir", str(work / "w"), "--db", str(work / "b.duckdb"),
           "--json", str(work / "out.json"), "--metrics", "vocab,length,gender_error"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(proc.stdout[-2000:] + proc.stderr[-2000:])
    n = json.loads((work / "out.json").read_text())["sets"]
    n_caps = next(iter(n.values()))["length"]["n"]
    shutil.rmtree(work, ignore_errors=True)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"executor": executor, "workers": workers, "captions": n_caps, "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1), "captions_per_s": round(n_caps / wall),
            "captions_per_s_per_core": round(n_caps / wall / workers),
            "peak_rss_mb (largest child)": round(after.ru_maxrss / 1024),
            "load1": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["scaling", "big"])
    ap.add_argument("--shared", default=os.environ.get("CAPAUDIT_SHARED", "../shared"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--captions", type=int, default=10_000_000)
    ap.add_argument("--shards", type=int, default=100)
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--out", default=None, help="keep the shards here (default: a temp folder)")
    args = ap.parse_args()
    src = Path(args.shared) / "data" / "captioners" / "oscar_val2014_all.jsonl"
    tmp = Path(args.out or tempfile.mkdtemp(prefix="bench-shard-data-"))
    if args.what == "scaling":
        shards = make_shards(src, tmp / "scaling", 40_504 * args.repeat, 8)
        runs = [("local", 1), ("local", 2)]
        try:
            import ray  # noqa: F401
            runs.append(("ray", 2))
        except ImportError:
            print("ray not installed: pip install 'capaudit[ray]' for the Ray figure")
        for executor, workers in runs:
            print(json.dumps(audit(shards, executor, workers, args.n_boot)), flush=True)
    else:
        t0 = time.perf_counter()
        shards = make_shards(src, tmp / "big", args.captions, args.shards)
        print(f"wrote {args.captions:,} captions in {args.shards} shards in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        print(json.dumps(audit(shards, "local", 2, args.n_boot)), flush=True)
    if not args.out:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
