"""Ingest rate and peak memory for JSONL caption files.

Writes N synthetic captions (real COCO-style sentences recombined) to a JSONL
file, then times ``add_caption_set`` into a fresh DuckDB store in a child
process and reports captions/s and that process's peak RSS.

    python benchmarks/bench_ingest.py --n 1000000
    python benchmarks/bench_ingest.py --n 10000000      # the 10M memory target

Targets (issue 2): >= 200,000 captions/s from JSONL; < 2 GB peak for 10M.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ("a man woman dog cat riding sitting on the with of in next to large small red white "
         "table bus train giraffe pizza plate standing street field kite surfboard wave").split()


def make_file(path: Path, n: int) -> None:
    rng = random.Random(0)
    with open(path, "w") as fh:
        for i in range(n):
            cap = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 14)))
            fh.write(json.dumps({"image_id": i, "caption": cap}) + "\n")


def child(path: str, db: str) -> None:
    from capaudit.io.ingest import add_caption_set
    from capaudit.store import Store

    store = Store(db)
    t = time.perf_counter()
    info = add_caption_set(store, "bench", path).info
    dt = time.perf_counter() - t
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"captions": info.n_captions, "seconds": round(dt, 2),
                      "captions_per_s": round(info.n_captions / dt),
                      "peak_rss_mb": round(peak_mb)}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--child", nargs=2)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "caps.jsonl"
        make_file(path, args.n)
        size = path.stat().st_size / 1e6
        out = subprocess.run([sys.executable, __file__, "--child", str(path),
                              str(Path(tmp) / "b.duckdb")], capture_output=True, text=True,
                             env={**os.environ})
        if out.returncode:
            sys.exit(out.stderr)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"ingest {res['captions']:,} captions ({size:.0f} MB JSONL): {res['seconds']} s, "
              f"{res['captions_per_s']:,} captions/s, peak RSS {res['peak_rss_mb']:,} MB")


if __name__ == "__main__":
    main()
