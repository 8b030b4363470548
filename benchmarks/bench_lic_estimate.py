"""How good is ``audit lic``'s time estimate? Calibrate as the command does, then train the
classifier it estimates, and print predicted against measured, in CPU seconds (what the
model predicts whatever the load: this machine is shared) and in wall seconds.

    PYTHONPATH=src python benchmarks/bench_lic_estimate.py [--captions 3000] [--epochs 20]

Why: the estimate said 9 min (10 min in #34) for a run of 2:39 (3:16): one short epoch
held every fixed cost. Torch runs on one thread here, so CPU time is the work.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def main() -> None:
    import torch

    from capaudit.audit.lic.lstm import LSTMClassifier
    from capaudit.audit.lic.masking import ATTRIBUTES, mask_tokens
    from capaudit.audit.lic.plan import calibrate
    from capaudit.audit.lic.split import balanced_split
    from capaudit.text.tokenize import tokenize

    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--captions", type=int, default=3000)
    ap.add_argument("--epochs", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    root = Path(args.shared) / "data"
    rows = [json.loads(line) for _, line in
            zip(range(args.captions), (root / "captioners" / "nic_val2014_gender.jsonl").open())]
    demo = {d["image_id"]: d["gender"] for d in map(json.loads, (
        root / "coco2014" / "demographics_val2014.jsonl").open())}
    c0, c1, words, word = ATTRIBUTES["gender"]
    images = [r["image_id"] for r in rows if demo.get(r["image_id"]) in (c0, c1)]
    tokens = {r["image_id"]: mask_tokens(tokenize(r["caption"]), word, words) for r in rows}
    labels = {i: demo[i] for i in images}
    clf = LSTMClassifier(device="cpu")
    split = balanced_split(images, labels, (c0, c1), 0, 0.1)
    cpu, wall = time.process_time(), time.perf_counter()   # the old estimate (first torch call)
    clf.fit_score([tokens[i] for i in split.train[:320]], split.train_labels[:320],
                  [tokens[i] for i in split.test[:64]], split.test_labels[:64], seed=0, epochs=1)
    scale = len(split.train) * args.epochs / 320
    print(f"old (one epoch on 320 captions): predicts {(time.process_time() - cpu) * scale:.1f} s "
          f"CPU, {(time.perf_counter() - wall) * scale:.1f} s wall")
    for name, clock in (("cpu", time.process_time), ("wall", time.perf_counter)):
        cal = calibrate(clf, images, labels, (c0, c1), tokens, 0, 0.1, clock=clock)
        print(f"{name}: {cal}; predicts {cal.seconds(1, args.epochs):.1f} s")
    cpu, wall = time.process_time(), time.perf_counter()
    clf.fit_score([tokens[i] for i in split.train], split.train_labels,
                  [tokens[i] for i in split.test], split.test_labels, seed=0, epochs=args.epochs)
    print(f"measured: {time.process_time() - cpu:.1f} s CPU, {time.perf_counter() - wall:.1f} s "
          f"wall; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
