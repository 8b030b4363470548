"""Benchmark the upstream audit: captions/s and peak memory.

    PYTHONPATH=src python benchmarks/bench_audit.py [--shared ../shared] [--workers 2] [--skip-long]

Every measurement runs in a fresh process (its own peak RSS) and prints the
1-minute load average: other processes on the machine distort the figures, so
repeat when the load is low. The oscar figure is the best of 3 runs.

1. ``oscar_val2014_all.jsonl`` (40,504 short captions), every metric, bootstrap
   1,000 resamples, on ``--workers`` cores (the reference CHAIR code runs about
   2,600 captions/s on this machine class; the target is >= 52,000/s).
2. Long captions (ShareGPT4V length, ~170 tokens) made by concatenating shared
   COCO human captions: 25k, 50k and 100k captions streamed through
   :func:`capaudit.audit.engine.audit_stream` (target: 100k in < 60 s), each in a
   fresh process so its peak RSS is its own: it should stay flat as input grows.

3. Whole process: ``capaudit audit run`` on the oscar file with the annotation files, as a
   user runs it (start-up, imports, annotation loading, the store): the first run in a
   fresh store (annotation files parsed and cached) and a second one (cache hit). Wall and
   CPU (user + system, the process and its workers) are printed; under load compare CPU.

Peak memory against the number of captions and of images (the audit, with and without
the store) is ``benchmarks/bench_memory.py``.

The long captions are all distinct (``capaudit.audit.synthetic.long_captions``).
Annotation loading is timed separately for 1. (it is done once per session).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or ROOT.parent / "shared")


def peak_rss_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def cpu_seconds() -> float:
    """User + system CPU of this process and its reaped children (the record workers)."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def load_annotations(shared: Path):
    from capaudit.io.annotation_files import Annotations, load_chair_gt, load_demographics, load_instances
    coco = shared / "data" / "coco2014"
    inst, _ = load_instances(coco / "instance_categories_val2014.jsonl")
    gender, skin = load_demographics(coco / "demographics_val2014.jsonl")
    return Annotations(instances=inst, chair_gt=load_chair_gt(coco / "chair_objects_trainval2014.jsonl"),
                       gender=gender, skin_tone=skin)


def long_captions(shared: Path, n: int, target_tokens: int = 170):
    """Yield ``(image_id, caption)``: COCO human captions joined until ~target tokens."""
    from capaudit.audit.synthetic import long_captions as make

    return make(shared / "data" / "coco2014" / "captions_val2014_subset.json", n, target_tokens)


def bench_short(shared: Path, workers: int, n_boot: int, repeat: int = 3) -> dict:
    """oscar_val2014_all with ``n_boot`` resamples: best of ``repeat`` runs (after a warm-up)."""
    from capaudit.audit.engine import audit_captions
    t0 = time.perf_counter()
    ann = load_annotations(shared)
    t_ann = time.perf_counter() - t0
    rows = [json.loads(line) for line in open(shared / "data" / "captioners" / "oscar_val2014_all.jsonl")]
    ids, caps = [r["image_id"] for r in rows], [r["caption"] for r in rows]
    audit_captions(ids[:2000], caps[:2000], ann, n_boot=min(n_boot, 10), workers=1)  # imports
    times, cpus = [], []
    load = os.getloadavg()[0]
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), cpu_seconds()
        res = audit_captions(ids, caps, ann, n_boot=n_boot, workers=workers)
        times.append(time.perf_counter() - t0)
        cpus.append(cpu_seconds() - c0)
    dt = min(times)
    return {"captions": len(caps), "n_boot": n_boot, "seconds": round(dt, 3),
            "all_seconds": [round(t, 3) for t in times], "cpu_s": round(min(cpus), 3),
            "captions_per_s": round(len(caps) / dt),
            "annotations_s": round(t_ann, 2), "peak_rss_mb": round(peak_rss_mb(), 1),
            "load1": round(max(load, os.getloadavg()[0]), 2),
            "values": {k: [round(v.value, 3)] + ([round(v.ci_low, 3), round(v.ci_high, 3)]
                                                  if v.ci_low is not None else [])
                       for k, v in res.results.items() if v.value is not None}}


