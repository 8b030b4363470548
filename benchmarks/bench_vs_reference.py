"""capaudit against the reference CHAIR code, side by side, on this machine.

    PYTHONPATH=src python benchmarks/bench_vs_reference.py [--repeat 3]
    PYTHONPATH=src python benchmarks/bench_vs_reference.py --sizes 1,5,20 [--n-boot 1000] [--workers 2]

By default, the two cases a user meets, on 40,504 OSCAR captions (``oscar_val2014_all.jsonl``),
each run a fresh process, against the reference (:mod:`reference_chair`, ``chair.py`` ported
line for line and run as its users run it: imports, the evaluator from its pickle cache, the
caption loop), also a whole process. ``--repeat`` rounds, each timing the reference, then
cold, then warm, one after another: a ratio is taken within a round (the same load), and the
median of the rounds' ratios is the figure quoted (no factor from another day):

* **cold**: a fresh store for every run, the annotation files on the command line:
  ``capaudit audit run FILE --instances INST --chair-gt GT --metrics chair_s,chair_i``
  (default intervals and workers);
* **warm**: ``capaudit annotations add instances INST`` and ``annotations add chair-gt GT``
  once into a store (not timed); every run gets a fresh copy of that store (a set it has
  not seen) and runs ``capaudit audit run FILE --metrics chair_s,chair_i``.

The values of both cases are checked equal to the reference's.

``--sizes`` runs the older scaling table instead: for each size (copies of
``oscar_val2014_all.jsonl``, 40,504 captions: 1 -> 40,504, 5 -> 202,520, 20 -> 810,080), every
measurement in a fresh process:

* the reference (:mod:`reference_chair`, a port of ``chair.py``'s algorithm and cost
  profile): CHAIR_s and CHAIR_i;
* ``capaudit audit run FILE --instances --chair-gt --demographics`` as a user runs it
  (start-up, imports, the annotations from the store's parse cache, coverage, every default
  metric with ``--n-boot`` resamples, per-caption details stored): the whole process. One
  cold run first (empty store: the annotation files parsed and cached), not counted;
* the same work as the reference, as a whole process: ``capaudit audit run FILE --chair-gt
  GT --metrics chair_s,chair_i --n-boot 0 --workers 1`` (CHAIR only, no bootstrap, one
  process; coverage checked and per-caption details stored as in every audit);
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
import shutil
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
    return (f"  {label:58s} {r['cpu']:7.2f} s CPU {r['wall']:7.2f} s wall   "
            f"(load {r['load'][0]:.1f} -> {r['load'][1]:.1f})")


def uptime() -> str:
    """The load average now (other users of the machine show up here)."""
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def best(runs: list[dict]) -> dict:
    """Best of the runs: the least CPU and, apart, the least wall (each its own run)."""
    return {"cpu": min(r["cpu"] for r in runs), "wall": min(r["wall"] for r in runs),
            "load": (min(r["load"][0] for r in runs), max(r["load"][1] for r in runs))}


def chair_values(json_path: Path) -> dict:
    res = next(iter(json.loads(json_path.read_text())["sets"].values()))
    return {k: round(res[k]["value"], 3) for k in ("chair_s", "chair_i")}


def cold_warm(args, tmp: Path) -> None:
    """The cold and the warm case (module docstring) against the reference, in rounds: each
    round times the reference, then cold, then warm, so a ratio is taken between runs made
    one after another under the same load; the median of the rounds' ratios is the figure."""
    import statistics

    src = args.shared / "data" / "captioners" / "oscar_val2014_all.jsonl"
    coco = args.shared / "data" / "coco2014"
    inst, gt = coco / "instance_categories_val2014.jsonl", coco / "chair_objects_trainval2014.jsonl"
    cli = [sys.executable, "-m", "capaudit.cli.main"]
    metrics = ["--metrics", "chair_s,chair_i"]
    ref_cmd = [sys.executable, str(ROOT / "benchmarks" / "reference_chair.py"), str(src),
               "--chair-gt", str(gt), "--cache", str(tmp / "chair.pkl")]
    rv = json.loads(timed_child(ref_cmd)["stdout"])   # builds the evaluator's cache: not timed
    print(f"{rv['n']:,} captions; reference CHAIR_s {rv['chair_s']} CHAIR_i {rv['chair_i']}")
    template = tmp / "warm.duckdb"
    for kind, path in (("instances", inst), ("chair-gt", gt)):  # once, not timed
        timed_child(cli + ["annotations", "add", kind, str(path), "--db", str(template)])
    cases = {"cold": ["--instances", str(inst), "--chair-gt", str(gt)], "warm": []}
    rounds: dict[str, list[dict]] = {"reference": [], "cold": [], "warm": []}
    for k in range(args.repeat):
        rounds["reference"].append(timed_child(ref_cmd))
        for case, extra in cases.items():
            db, out = tmp / f"{case}{k}.duckdb", tmp / f"{case}{k}.json"
            if case == "warm":
                shutil.copyfile(template, db)
            rounds[case].append(timed_child(cli + ["audit", "run", str(src), *extra, *metrics,
                                                   "--db", str(db), "--json", str(out)]))
            if chair_values(out) != {key: rv[key] for key in ("chair_s", "chair_i")}:
                sys.exit(f"{case}: values differ from the reference: {chair_values(out)}")
        ref = rounds["reference"][-1]
        print(f"  round {k + 1}: reference {ref['cpu']:.2f} s CPU; " + "; ".join(
            f"{case} {rounds[case][-1]['cpu']:.2f} s CPU = {ref['cpu'] / rounds[case][-1]['cpu']:.1f}x"
            for case in cases) + f" (load {ref['load'][0]:.1f} -> {rounds['warm'][-1]['load'][1]:.1f})")
        sys.stdout.flush()
    print(line(f"reference port, whole process (best of {args.repeat})", best(rounds["reference"])))
    for case in cases:
        ratios = [r["cpu"] / c["cpu"] for r, c in zip(rounds["reference"], rounds[case])]
        walls = [r["wall"] / c["wall"] for r, c in zip(rounds["reference"], rounds[case])]
        print(line(f"{case}: capaudit audit run, whole process (best of {args.repeat})",
                   best(rounds[case])))
        print(f"    {case} ratio, median of {args.repeat} rounds: "
              f"{statistics.median(ratios):.1f}x CPU (rounds {min(ratios):.1f}-{max(ratios):.1f}), "
              f"{statistics.median(walls):.1f}x wall (values equal); {uptime()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--sizes", help="the scaling table instead: copies of the 40,504 oscar "
                    "captions, e.g. 1,5,20")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="rounds (reference, cold, warm: each a "
                    "whole process); the median of the rounds' ratios is quoted")
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
    if not (args.shared / "data" / "captioners" / "oscar_val2014_all.jsonl").is_file():
        sys.exit(f"shared data not found at {args.shared} (use --shared or CAPAUDIT_SHARED)")
    print(f"{os.cpu_count()} CPUs, {uptime()} at start; capaudit ({args.src})")
    if args.sizes:
        scaling(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        cold_warm(args, Path(tmp))


def scaling(args) -> None:
    """The scaling table (``--sizes``): full audit, CHAIR only and in-process, per size."""
    src = args.shared / "data" / "captioners" / "oscar_val2014_all.jsonl"
    gt = args.shared / "data" / "coco2014" / "chair_objects_trainval2014.jsonl"
    print(f"--workers {args.workers} --n-boot {args.n_boot}")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        cap = [sys.executable, "-m", "capaudit.cli.main", "audit", "run"]
        cold = timed_child(cap + [str(src), *annotation_args(args.shared), "--n-boot", str(args.n_boot),
                                  "--workers", str(args.workers), "--db", str(db)])
        print(line("capaudit cold store (annotations parsed), 40k", cold))
        for copies in [int(x) for x in args.sizes.split(",")]:
            path = scaled_file(src, copies, Path(tmp))
            if copies <= args.ref_max_copies:
                ref_cmd = [sys.executable, str(ROOT / "benchmarks" / "reference_chair.py"),
                           str(path), "--chair-gt", str(gt), "--cache", str(Path(tmp) / "chair.pkl")]
                if not (Path(tmp) / "chair.pkl").exists():
                    timed_child(ref_cmd)   # the evaluator's pickle cache, once: not timed
                ref = timed_child(ref_cmd)
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
            chair_out = Path(tmp) / f"chair{copies}.json"
            chair_only = min((timed_child(cap + [str(path), "--chair-gt", str(gt), "--metrics",
                                                 "chair_s,chair_i", "--n-boot", "0", "--workers", "1",
                                                 "--db", str(db), "--json", str(chair_out)])
                              for _ in range(args.repeat)), key=lambda r: r["cpu"])
            chair_json = next(iter(json.loads(chair_out.read_text())["sets"].values()))
            res = next(iter(whole["json"]["sets"].values()))
            inproc = timed_child([sys.executable, __file__, "--shared", str(args.shared), "--n-boot",
                                  str(args.n_boot), "--workers", str(args.workers),
                                  "--child", str(path), str(db)])
            iv = json.loads(inproc["stdout"])
            ours = {k: round(res[k]["value"], 3) for k in ("chair_s", "chair_i")}
            same = ours == {k: rv[k] for k in ours} == {k: iv[k] for k in ours} == {
                k: round(chair_json[k]["value"], 3) for k in ours}
            print(f"{rv['n']:,} captions ({copies} x oscar_val2014_all): CHAIR_s {rv['chair_s']} "
                  f"CHAIR_i {rv['chair_i']} (reference) / {ours['chair_s']} {ours['chair_i']} (capaudit): "
                  f"{'equal' if same else 'DIFFERENT'}")
            print(line(ref_label, ref))
            print(line(f"capaudit audit run, whole process (best of {args.repeat})", whole))
            print(f"    whole-process ratio: {ref['cpu'] / whole['cpu']:.1f}x CPU, "
                  f"{ref['wall'] / whole['wall']:.1f}x wall")
            print(line(f"capaudit CHAIR only, no bootstrap, 1 process (best of {args.repeat})",
                       chair_only))
            print(f"    whole-process ratio, the reference's work only: "
                  f"{ref['cpu'] / chair_only['cpu']:.1f}x CPU, {ref['wall'] / chair_only['wall']:.1f}x wall")
            print(f"  in process: reference caption loop {rv['chair_cpu_s']:.2f} s CPU "
                  f"{rv['chair_seconds']:.2f} s wall; capaudit audit_captions {iv['cpu_s']:.2f} s CPU "
                  f"{iv['seconds']:.2f} s wall -> {rv['chair_cpu_s'] / iv['cpu_s']:.1f}x CPU, "
                  f"{rv['chair_seconds'] / iv['seconds']:.1f}x wall")
            sys.stdout.flush()



if __name__ == "__main__":
    main()
