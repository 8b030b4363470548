"""What opening the store costs: every command opens it once (the one opener, #33).

    PYTHONPATH=src python benchmarks/bench_store_open.py [--runs 20] [--opens 200] [--src PATH]

1. ``capaudit sets list`` in ``--runs`` fresh processes on a store holding the bundled
   nic set: mean CPU seconds (user+sys of the child) and max RSS per command;
2. ``Store(db, read_only=True, sandbox=True)`` opened and closed ``--opens`` times in one
   process: mean milliseconds per open (the opener's own checks are in it).

``--src`` runs another checkout's sources (the code before a change) on the same store.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def command_cost(src: str, db: Path, runs: int) -> dict:
    env = {**os.environ, "PYTHONPATH": src}
    cmd = [sys.executable, "-m", "capaudit.cli.main", "sets", "list", "--db", str(db)]
    subprocess.run(cmd, env=env, check=True, capture_output=True)   # warm the file cache
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss = 0
    for _ in range(runs):
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        rss = max(rss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"command": "sets list", "runs": runs, "cpu_s_mean": round(cpu / runs, 4),
            "max_rss_mb": round(rss / 1024, 1)}


def open_cost(src: str, db: Path, opens: int) -> dict:
    code = ("import sys, time; from capaudit.store import Store; db = sys.argv[1]; "
            "n = int(sys.argv[2]); Store(db, read_only=True, sandbox=True).close(); "
            "t = time.process_time()\n"
            "for _ in range(n): Store(db, read_only=True, sandbox=True).close()\n"
            "print((time.process_time() - t) / n * 1000)")
    out = subprocess.run([sys.executable, "-c", code, str(db), str(opens)], check=True,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": src})
    return {"open": "Store(read_only, sandbox)", "opens": opens,
            "cpu_ms_per_open": round(float(out.stdout.strip()), 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--opens", type=int, default=200)
    ap.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "s.duckdb"
        env = {**os.environ, "PYTHONPATH": args.src}
        nic = subprocess.run([sys.executable, "-c", "import capaudit; "
                              "print(capaudit.demo_file('nic.jsonl'))"], env=env, check=True,
                             capture_output=True, text=True).stdout.strip()
        subprocess.run([sys.executable, "-m", "capaudit.cli.main", "sets", "add", "nic", nic,
                        "--db", str(db)], env=env, check=True, capture_output=True)
        t0 = time.perf_counter()
        print(json.dumps({"src": args.src, **command_cost(args.src, db, args.runs)}))
        print(json.dumps({"src": args.src, **open_cost(args.src, db, args.opens)}))
        print(json.dumps({"wall_s": round(time.perf_counter() - t0, 1)}))


if __name__ == "__main__":
    main()
