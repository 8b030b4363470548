"""capaudit against the reference CHAIR code, side by side, on this machine.

    PYTHONPATH=src python benchmarks/bench_vs_reference.py [--sizes 1,5,20] [--n-boot 1000] [--workers 2]

For each size (copies of ``oscar_val2014_all.jsonl``, 40,504 captions: 1 -> 40,504,
5 -> 202,520, 20 -> 810,080), every measurement in a fresh process:

* the reference (:mod:`reference_chair`, a port of ``chair.py``'s algorithm and cost
  profile): CHAIR_s and CHAIR_i;
* ``capaudit audit run FILE --instances --chair-gt --demographics`` as a user runs it
  (start-up, imports, the annotations from the store's parse cache, coverage, every default
  metric with ``--n-boot`` resamples, per-caption details stored): the whole process. One
  cold run first (empty store: the annotation files parsed and cached), not counted;
* in-process, the part without start-up: the reference's caption loop (``chair_seconds``)
  and capaudit's :func:`~capaudit.audit.engine.audit_captions` on captions and annotations
  already in memory.

Copies are made with :func:`reference_chair.case_variant`: the same image ids, each copy's
captions with other letters upper-cased, so every value stays that of the 40k file (both
tools lower-case first) while capaudit's identical-caption shortcut sees no more repeats
than the real file has. Fresh image ids would have no ground truth.

The machine is shared: CPU seconds (user + system of the process and its children, from
``getrusage``) are the figure to compare; wall seconds and the load average before and after
each run are printed beside them. The CHAIR values of both tools are checked equal.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
DEFAULT_SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or ROOT.parent / "shared")
# bytecode cached as for an installed package (pip compiles it): with
# PYTHONDONTWRITEBYTECODE set, every start would compile ~80 capaudit modules again
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def set_src(src: Path) -> None:
    """The capaudit tree the children import (``--src``: compare two versions)."""
    ENV["PYTHONPATH"] = os.pathsep.join([str(src), str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH", "")])


def timed_child(cmd: list[str]) -> dict:
    """Run ``cmd``; its wall and CPU seconds (children's rusage) and the load around it."""
    load0, c0, t0 = os.getloadavg()[0], resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True, check=False)
    wall, c1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        sys.exit(f"{' '.join(cmd[:4])}... failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return {"wall": wall, "cpu": c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime,
            "load": (load0, os.getloadavg()[0]), "stdout": proc.stdout}


def scaled_file(src: Path, copies: int, folder: Path) -> Path:
    """``src`` repeated ``copies`` times as case variants (see the module docstring)."""
    from reference_chair import read_captions

    if copies == 1:
        return src
    out = folder / f"{src.stem}_x{copies}.jsonl"
    ids, caps = read_captions(src, copies)
    with open(out, "w", encoding="utf-8") as fh:
        for i, c in zip(ids, caps):
            fh.write(json.dumps({"image_id": i, "caption": c}) + "\n")
    return out


def annotation_args(shared: Path) -> list[str]:
    coco = shared / "data" / "coco2014"
    return ["--instances", str(coco / "instance_categories_val2014.jsonl"),
            "--chair-gt", str(coco / "chair_objects_trainval2014.jsonl"),
            "--demographics", str(coco / "demographics_val2014.jsonl")]


def in_process(path: Path, db: Path, shared: Path, n_boot: int, workers: int) -> dict:
    """Child mode: capaudit's audit of captions already in memory (annotations from the store)."""
    from reference_chair import cpu_seconds

    from capaudit.audit.engine import audit_captions
    from capaudit.io.annotation_store import resolve_annotations
    from capaudit.store.db import Store

    a = annotation_args(shared)
    with Store(db) as store:
        ann = resolve_annotations(store, a[1], a[3], a[5])
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    ids, caps = [r["image_id"] for r in rows], [r["caption"] for r in rows]
    t0, c0 = time.perf_counter(), cpu_seconds()
    res = audit_captions(ids, caps, ann, n_boot=n_boot, workers=workers)
    return {"seconds": time.perf_counter() - t0, "cpu_s": cpu_seconds() - c0,
            "chair_s": round(res.results["chair_s"].value, 3), "chair_i": round(res.results["chair_i"].value, 3)}


