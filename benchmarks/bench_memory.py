"""Peak memory of the caption audit against the number of captions and of images.

    PYTHONPATH=src python benchmarks/bench_memory.py [--shared ../shared] \
        [--captions 100000,200000,400000,800000] [--images 40504] \
        [--image-counts 5000,10000,20000,40504] [--fixed-captions 200000] \
        [--runs stream,stream+details,cli] [--workers 2] [--n-boot 1000] [--keep DIR] \
        [--long 100000] [--json-array 1200000 --captions '' --image-counts '']

What "flat" means here: with the images fixed, peak RSS must not grow with the
number of captions (more captions per image). Per-image state legitimately grows
with the number of distinct images (the bootstrap needs a few floats per image
per metric), the vocabulary with the distinct tokens (bounded here: the captions
reuse COCO's words). So two series are printed, each run in a fresh process:

1. captions grow, images fixed (``--images``, default every annotated val2014 image):
   peak RSS should be constant up to noise;
2. images grow (``--image-counts``, annotated val2014 images), captions fixed
   (``--fixed-captions``): peak RSS grows by the per-image state only; the figure
   printed is the slope in bytes per image.

Runs: ``stream`` is :func:`capaudit.audit.engine.audit_stream` over the file's
reader (no details); ``stream+details`` also builds each chunk's per-caption
details and hands them to a sink that drops them; ``cli`` is ``capaudit audit run``
with the annotation files and a fresh store (details inserted into DuckDB, which holds
a transaction's uncommitted rows in memory until the commit: the part that still grows
per caption); ``cli-nodetails`` is the same with ``details: false`` (metrics only).
Peak RSS is the process's own (``ru_maxrss``); for the in-process runs the record
workers are forked per chunk and reported apart (``workers``), they hold one chunk of
captions each. The ``cli`` runs start the command itself (``python -m capaudit.cli.main``,
with the start-up settings of ``capaudit``: pyarrow's system allocator, one OpenBLAS
thread) and report the largest process of it, which is the command, not a worker.

3. ``--long N``: N long captions (ShareGPT4V length, about 178 tokens, all distinct:
   :func:`capaudit.audit.synthetic.long_captions`), one run each.
4. ``--json-array N``: N ShareGPT4V-layout records (``{"id", "image", "conversations"}``,
   the long captions of 3.) written twice, as one JSON array (as ShareGPT4V publishes them)
   and as JSONL, each audited by ``capaudit audit run --metrics chair_s,chair_i,length``
   (``--array-metrics``) in a fresh process: the array is streamed record by record
   (:mod:`capaudit.io.layouts.json`), so its peak should be within 10% of the JSONL one
   (#36: read whole, 1.2M records peaked at 3.94 GB against 380 MB). Only the ``cli`` run.

Captions are distinct: caption ``i`` joins two COCO human captions ``(i mod m,
(i mod m + 1 + i div m) mod m)`` (about 22 tokens), so identical-caption
de-duplication does not flatter the figure and the vocabulary stays COCO's.
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
DEFAULT_SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or ROOT.parent / "shared")
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_audit import cpu_seconds, load_annotations  # noqa: E402


def annotation_args(shared: Path) -> list[str]:
    coco = shared / "data" / "coco2014"
    return ["--instances", str(coco / "instance_categories_val2014.jsonl"),
            "--chair-gt", str(coco / "chair_objects_trainval2014.jsonl"),
            "--demographics", str(coco / "demographics_val2014.jsonl")]


def write_captions(shared: Path, path: Path, n: int, n_images: int) -> Path:
    """``n`` distinct captions (see module docstring) over ``n_images`` image ids, as JSONL:
    the annotated val2014 ids first, then synthetic ids past the largest one."""
    coco = shared / "data" / "coco2014"
    caps = [a["caption"].strip().replace("\n", " ") for a in
            json.loads((coco / "captions_val2014_subset.json").read_text("utf-8"))["annotations"]]
    with open(coco / "instance_categories_val2014.jsonl", "rb") as fh:
        ids = sorted(json.loads(line)["image_id"] for line in fh if line.strip())
    ids = ids[:n_images] + list(range(ids[-1] + 1, ids[-1] + 1 + max(0, n_images - len(ids))))
    m = len(caps)
    with open(path, "w", encoding="utf-8") as out:
        for i in range(n):
            a = i % m
            out.write(json.dumps({"image_id": ids[i % n_images],
                                  "caption": caps[a] + " " + caps[(a + 1 + i // m) % m]}) + "\n")
    return path


def write_long_captions(shared: Path, path: Path, n: int) -> Path:
    """``n`` distinct long captions (:func:`capaudit.audit.synthetic.long_captions`) as JSONL."""
    from capaudit.audit.synthetic import long_captions

    with open(path, "w", encoding="utf-8") as out:
        for iid, cap in long_captions(shared / "data" / "coco2014" / "captions_val2014_subset.json",
                                      n):
            out.write(json.dumps({"image_id": iid, "caption": cap}) + "\n")
    return path


def write_sharegpt4v(shared: Path, array: Path, lines: Path, n: int) -> None:
    """``n`` ShareGPT4V records of long captions, as one JSON array and as JSONL (the same
    records, byte for byte the same record text)."""
    from capaudit.audit.synthetic import long_captions

    prompt = "<image>\nDescribe this image in detail."
    with open(array, "w", encoding="utf-8") as arr, open(lines, "w", encoding="utf-8") as jl:
        arr.write("[\n")
        for i, (iid, cap) in enumerate(long_captions(
                shared / "data" / "coco2014" / "captions_val2014_subset.json", n)):
            rec = json.dumps({"id": f"{iid:012d}-{i}",
                              "image": f"coco/train2017/{iid:012d}.jpg",
                              "conversations": [{"from": "human", "value": prompt},
                                                {"from": "gpt", "value": cap}]})
            arr.write((",\n" if i else "") + rec)
            jl.write(rec + "\n")
        arr.write("\n]\n")


def json_array_series(args, n: int, tmp: Path) -> None:
    """Series 4: the same records as a JSON array and as JSONL, audited by the CLI."""
    array, lines = tmp / f"sharegpt4v_{n}.json", tmp / f"sharegpt4v_{n}.jsonl"
    if not (args.keep and array.exists() and lines.exists()):
        write_sharegpt4v(args.shared, array, lines, n)
    print(f"\n4. {n:,} ShareGPT4V records, --metrics {args.array_metrics}: JSON array vs "
          "JSONL (cli, fresh process)")
    got = {}
    for label, path in (("JSONL", lines), ("JSON array", array)):
        got[label] = measure(args, "cli", path)
        print(f"{label:>12}: peak {got[label]['peak_rss_mb']:8.1f} MB, CPU "
              f"{got[label]['cpu_s']} s, {got[label]['seconds']} s wall, load "
              f"{os.getloadavg()[0]:.2f}", flush=True)
    ratio = got["JSON array"]["peak_rss_mb"] / got["JSONL"]["peak_rss_mb"]
    print(f"  array / JSONL peak: {ratio:.3f} ({'within' if ratio <= 1.10 else 'OVER'} 10%)")
    if not args.keep:
        array.unlink()
        lines.unlink()


def rss() -> dict:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"peak_rss_mb": round(own, 1), "workers_peak_rss_mb": round(kids, 1)}


def child(args: argparse.Namespace) -> dict:
    """One measurement in this (fresh) process."""
    path, what = Path(args.file), args.child
    t0, c0 = time.perf_counter(), cpu_seconds()
    if what.startswith("cli"):
        with tempfile.TemporaryDirectory() as tmp:
            argv = ["audit", "run", str(path), *annotation_args(args.shared), "--n-boot",
                    str(args.n_boot), "--workers", str(args.workers),
                    "--db", str(Path(tmp) / "m.duckdb")]
            if args.array_metrics and path.name.startswith("sharegpt4v_"):   # series 4
                argv += ["--metrics", args.array_metrics]
            if what == "cli-nodetails":  # metrics only: no caption_details rows
                (Path(tmp) / "c.yaml").write_text("audit:\n  details: false\n")
                argv += ["--config", str(Path(tmp) / "c.yaml")]
            # the command as a user runs it, in its own process: its start-up settings
            # (pyarrow's allocator, OpenBLAS threads) are those of ``capaudit``, not this script's
            done = subprocess.run([sys.executable, "-m", "capaudit.cli.main", *argv],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if done.returncode:
                raise SystemExit(f"capaudit {' '.join(argv)} exited {done.returncode}:\n"
                                 f"{done.stderr[-2000:]}")
        # the command and its record workers are this process's only children: the
        # largest of them is the command itself (the workers hold one chunk each)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        return {"n_captions": None, "peak_rss_mb": round(peak, 1), "workers_peak_rss_mb": None,
                "seconds": round(time.perf_counter() - t0, 1), "cpu_s": round(cpu_seconds() - c0, 1)}
    else:
        from capaudit.audit.engine import audit_stream
        from capaudit.io.targets import resolve_target
        ann = load_annotations(args.shared)
        sink = (lambda table: None) if what == "stream+details" else None
        res = audit_stream(resolve_target(None, str(path)).rows(), ann, n_boot=args.n_boot,
                           workers=args.workers, details_sink=sink)
        out = {"n_captions": res.meta["n_captions"], "n_images": res.meta["n_images"]}
    return {**out, **rss(), "seconds": round(time.perf_counter() - t0, 1),
            "cpu_s": round(cpu_seconds() - c0, 1)}


def measure(args: argparse.Namespace, what: str, path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, __file__, "--shared", str(args.shared), "--workers", str(args.workers),
           "--n-boot", str(args.n_boot), "--child", what, "--file", str(path),
           "--array-metrics", args.array_metrics]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _workers(got: dict) -> str:
    """The workers' peak where it is measured apart (in-process runs), else nothing."""
    return "" if got["workers_peak_rss_mb"] is None else f"{got['workers_peak_rss_mb']:.0f}, "