def bench_long(shared: Path, n: int, workers: int, n_boot: int) -> dict:
    from capaudit.audit.engine import audit_stream
    ann = load_annotations(shared)
    base = peak_rss_mb()
    t0, c0 = time.perf_counter(), cpu_seconds()
    res = audit_stream(long_captions(shared, n), ann, n_boot=n_boot, workers=workers, chunk_size=20_000)
    dt = time.perf_counter() - t0
    return {"captions": n, "cpu_s": round(cpu_seconds() - c0, 1), "load1": round(os.getloadavg()[0], 2),
            "mean_tokens": round(res.results["length"].value, 1),
            "seconds": round(dt, 2), "captions_per_s": round(n / dt), "peak_rss_mb": round(peak_rss_mb(), 1),
            "peak_rss_after_annotations_mb": round(base, 1)}


def bench_whole(shared: Path, n_boot: int) -> list[dict]:
    """``capaudit audit run`` as a user runs it, twice on one fresh store (parse, then cache)."""
    import tempfile

    coco = shared / "data" / "coco2014"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "capaudit.cli.main", "audit", "run",
               str(shared / "data" / "captioners" / "oscar_val2014_all.jsonl"),
               "--instances", str(coco / "instance_categories_val2014.jsonl"),
               "--chair-gt", str(coco / "chair_objects_trainval2014.jsonl"),
               "--demographics", str(coco / "demographics_val2014.jsonl"),
               "--n-boot", str(n_boot), "--db", str(Path(tmp) / "bench.duckdb")]
        for label in ("first run (parse + cache annotations)", "second run (cached annotations)"):
            c0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            subprocess.run(cmd, env=env, check=True, capture_output=True)
            dt, c1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
            out.append({"label": label, "seconds": round(dt, 2),
                        "cpu_s": round(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime, 2),
                        "peak_rss_mb": round(c1.ru_maxrss / 1024, 1),
                        "load1": round(os.getloadavg()[0], 2)})
    return out


def _child(args: argparse.Namespace, flag: str, value: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, __file__, "--shared", str(args.shared), "--workers", str(args.workers),
           "--n-boot", str(args.n_boot), flag, str(value)]
    return json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--long", type=int, default=0, help=argparse.SUPPRESS)   # child mode
    ap.add_argument("--short", type=int, default=-1, help=argparse.SUPPRESS)  # child mode (n_boot)
    ap.add_argument("--sizes", default="25000,50000,100000")
    ap.add_argument("--skip-long", action="store_true")
    args = ap.parse_args()
    if not (args.shared / "data").is_dir():
        sys.exit(f"shared data not found at {args.shared} (use --shared or CAPAUDIT_SHARED)")
    if args.long:
        print(json.dumps(bench_long(args.shared, args.long, args.workers, args.n_boot)))
        return
    if args.short >= 0:
        print(json.dumps(bench_short(args.shared, args.workers, args.short)))
        return
    up = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, load average at start {up[0]:.2f} {up[1]:.2f} {up[2]:.2f}; "
          f"workers={args.workers}")
    values = None
    for nb in (args.n_boot, 0):  # each in a fresh process: its own peak RSS
        r = _child(args, "--short", nb)
        values = values or r["values"]
        print(f"oscar_val2014_all: {r['captions']:,} captions, n_boot={nb:>4}: {r['seconds']:.3f} s "
              f"(best of {r['all_seconds']}; CPU {r['cpu_s']} s) {r['captions_per_s']:,} captions/s, "
              f"peak RSS {r['peak_rss_mb']} MB, load {r['load1']}")
    print(f"  values [95% interval]: {values}")
    for r in bench_whole(args.shared, args.n_boot):
        print(f"whole process, capaudit audit run oscar_val2014_all, n_boot={args.n_boot}, "
              f"{r['label']}: {r['seconds']:.2f} s wall, CPU {r['cpu_s']} s, "
              f"peak RSS {r['peak_rss_mb']} MB, load {r['load1']}")
    if args.skip_long:
        return
    for n in [int(x) for x in args.sizes.split(",")]:
        r = _child(args, "--long", n)
        print(f"long captions: {r['captions']:>7,} x ~{r['mean_tokens']} tokens: {r['seconds']:.1f} s "
              f"(CPU {r['cpu_s']} s) "
              f"({r['captions_per_s']:,}/s), peak RSS {r['peak_rss_mb']} MB "
              f"(annotations alone {r['peak_rss_after_annotations_mb']} MB), load {r['load1']}")


if __name__ == "__main__":
    main()