def line(label: str, r: dict) -> str:
    return (f"  {label:44s} {r['cpu']:7.2f} s CPU {r['wall']:7.2f} s wall   "
            f"(load {r['load'][0]:.1f} -> {r['load'][1]:.1f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--sizes", default="1,5,20", help="copies of the 40,504 oscar captions")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2, help="cached whole-process runs (best counted)")
    ap.add_argument("--ref-max-copies", type=int, default=20, help="above this many copies the "
                    "reference is not run: its CPU is extrapolated linearly from the largest "
                    "measured size (it has no caches: its cost per caption is flat)")
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="capaudit source tree to time")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)  # FILE DB: in-process child
    args = ap.parse_args()
    set_src(args.src)
    if args.child:
        print(json.dumps(in_process(Path(args.child[0]), Path(args.child[1]), args.shared,
                                    args.n_boot, args.workers)))
        return
    src = args.shared / "data" / "captioners" / "oscar_val2014_all.jsonl"
    if not src.is_file():
        sys.exit(f"shared data not found at {args.shared} (use --shared or CAPAUDIT_SHARED)")
    gt = args.shared / "data" / "coco2014" / "chair_objects_trainval2014.jsonl"
    up = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, load average at start {up[0]:.2f} {up[1]:.2f} {up[2]:.2f}; "
          f"capaudit ({args.src}) --workers {args.workers} --n-boot {args.n_boot}")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        cap = [sys.executable, "-m", "capaudit.cli.main", "audit", "run"]
        cold = timed_child(cap + [str(src), *annotation_args(args.shared), "--n-boot", str(args.n_boot),
                                  "--workers", str(args.workers), "--db", str(db)])
        print(line("capaudit cold store (annotations parsed), 40k", cold))
        for copies in [int(x) for x in args.sizes.split(",")]:
            path = scaled_file(src, copies, Path(tmp))
            if copies <= args.ref_max_copies:
                ref = timed_child([sys.executable, str(ROOT / "benchmarks" / "reference_chair.py"),
                                   str(path), "--chair-gt", str(gt)])
                rv = json.loads(ref["stdout"])
                per_caption = {k: ref[k] / rv["n"] for k in ("cpu", "wall")}
                per_loop = {k: rv[k] / rv["n"] for k in ("chair_seconds", "chair_cpu_s")}
                ref_label = "reference, whole process"
            else:
                n = 40_504 * copies
                ref = {k: per_caption[k] * n for k in ("cpu", "wall")} | {"load": os.getloadavg()[:1] * 2}
                rv = {"n": n, **{k: v * n for k, v in per_loop.items()}} | {k: rv[k] for k in ("chair_s", "chair_i")}
                ref_label = "reference, EXTRAPOLATED from the size above"
            runs = []
            for k in range(args.repeat):
                out = Path(tmp) / f"run{copies}_{k}.json"
                runs.append(timed_child(cap + [str(path), *annotation_args(args.shared), "--n-boot",
                                               str(args.n_boot), "--workers", str(args.workers),
                                               "--db", str(db), "--json", str(out)]))
                runs[-1]["json"] = json.loads(out.read_text())
            whole = min(runs, key=lambda r: r["cpu"])
            res = next(iter(whole["json"]["sets"].values()))
            inproc = timed_child([sys.executable, __file__, "--shared", str(args.shared), "--n-boot",
                                  str(args.n_boot), "--workers", str(args.workers),
                                  "--child", str(path), str(db)])
            iv = json.loads(inproc["stdout"])
            ours = {k: round(res[k]["value"], 3) for k in ("chair_s", "chair_i")}
            same = ours == {k: rv[k] for k in ours} == {k: iv[k] for k in ours}
            print(f"{rv['n']:,} captions ({copies} x oscar_val2014_all): CHAIR_s {rv['chair_s']} "
                  f"CHAIR_i {rv['chair_i']} (reference) / {ours['chair_s']} {ours['chair_i']} (capaudit): "
                  f"{'equal' if same else 'DIFFERENT'}")
            print(line(ref_label, ref))
            print(line(f"capaudit audit run, whole process (best of {args.repeat})", whole))
            print(f"    whole-process ratio: {ref['cpu'] / whole['cpu']:.1f}x CPU, "
                  f"{ref['wall'] / whole['wall']:.1f}x wall")
            print(f"  in process: reference caption loop {rv['chair_cpu_s']:.2f} s CPU "
                  f"{rv['chair_seconds']:.2f} s wall; capaudit audit_captions {iv['cpu_s']:.2f} s CPU "
                  f"{iv['seconds']:.2f} s wall -> {rv['chair_cpu_s'] / iv['cpu_s']:.1f}x CPU, "
                  f"{rv['chair_seconds'] / iv['seconds']:.1f}x wall")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
