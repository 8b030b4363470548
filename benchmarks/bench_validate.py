"""``filter validate`` on 10k+ labelled sentences: CPU-seconds of a fresh process (#42).

    PYTHONPATH=src python benchmarks/bench_validate.py [--shared ../shared] [--copies 2]
        [--layout spans|sentence-label] [--n-boot 1000] [--keep DIR]

The data: the 890 real GPT-4V captions of ``data/enriched/sharegpt4v_gpt4v_coco2017_890.json``
(~8 sentences each), ``--copies`` times, copy ``k`` of caption ``j`` under the image id
``k * 1,000,000 + (j's COCO id)``, with the CHAIR ground truth of
``data/coco2014/chair_objects_trainval2014.jsonl`` mapped onto those ids. The set is
registered and filtered (``filter run --filter hallucination --action flag``) untimed; then
labels are written for every logged sentence (a fixed pseudo-label per sentence text; the
``spans`` layout marks one character inside each hallucinated sentence, the
``sentence-label`` layout gives each sentence's text), and ``capaudit filter validate``
runs as a user runs it: a fresh process (``python -m capaudit.cli.main``) on that store.
Reported: CPU-seconds (user + system of the process, ``RUSAGE_CHILDREN``), the peak RSS of
the largest process run so far (the filter run included: an upper bound of validate's), the
number of labelled sentences and captions, and the wall time (meaningful only on an idle
machine). The goal: under a minute for 10k labelled sentences.
"""

from __future__ import annotations

import argparse
import hashlib
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
SOURCE = ("data", "enriched", "sharegpt4v_gpt4v_coco2017_890.json")
CHAIR_GT = ("data", "coco2014", "chair_objects_trainval2014.jsonl")
ID_STRIDE = 1_000_000


def _cli(args: list[str], env: dict) -> tuple[float, float, int, str]:
    """(CPU-seconds, wall seconds, peak RSS in MB, stdout) of one fresh CLI process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "capaudit.cli.main", *args], env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"{args[:2]} failed: {proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, after.ru_maxrss // 1024, proc.stdout


def build(work: Path, shared: Path, copies: int, env: dict) -> str:
    """The set, its evidence and the filter run (untimed); returns the store's path."""
    data = json.loads(shared.joinpath(*SOURCE).read_text())
    rows = [(int(Path(r["image"]).stem), r["conversations"][1]["value"]) for r in data]
    ids = {i for i, _ in rows}
    gt = {}
    with open(shared.joinpath(*CHAIR_GT)) as f:
        for line in f:
            rec = json.loads(line)
            if rec["image_id"] in ids:
                gt[rec["image_id"]] = rec["objects"]
    src, ev = work / "set.jsonl", work / "chair_gt.jsonl"
    with open(src, "w") as out, open(ev, "w") as evo:
        for k in range(copies):
            for iid, cap in rows:
                out.write(json.dumps({"image_id": k * ID_STRIDE + iid, "caption": cap}) + "\n")
            for iid, objs in gt.items():
                evo.write(json.dumps({"image_id": k * ID_STRIDE + iid, "objects": objs}) + "\n")
    db = str(work / "bench.duckdb")
    _cli(["sets", "add", "corpus", str(src), "--db", db], env)
    _cli(["filter", "run", "corpus", "--filter", "hallucination", "--out", "flagged",
          "--action", "flag", "--chair-gt", str(ev), "--db", db], env)
    return db


def write_labels(db: str, path: Path, layout: str) -> tuple[int, int]:
    """Labels for every logged sentence; (sentences, captions) labelled."""
    import duckdb

    con = duckdb.connect(db, read_only=True)
    caps = dict(con.execute("SELECT row_idx, caption FROM captions JOIN caption_sets USING "
                            "(set_id) WHERE name = 'corpus'").fetchall())
    ids = dict(con.execute("SELECT row_idx, image_id FROM captions JOIN caption_sets USING "
                           "(set_id) WHERE name = 'corpus'").fetchall())
    log = con.execute("SELECT row_idx, original FROM filter_log WHERE set_name = 'flagged' "
                      "ORDER BY row_idx, sentence_idx").fetchall()
    con.close()
    records: dict = {}
    cursor: dict = {}
    for row, text in log:
        start = caps[row].find(text, cursor.get(row, 0))
        cursor[row] = start + len(text)
        bad = hashlib.sha256(text.encode()).digest()[0] % 3 == 0
        if layout == "sentence-label":
            records[(row, start)] = {"image_id": ids[row], "caption": caps[row],
                                     "sentence": text, "label": int(bad)}
        else:
            rec = records.setdefault(row, {"image_id": ids[row], "caption": caps[row],
                                           "spans": []})
            if bad and len(text) > 1:
                rec["spans"].append([start + 1, start + 2])
    path.write_text("".join(json.dumps(r) + "\n" for r in records.values()))
    return len(log), len(caps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--copies", type=int, default=2)
    ap.add_argument("--layout", default="spans", choices=["spans", "sentence-label"])
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--keep", type=Path, help="build in this folder and keep it")
    args = ap.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        return measure(args, args.keep)
    with tempfile.TemporaryDirectory(prefix="bench-validate-") as tmp:
        return measure(args, Path(tmp))


def measure(args, work: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    db = build(work, args.shared, args.copies, env)
    labels = work / f"labels.{args.layout}.jsonl"
    n_sent, n_caps = write_labels(db, labels, args.layout)
    cpu, wall, rss, out = _cli(["filter", "validate", str(labels), "--set", "flagged",
                                "--n-boot", str(args.n_boot), "--json",
                                str(work / "validation.json"), "--db", db], env)
    res = json.loads((work / "validation.json").read_text())
    print(json.dumps({"layout": args.layout, "labelled_sentences": res["sentence"]["n"],
                      "logged_sentences": n_sent, "labelled_captions": res["caption"]["n"],
                      "captions": n_caps, "images": res["sentence"]["n_images"],
                      "n_boot": args.n_boot, "cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
                      "peak_rss_mb": rss, "status": res["status"]}, indent=2))


if __name__ == "__main__":
    main()
