"""``capaudit query`` on a large result: peak memory and CPU seconds per output mode.

    PYTHONPATH=src python benchmarks/bench_query_stream.py [--rows 3000000] [--modes table,csv,json,out-csv,out-parquet] [--work /tmp/capaudit-bench-query]

Builds (once) a store whose ``caption_details`` holds ``--rows`` rows (the shape an audit
writes: ids, token counts, mention lists, CHAIR flags), then runs, each in a fresh process
under ``/usr/bin/time -v``, ``capaudit query "SELECT * FROM caption_details"`` with its
standard output sent to a file: the default table, ``--csv``, ``--json``, and ``--out
FILE.csv`` / ``--out FILE.parquet`` (DuckDB's COPY). Prints one JSON line per mode: max
RSS (MB), user+sys CPU seconds, wall seconds, bytes written. Issue #33 measured main at
3M rows piped to a file: 403 s and 4.9 GB (table); ``--csv`` of 10M rows: 2.0 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

SQL = "SELECT * FROM caption_details"


def build(db: Path, rows: int) -> None:
    """A store with ``rows`` rows of per-caption details (built by SQL, no audit run)."""
    if db.exists():
        return
    from capaudit.store import Store

    with Store(db) as store, store.transaction() as con:
        con.execute(
            "INSERT INTO caption_details (run_id, set_name, row_idx, image_id, n_tokens, "
            "n_sentences, mentioned, hallucinated, gender_pred, chair_s, recall) "
            "SELECT 1, 'bench', i, 100000 + i // 5, 8 + i % 30, 1 + i % 3, "
            "['dog', 'bed', 'person'][1:1 + i % 3], CASE WHEN i % 7 = 0 THEN ['cat'] "
            "ELSE [] END, ['male', 'female', 'neutral'][1 + i % 3], i % 7 = 0, "
            "(i % 100) / 100.0 FROM range(?) t(i)", [rows])


def measure(cmd: list[str], stdout_path: Path, env: dict) -> dict:
    with open(stdout_path, "wb") as out:
        res = subprocess.run(["/usr/bin/time", "-v", *cmd], stdout=out,
                             stderr=subprocess.PIPE, env=env, check=False)
    err = res.stderr.decode(errors="replace")

    def field(name: str) -> float:
        found = re.search(rf"{re.escape(name)}: ([0-9.:]+)", err)
        if not found:
            return float("nan")
        text = found.group(1)
        if ":" in text:   # wall clock h:mm:ss or m:ss.ss
            parts = [float(p) for p in text.split(":")]
            return sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
        return float(text)

    return {"rc": res.returncode, "max_rss_mb": round(field("Maximum resident set size (kbytes)")
                                                       / 1024, 1),
            "cpu_s": round(field("User time (seconds)") + field("System time (seconds)"), 2),
            "wall_s": round(field("Elapsed (wall clock) time (h:mm:ss or m:ss)"), 2),
            "last_error": err.strip().splitlines()[0][:200] if res.returncode else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=3_000_000)
    ap.add_argument("--modes", default="table,csv,json,out-csv,out-parquet")
    ap.add_argument("--work", default="/tmp/capaudit-bench-query")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    db = work / f"details-{args.rows}.duckdb"
    build(db, args.rows)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")])}
    base = [sys.executable, "-m", "capaudit.cli.main", "query", SQL, "--db", str(db)]
    for mode in args.modes.split(","):
        stdout_file = work / f"stdout-{mode}.txt"
        extra = {"table": [], "csv": ["--csv"], "json": ["--json"],
                 "out-csv": ["--out", str(work / "out.csv")],
                 "out-parquet": ["--out", str(work / "out.parquet")]}[mode]
        for f in (work / "out.csv", work / "out.parquet"):
            f.unlink(missing_ok=True)
        got = measure(base + extra, stdout_file, env)
        written = stdout_file.stat().st_size
        for f in (work / "out.csv", work / "out.parquet"):
            if f.exists():
                written += f.stat().st_size
        print(json.dumps({"rows": args.rows, "mode": mode, **got, "bytes_out": written}),
              flush=True)
        stdout_file.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
