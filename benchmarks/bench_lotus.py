"""Benchmark the LOTUS text metrics: captions/s and peak memory, cold and cached.

    PYTHONPATH=src python benchmarks/bench_lotus.py [--shared ../shared] [--workers 2]
        [--oscar N] [--long N]

Metrics: noun/verb recall and precision (against the COCO human captions of the
shared subset), syntactic_depth, semantic_nodes, nsfw_words, gender_word_recall
-- every LOTUS metric that needs no model weights -- through the engine's
streaming path (:func:`capaudit.audit.engine.audit_stream`, 1,000 bootstrap
resamples). Each measurement runs in a fresh process (its own peak RSS) against
its own DuckDB store, twice: ``cold`` parses every distinct caption with spaCy
(``nlp.pipe``, batched, ``ner`` disabled, several processes above 20,000 distinct
texts), ``cached`` reruns on the same store and parses nothing. The reference
captions are parsed (and cached) before the clock starts.

1. ``oscar_val2014_all.jsonl``: the first ``--oscar`` captions (all 40,504 by default).
2. Long captions (~170 tokens, COCO human captions joined): ``--long`` of them
   (100,000 by default).

The CLIP metrics need the user's weights and are not measured here.
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
from itertools import islice
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or ROOT.parent / "shared")
METRICS = ["noun_recall", "noun_precision", "verb_recall", "verb_precision", "syntactic_depth",
           "semantic_nodes", "nsfw_words", "gender_word_recall"]


def _rows(kind: str, n: int, shared: Path):
    if kind == "oscar":
        with open(shared / "data" / "captioners" / "oscar_val2014_all.jsonl") as f:
            for line in islice(f, n):
                r = json.loads(line)
                yield r["image_id"], r["caption"]
    else:
        from capaudit.audit.synthetic import long_captions

        yield from long_captions(shared / "data" / "coco2014" / "captions_val2014_subset.json",
                                 n, 170)


def measure(kind: str, n: int, shared: Path, workers: int, db: str) -> dict:
    from capaudit.audit.engine import audit_stream
    from capaudit.io.annotation_files import load_demographics, Annotations
    from capaudit.metrics.features.inputs import prepare
    from capaudit.store.db import Store

    gender, skin = load_demographics(shared / "data" / "coco2014" / "demographics_val2014.jsonl")
    store = Store(db)
    cfg = {"reference": str(shared / "data" / "coco2014" / "captions_val2014_subset.json"),
           "workers": workers}
    opts = prepare(store, cfg)
    opts.reference_words("nouns")              # reference parsed (and cached) off the clock
    rows = list(_rows(kind, n, shared))
    t = time.perf_counter()
    res = audit_stream(iter(rows), Annotations(gender=gender, skin_tone=skin), METRICS,
                       workers=workers, config=cfg)
    dt = time.perf_counter() - t
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    k = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    store.close()
    return {"captions": len(rows), "seconds": round(dt, 2),
            "captions_per_s": round(len(rows) / dt, 1), "peak_rss_mb": round(max(r, k) / 1024),
            "values": {m: None if res.results[m].value is None else round(res.results[m].value, 3)
                       for m in METRICS}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--oscar", type=int, default=40_504)
    ap.add_argument("--long", type=int, default=100_000)
    ap.add_argument("--one", nargs=3, help=argparse.SUPPRESS)   # kind n db (child process)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(measure(a.one[0], int(a.one[1]), a.shared, a.workers, a.one[2])))
        return
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    for kind, n in (("oscar", a.oscar), ("long", a.long)):
        if n <= 0:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            db = str(Path(tmp) / "bench.duckdb")
            for run in ("cold", "cached"):
                out = subprocess.run([sys.executable, __file__, "--shared", str(a.shared),
                                      "--workers", str(a.workers), "--one", kind, str(n), db],
                                     env=env, capture_output=True, text=True, check=True)
                res = json.loads(out.stdout.strip().splitlines()[-1])
                print(f"{kind} {run}: {res['captions']:,} captions in {res['seconds']} s = "
                      f"{res['captions_per_s']:,} captions/s, peak RSS {res['peak_rss_mb']} MB, "
                      f"load {os.getloadavg()[0]:.1f}")
                if run == "cached":
                    print("  values:", json.dumps(res["values"]))


if __name__ == "__main__":
    main()
