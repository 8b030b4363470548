"""The sharded audit's driver alone: peak memory of merging N shard states, per-image merge
versus per-shard replicate sums (``capaudit.audit.shards.sums``).

    PYTHONPATH=src python benchmarks/bench_shard_driver.py --images 10000000 --shards 100

Synthetic but real-shaped states: one shard is audited for real (``--per-shard``
oscar captions with fresh image ids, metrics ``vocab,length``), and its state is
copied to every shard with the image ids moved to that shard's own range (so no
image spans two shards, as in img2dataset shards). Each merge runs in a fresh
process (``merge_shards`` on the states and markers written here, 1 local
worker, the Poisson bootstrap with ``--n-boot`` replicates) and reports its wall
time and peak RSS (``ru_maxrss``). Prints one JSON line per mode.
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

import numpy as np

METRICS = ["vocab", "length"]


def _cfg(n_boot: int) -> dict:
    from capaudit.audit.runner import DEFAULTS

    return {**DEFAULTS, "metrics": METRICS, "n_boot": n_boot, "workers": 1,
            "bootstrap": "poisson"}


def _shift(parts: dict, off: int) -> dict:
    """A copy of a shard state whose image ids are ``off`` higher."""
    from capaudit.metrics.diversity import Vocabulary
    from capaudit.metrics.state import UnitSums

    def move(st):
        if isinstance(st, UnitSums):
            return UnitSums(st.keys + off, st.values, st.totals)
        if isinstance(st, Vocabulary):
            return Vocabulary(dict(st.token_counts),
                              {t: [k + off for k in p] for t, p in st.postings.items()}, st.n)
        raise TypeError(type(st))

    return {**parts, "units": move(parts["units"]),
            "states": {k: move(v) for k, v in parts["states"].items()}}


def write_states(work: Path, shared: Path, n_images: int, n_shards: int, n_boot: int) -> None:
    from capaudit.audit.engine import accumulate
    from capaudit.audit.shards.run import _parts
    from capaudit.audit.shards.task import STATE_SUFFIX, sha256_hex as _sha256
    from capaudit.audit.shards.state_io import dumps_state
    from capaudit.core.storage.paths import write_whole
    from capaudit.io.markers import write_marker

    per = n_images // n_shards
    caps = [json.loads(line)["caption"] for line in
            (shared / "data" / "captioners" / "oscar_val2014_all.jsonl").open()]
    rows = ((i + 1, caps[i % len(caps)]) for i in range(per))
    acc, _ = accumulate(rows, None, METRICS, "reference", 1, 10, 50_000, config=_cfg(n_boot))
    base = _parts(acc)
    for s in range(n_shards):
        data = dumps_state({"acc": _shift(base, s * per), "acc2": None})
        write_whole(work / f"{s:05d}{STATE_SUFFIX}", data)
        cov = {"n_images": per, "n_with_ids": per, "covered": {}, "namespaces": [None],
               "units": per, "unit_images": per,
               "id_min": s * per + 1, "id_max": (s + 1) * per}
        write_marker(work, f"{s:05d}.parquet", "bench", {"index": s, "n_captions": per,
                                                         "coverage": cov,
                                                         "state_sha256": _sha256(data)})


def child(work: Path, mode: str, n_boot: int) -> None:
    from capaudit.audit.shards.merge import merge_shards, sums_jobs
    from capaudit.audit.shards.sums import shard_sums, sums_plan
    from capaudit.audit.shards.task import ShardTask
    from capaudit.io.annotation_files import Annotations
    from capaudit.io.markers import read_marker

    markers = sorted(work.glob("*.done.json"))
    names = [m.name[:-len(".done.json")] + ".parquet" for m in markers]
    cfg, ann = _cfg(n_boot), Annotations()
    tasks = [ShardTask(str(work / n), i, str(work), cfg, "bench", ann) for i, n in enumerate(names)]
    parts = [read_marker(work, n)["coverage"] for n in names]
    t0 = time.perf_counter()
    if mode == "per-image":
        res = merge_shards(tasks, cfg, ann)
    else:     # the replicate sums in this process (a run's second pass, on 1 worker)
        plan, why = sums_plan(cfg, parts)
        sums = [shard_sums(job) for job in sums_jobs(tasks, plan, cfg)] if plan else []
        res = merge_shards(tasks, cfg, ann, plan, sums, why)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"mode": res.meta["merge"], "shards": len(tasks),
                      "images": res.meta["n_images"], "n_boot": n_boot, "wall_s": round(wall, 1),
                      "peak_rss_mb": round(rss), "values": {k: [r.value, r.ci_low, r.ci_high]
                                                            for k, r in res.results.items()}}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=10_000_000)
    ap.add_argument("--shards", type=int, default=100)
    ap.add_argument("--n-boot", type=int, default=20)
    ap.add_argument("--shared", default=os.environ.get("CAPAUDIT_SHARED", "../shared"))
    ap.add_argument("--child", nargs=2, metavar=("WORK", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(Path(args.child[0]), args.child[1], args.n_boot)
    work = Path(tempfile.mkdtemp(prefix="bench-driver-"))
    try:
        t0 = time.perf_counter()
        write_states(work, Path(args.shared), args.images, args.shards, args.n_boot)
        size = sum(p.stat().st_size for p in work.glob("*.npz"))
        print(f"wrote {args.shards} states of {args.images // args.shards:,} images "
              f"({size / 2**20:,.0f} MiB) in {time.perf_counter() - t0:.0f} s", flush=True)
        for mode in ("sums", "per-image"):
            subprocess.run([sys.executable, __file__, "--n-boot", str(args.n_boot),
                            "--child", str(work), mode], check=True)
        print(f"load average {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
