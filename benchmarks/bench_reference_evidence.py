"""Reference-text evidence against a chair-gt run on the same captions: CPU-seconds (#42).

    PYTHONPATH=src python benchmarks/bench_reference_evidence.py [--shared ../shared] [--n 4800]
        [--repeat 3]

The data: Oscar's captions (``data/captioners/oscar_val2014_all.jsonl``) of the first ``--n``
images of ``data/coco2014/captions_val2014_subset.json`` (4,800 images), each record carrying
its image's five COCO captions as ``references``. Each run is ``filter run --filter
hallucination --action flag`` in a fresh process (``python -m capaudit.cli.main``) on a set
added before (not counted), with a fresh store per run:

* ``chair-gt``: the default (CHAIR ground truth, object mode corrected);
* ``chair-gt + references``: ``--object-mode visual --reference-col references``;
* ``references``: ``--evidence references --object-mode visual --reference-col references``.

Reported: CPU-seconds (user + system of the command, ``RUSAGE_CHILDREN``; the least of
``--repeat`` runs: the machine is shared) and peak RSS. The
similarity cache (``capaudit.filters.vocab_similarity``, ~15 CPU-seconds once per
vocabulary) is warmed before the runs, as it is after a user's first run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or ROOT.parent / "shared")
RUNS = {"chair-gt": [],
        "chair-gt + references": ["--object-mode", "visual", "--reference-col", "references"],
        "references": ["--evidence", "references", "--object-mode", "visual",
                       "--reference-col", "references"]}


def write_set(shared: Path, n: int, path: Path) -> int:
    coco = json.loads((shared / "data/coco2014/captions_val2014_subset.json").read_text())
    refs: dict[int, list[str]] = {}
    for a in coco["annotations"]:
        refs.setdefault(a["image_id"], []).append(a["caption"])
    keep = set(sorted(refs)[:n])
    rows = []
    for line in (shared / "data/captioners/oscar_val2014_all.jsonl").open():
        rec = json.loads(line)
        if rec["image_id"] in keep:
            rows.append(json.dumps({**rec, "references": refs[rec["image_id"]]}))
    path.write_text("\n".join(rows) + "\n")
    return len(rows)


def cli(args: list[str], env: dict) -> tuple[float, float]:
    """CPU-seconds and peak RSS (MB) of one fresh command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "capaudit.cli.main", *args], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime,
            after.ru_maxrss / 1024)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--n", type=int, default=4800)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    gt = str(args.shared / "data/coco2014/chair_objects_trainval2014.jsonl")
    with tempfile.TemporaryDirectory(prefix="bench-refs-") as tmp:
        src = Path(tmp) / "oscar_refs.jsonl"
        n = write_set(args.shared, args.n, src)
        from capaudit.filters.vocab_similarity import neighbours
        neighbours("visual", 0.8)   # the once-per-vocabulary cache, as after a first run
        print(f"{n} Oscar captions with 5 COCO references each; filter run, fresh process:\n")
        print("| evidence | CPU-s | ratio | peak RSS MB |\n|---|---|---|---|")
        base = None
        for i, (name, extra) in enumerate(RUNS.items()):
            db = str(Path(tmp) / f"s{i}.duckdb")
            subprocess.run([sys.executable, "-m", "capaudit.cli.main", "sets", "add", "o",
                            str(src), "--db", db], check=True, env=env, stdout=subprocess.DEVNULL)
            cpu, rss = min(cli(["filter", "run", "o", "--filter", "hallucination", "--out",
                                "o_f", "--action", "flag", "--chair-gt", gt, "--db", db,
                                "--replace", *extra], env) for _ in range(args.repeat))
            base = base or cpu
            print(f"| {name} | {cpu:.2f} | {cpu / base:.2f} | {rss:.0f} |")


if __name__ == "__main__":
    sys.exit(main())
