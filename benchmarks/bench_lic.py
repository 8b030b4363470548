"""LIC benchmarks: seconds per seed, and the 10-seed acceptance run against the published LIC_M.

    PYTHONPATH=src python benchmarks/bench_lic.py speed [--epochs 20] [--transformer-epochs 1]
    PYTHONPATH=src python benchmarks/bench_lic.py acceptance --sets oscar,nic [--seeds 10]
        [--cache-file out/lic_cache.json]

``speed`` trains one seed of the faithful LSTM on the 10,780 oscar captions
(5,966 train / 662 test) and of the MiniLM variant, and reports wall seconds,
process CPU seconds and the load average (other processes on a shared 2-core
box inflate wall time; CPU seconds / threads is the contention-free estimate).
``acceptance`` runs LIC_M over the reference seeds on each visible captioner
set and checks the mean against the published mean +- 2 std. A JSON cache file
makes an interrupted acceptance run resumable (finished seeds are not retrained).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from capaudit.audit.lic.runner import DEFAULT_SEEDS, run_lic  # noqa: E402

SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or ROOT.parent / "shared")


class JsonFileCache:
    """get/put cache persisted to one JSON file (written after every put)."""

    def __init__(self, path: Path):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {}

    def get(self, key):
        return self.data.get(key)

    def put(self, key, value):
        self.data[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.data))


def load_set(name: str) -> dict[int, str]:
    caps = {}
    with open(SHARED / f"data/captioners/{name}_val2014_gender.jsonl", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            caps[int(r["image_id"])] = r["caption"]
    return caps


def load_gender() -> dict[int, str]:
    from capaudit.io.annotations import load_demographics

    return load_demographics(SHARED / "data/coco2014/demographics_val2014.jsonl")[0]


def timed(fn):
    load0, c0, t0 = os.getloadavg()[0], time.process_time(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0, (load0, os.getloadavg()[0])


def speed(args) -> None:
    import torch

    caps, gender = load_set("oscar"), load_gender()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()} -> run_lic sets "
          f"{len(os.sched_getaffinity(0))}, cuda {torch.cuda.is_available()}")
    res, wall, cpu, load = timed(lambda: run_lic(caps, gender, None, "lstm", seeds=(args.seed,),
                                                 epochs=args.epochs, device=args.device, progress=True))
    d = res["details"][args.seed]
    print(f"LSTM  {args.epochs} epochs, {d['n_train']} train / {d['n_test']} test: wall {wall:.1f} s/seed, "
          f"CPU {cpu:.1f} s (load {load[0]:.1f}->{load[1]:.1f}); LIC_M {d['lic_m']:.2f}, "
          f"acc {d['accuracy_m']:.1f}")
    if args.transformer_epochs:
        ep = args.transformer_epochs
        res, wall, cpu, load = timed(lambda: run_lic(caps, gender, None, "transformer", seeds=(args.seed,),
                                                     epochs=ep, device=args.device, progress=True))
        d = res["details"][args.seed]
        print(f"MiniLM {ep} epoch(s): wall {wall:.1f} s (x{5 / ep:g} for the default 5 epochs: "
              f"~{wall * 5 / ep:.0f} s/seed), CPU {cpu:.1f} s (load {load[0]:.1f}->{load[1]:.1f}); "
              f"LIC_M {d['lic_m']:.2f}, acc {d['accuracy_m']:.1f}")


def acceptance(args) -> int:
    published = json.loads((SHARED / "references/reference_metrics_visible.json").read_text())
    pub = published["lic_published"]["LSTM_LIC_M"]
    gender = load_gender()
    cache = JsonFileCache(Path(args.cache_file)) if args.cache_file else None
    seeds = DEFAULT_SEEDS[args.skip_seeds: args.seeds]
    failed = 0
    for name in args.sets.split(","):
        res, wall, _, _ = timed(lambda: run_lic(load_set(name), gender, None, "lstm", seeds=seeds,
                                                epochs=args.epochs, device=args.device, cache=cache))
        m, (pm, ps) = res["lic_m"], pub[name]
        ok = abs(m["value"] - pm) <= 2 * ps
        failed += not ok
        per = ", ".join(f"{s}: {v:.2f}" for s, v in m["seeds"].items())
        print(f"{name:9s} LIC_M {m['value']:.2f} +- {m['std']:.2f} over {len(seeds)} seeds "
              f"(published {pm} +- {ps}; window {pm - 2 * ps:.1f}..{pm + 2 * ps:.1f}: "
              f"{'PASS' if ok else 'FAIL'}) [{wall:.0f} s]\n          seeds {per}", flush=True)
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    sp = sub.add_parser("speed")
    sp.add_argument("--epochs", type=int, default=20)
    sp.add_argument("--transformer-epochs", type=int, default=1, help="0 to skip the MiniLM run")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--device", default="auto")
    ac = sub.add_parser("acceptance")
    ac.add_argument("--sets", default="nic,sat,att2in,updn,oscar,nic_plus")
    ac.add_argument("--seeds", type=int, default=10)
    ac.add_argument("--skip-seeds", type=int, default=0, help="skip the first K seeds (resume elsewhere)")
    ac.add_argument("--epochs", type=int, default=20)
    ac.add_argument("--device", default="auto")
    ac.add_argument("--cache-file", default=None)
    args = ap.parse_args()
    if not (SHARED / "data").is_dir():
        print(f"shared data not found at {SHARED} (set CAPAUDIT_SHARED)")
        return 2
    return speed(args) or 0 if args.mode == "speed" else acceptance(args)


if __name__ == "__main__":
    sys.exit(main())
