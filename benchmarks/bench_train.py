"""Downstream fine-tuning benchmark: step time, throughput and peak memory.

Why: the GPU recipe (docs/downstream_recipe.md) needs a budget (hours per caption
set) and a batch size that fits; this prints what one optimizer step costs for the
tiny random BLIP on CPU, and, when CUDA is present, for the mid-size config and
(with --model) a real BLIP base folder. It runs the real training loop
(:func:`capaudit.train_downstream.train.train_downstream`: data from shards,
AdamW, checkpointing disabled by a large interval) on synthetic images.

    python benchmarks/bench_train.py                 # tiny on CPU
    python benchmarks/bench_train.py --threads 1 --steps 20
    python benchmarks/bench_train.py --model /models/blip-image-captioning-base --batch-size 32
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np


def write_shards(folder: Path, n: int, size: int = 384, seed: int = 0) -> None:
    from PIL import Image

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / "000000.tar", "w") as tf:
        for iid in range(1, n + 1):
            arr = np.kron(rng.integers(0, 255, (8, 8, 3)), np.ones((size // 8, size // 8, 1)))
            buf = io.BytesIO()
            Image.fromarray(arr.astype(np.uint8)).save(buf, format="JPEG")
            for ext, data in (("jpg", buf.getvalue()),
                              ("json", json.dumps({"image_id": iid}).encode())):
                info = tarfile.TarInfo(f"{iid:012d}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))


def bench(model: Path, shards: Path, n_images: int, args, device: str, label: str) -> dict:
    import torch

    from capaudit.train_downstream.train import TrainConfig, train_downstream

    ids = list(range(1, n_images + 1))
    caps = ["a man in a red shirt riding a brown horse on a dirt road next to a dog"] * n_images
    times, last = [], [time.perf_counter()]

    def on_step(info):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        now = time.perf_counter()
        times.append(now - last[0])
        last[0] = now

    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(epochs=1, batch_size=args.batch_size, lr=1e-5, precision=args.precision,
                          checkpoint_every=10**9, log_every=10**9, device=device, workers=args.workers)
        summary = train_downstream(ids, caps, shards, model, out, cfg, set_name="bench",
                                   on_step=on_step)
    steady = times[1:] or times  # the first step pays for warm-up (allocator, kernels)
    step = statistics.median(steady)
    row = {"config": label, "device": summary["device"], "precision": summary["precision"],
           "batch_size": args.batch_size, "steps": len(times),
           "step_s_median": round(step, 4), "step_s_first": round(times[0], 4),
           "samples_per_s": round(args.batch_size / step, 1),
           "peak_mem_mb": summary["peak_mem_mb"],
           "peak_kind": "cuda max_memory_allocated" if device.startswith("cuda") else "process max RSS"}
    print(json.dumps(row))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=12, help="optimizer steps per configuration")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch default)")
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--workers", type=int, default=-1)
    ap.add_argument("--model", type=Path, help="a real BLIP folder to benchmark on CUDA")
    args = ap.parse_args()

    import torch

    from capaudit.train_downstream.tiny import build_tiny_blip

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} CPU threads, "
          f"cuda={torch.cuda.is_available()}")
    n = args.steps * args.batch_size
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_shards(tmp / "shards", n)
        bench(build_tiny_blip(tmp / "tiny", "tiny"), tmp / "shards", n, args, "cpu", "tiny")
        if torch.cuda.is_available():
            bench(build_tiny_blip(tmp / "small", "small"), tmp / "shards", n, args, "cuda",
                  "small")
            if args.model:
                bench(args.model, tmp / "shards", n, args, "cuda", f"model:{args.model.name}")


if __name__ == "__main__":
    main()