def series(args, label: str, points: list[tuple[int, int]], tmp: Path, long: bool = False) -> None:
    runs = args.runs.split(",")
    print(f"\n{label}")
    print(f"{'captions':>10} {'images':>8} " + " ".join(f"{r + ' MB':>18}" for r in runs)
          + "   (workers' peak MB; CPU s)")
    first = last = None
    for n, k in points:
        path = tmp / (f"long_{n}.jsonl" if long else f"caps_{n}_{k}.jsonl")
        if not (args.keep and path.exists()):   # --keep: reuse the files of an earlier run
            path = (write_long_captions(args.shared, path, n) if long
                    else write_captions(args.shared, path, n, k))
        got = [measure(args, r, path) for r in runs]
        print(f"{n:>10,} {k:>8,} " + " ".join(f"{g['peak_rss_mb']:>18.1f}" for g in got)
              + "   (" + "; ".join(_workers(g) + f"{g['cpu_s']}" for g in got)
              + f") load {os.getloadavg()[0]:.2f}", flush=True)
        if not args.keep:
            path.unlink()
        first = first or (n, k, got)
        last = (n, k, got)
    if first and last and first[:2] != last[:2]:
        per, i = ("caption", 0) if first[0] != last[0] else ("image", 1)
        for r, a, b in zip(runs, first[2], last[2]):
            d = (b["peak_rss_mb"] - a["peak_rss_mb"]) * 1024 * 1024
            print(f"  {r}: {d / (last[i] - first[i]):+.0f} bytes per {per} "
                  f"({first[i]:,} -> {last[i]:,} {per}s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--captions", default="100000,200000,400000,800000")
    ap.add_argument("--images", type=int, default=40504, help="series 1: images (fixed)")
    ap.add_argument("--image-counts", default="5000,10000,20000,40504",
                    help="series 2: images ('' to skip)")
    ap.add_argument("--fixed-captions", type=int, default=200_000, help="series 2: captions")
    ap.add_argument("--runs", default="stream,stream+details,cli")
    ap.add_argument("--long", type=int, default=0, help="series 3: this many long captions")
    ap.add_argument("--json-array", type=int, default=0, help="series 4: this many "
                    "ShareGPT4V records, as a JSON array and as JSONL")
    ap.add_argument("--array-metrics", default="chair_s,chair_i,length",
                    help="series 4: the metrics audited")
    ap.add_argument("--keep", type=Path, help="keep the generated JSONL files in this folder "
                    "(and reuse those already there)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not (args.shared / "data").is_dir():
        sys.exit(f"shared data not found at {args.shared} (use --shared or CAPAUDIT_SHARED)")
    if args.child:
        print(json.dumps(child(args)))
        return
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; workers={args.workers}, "
          f"n_boot={args.n_boot}; peak RSS of each run's own process (fresh; cli: the command's)")
    with tempfile.TemporaryDirectory() as t:
        tmp = args.keep or Path(t)
        tmp.mkdir(parents=True, exist_ok=True)
        if args.captions:
            series(args, f"1. captions grow, {args.images:,} images",
                   [(int(n), args.images) for n in args.captions.split(",")], tmp)
        if args.image_counts:
            series(args, f"2. images grow, {args.fixed_captions:,} captions",
                   [(args.fixed_captions, int(k)) for k in args.image_counts.split(",")], tmp)
        if args.json_array:
            json_array_series(args, args.json_array, tmp)
        if args.long:
            series(args, f"3. {args.long:,} long captions (~178 tokens)", [(args.long, 0)], tmp,
                   long=True)


if __name__ == "__main__":
    main()
