"""Downstream fine-tuning benchmark: samples/s, peak memory and share of the chip's bf16 peak.

Why: the BLIP fine-tune per caption set is capaudit's slowest job, and its speed options
(``--attention``, ``--precision``, ``--compile``, batch size) trade memory for speed
differently on each card. This runs capaudit's own training loop
(:func:`capaudit.train_downstream.train.train_downstream`: shards, DataLoader, AdamW,
checkpointing off) for every batch size and every combination of the options, and prints
one Markdown table: samples/s (median step after warm-up), peak memory
(``torch.cuda.max_memory_allocated`` on a GPU; the process's max RSS so far on CPU) and
the share of the chip's dense bf16 peak that the estimated model FLOPs reach.

FLOPs per sample are estimated from the model (6 x weights x the tokens they are applied
to: 577 image tokens for the vision encoder and the cross-attention keys/values at 384 px,
the caption's tokens for the decoder and its LM head; plus 12 x layers x query tokens x key
tokens x width for attention), counting a causal attention in full. The peak comes from a
table of known dense bf16 peaks by device name (H100 SXM / H200 989 TFLOPs, A100 312, ...);
an unknown device, or the CPU, shows ``n/a``.

On a CUDA GPU, at BLIP-base size (random weights with BLIP base's dims: no download), the
whole sweep (batch 32/64/128 x eager|sdpa x fp32|bf16 x compile off|on), one command:

    python benchmarks/bench_train.py --size base --batch-sizes 32,64,128

or a real copy of the model: ``--model models/blip-base``. On CPU (the default there: the
tiny config, compile off, fp32 only since a CPU run is fp32) it takes seconds:

    python benchmarks/bench_train.py
    python benchmarks/bench_train.py --threads 1 --steps 3 --batch-sizes 8,16
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

CAPTION = "a man in a red shirt riding a brown horse on a dirt road next to a dog"
# dense bf16 tensor-core peaks (TFLOPs), longest name first wins
BF16_PEAK_TFLOPS = {"H200": 989.0, "GH200": 989.0, "H100 PCIe": 756.0, "H100 NVL": 835.0,
                    "H100": 989.0, "H800": 989.0, "A100": 312.0, "A800": 312.0, "L40S": 362.0,
                    "L4": 121.0, "A10": 125.0}


def peak_tflops(device_name: str) -> float | None:
    """The dense bf16 peak of a device by (a part of) its name, or None when unknown."""
    for key in sorted(BF16_PEAK_TFLOPS, key=len, reverse=True):
        if key.lower() in device_name.lower():
            return BF16_PEAK_TFLOPS[key]
    return None


def flops_per_sample(model, caption_tokens: int) -> float:
    """Estimated training FLOPs (forward + backward) of one (image, caption) sample."""
    cfg = model.config
    vc, tc = cfg.vision_config, cfg.text_config
    n_img = (vc.image_size // vc.patch_size) ** 2 + 1
    matmul = 0.0
    for name, p in model.named_parameters():
        if p.ndim < 2 or "embeddings.position" in name or "class_embedding" in name:
            continue
        if name.startswith("vision_model."):
            matmul += p.numel() * n_img
        elif ".crossattention.self.key." in name or ".crossattention.self.value." in name:
            matmul += p.numel() * n_img          # keys/values of the image tokens
        elif "word_embeddings" in name:
            matmul += p.numel() * caption_tokens  # the (tied) LM head's matmul
        elif name.startswith("text_decoder."):
            matmul += p.numel() * caption_tokens
    attn = (vc.num_hidden_layers * n_img * n_img * vc.hidden_size
            + tc.num_hidden_layers * (caption_tokens ** 2 + caption_tokens * n_img) * tc.hidden_size)
    return 6 * matmul + 12 * attn


def write_shards(folder: Path, n: int, size: int, seed: int = 0) -> None:
    """``n`` JPEGs of random colour blocks (image ids 1..n) in one webdataset tar."""
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


def bench_row(model: Path, shards: Path, n_images: int, batch: int, option: dict, args,
              device: str) -> dict:
    """One configuration through ``train_downstream``: median step after warm-up."""
    import torch

    from capaudit.train_downstream.train import TrainConfig, train_downstream

    warmup = args.warmup + (2 if option["compile"] else 0)
    n_pairs = batch * (warmup + args.steps)
    ids = [1 + i % n_images for i in range(n_pairs)]  # images repeat, as COCO's 5 captions do
    times, last = [], [time.perf_counter()]

    def on_step(info):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        now = time.perf_counter()
        times.append(now - last[0])
        last[0] = now

    if option["compile"]:
        # each row compiles a new model: without a reset, dynamo's per-function cache (8
        # entries) would fill up and later rows would silently run uncompiled
        torch._dynamo.reset()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(epochs=1, batch_size=batch, lr=1e-5, checkpoint_every=10**9,
                          log_every=10**9, device=device, workers=args.workers, **option)
        summary = train_downstream(ids, [CAPTION] * n_pairs, shards, model, out, cfg,
                                   set_name="bench", on_step=on_step)
    step = statistics.median(times[warmup:] or times)
    return {"samples_per_s": batch / step, "peak_mem_mb": summary["peak_mem_mb"],
            "precision": summary["precision"], "step_s": step}


def options_for(args, device: str) -> list[dict]:
    gpu = device.startswith("cuda")
    precisions = args.precision.split(",") if args.precision else (["fp32", "bf16"] if gpu else ["fp32"])
    compiles = ([c == "on" for c in args.compile.split(",")] if args.compile
                else ([False, True] if gpu else [False]))
    return [{"attention": a, "precision": p, "compile": c} for c in compiles
            for p in precisions for a in args.attention.split(",")]


def table(rows: list[dict], flops: float, peak: float | None, peak_kind: str) -> str:
    head = ("| batch | attention | precision | compile | samples/s | step s | "
            f"peak MiB ({peak_kind}) | share of bf16 peak |")
    lines = [head, "|---:|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['batch']} | {r['attention']} | {r['precision']} | "
                         f"{'on' if r['compile'] else 'off'} | failed: {r['error']} | | | |")
            continue
        share = f"{r['samples_per_s'] * flops / (peak * 1e12):.1%}" if peak else "n/a"
        lines.append(f"| {r['batch']} | {r['attention']} | {r['precision']} | "
                     f"{'on' if r['compile'] else 'off'} | {r['samples_per_s']:.1f} | "
                     f"{r['step_s']:.3f} | {r['peak_mem_mb']:.0f} | {share} |")
    return "\n".join(lines)


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=["tiny", "small", "base"],
                    help="random BLIP of this size (default: base on a GPU, tiny on CPU)")
    ap.add_argument("--model", type=Path, help="a real BLIP folder instead of a random one")
    ap.add_argument("--batch-sizes", default="32,64,128")
    ap.add_argument("--steps", type=int, default=None, help="timed steps per row (GPU 8, CPU 3)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first (+2 compiled)")
    ap.add_argument("--attention", default="eager,sdpa")
    ap.add_argument("--precision", help="comma list (default: fp32,bf16 on a GPU, fp32 on CPU)")
    ap.add_argument("--compile", help="off,on (default: both on a GPU, off on CPU)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--workers", type=int, default=-1)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's)")
    ap.add_argument("--images", type=int, default=256, help="distinct images in the shard")
    return ap.parse_args(argv)


def main(argv=None) -> list[dict]:
    args = parse(argv)
    import torch

    from capaudit.train_downstream.captioner import load_model_and_tokenizer, resolve_device
    from capaudit.train_downstream.tiny import build_tiny_blip

    if args.threads:
        torch.set_num_threads(args.threads)
    device = str(resolve_device(args.device))
    gpu = device.startswith("cuda")
    args.steps = args.steps or (8 if gpu else 3)
    name = torch.cuda.get_device_name(device) if gpu else "cpu"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = args.model or build_tiny_blip(tmp / "model", args.size or ("base" if gpu else "tiny"))
        net, tok = load_model_and_tokenizer(model)
        flops = flops_per_sample(net, len(tok(CAPTION)["input_ids"]))
        n_params = sum(p.numel() for p in net.parameters())
        write_shards(tmp / "shards", args.images, net.config.vision_config.image_size)
        del net
        print(f"# torch {torch.__version__}, device {name}, {torch.get_num_threads()} CPU threads; "
              f"model {args.model or args.size or ('base' if gpu else 'tiny')} "
              f"({n_params / 1e6:.1f}M parameters), ~{flops / 1e9:.2f} GFLOPs per sample")
        for batch in [int(b) for b in args.batch_sizes.split(",")]:
            for option in options_for(args, device):
                row = {"batch": batch, **option}
                try:
                    row.update(bench_row(model, tmp / "shards", args.images, batch, option, args,
                                         device))
                except Exception as exc:  # noqa: BLE001 - an OOM or a compile failure is a row
                    row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
                rows.append(row)
    print(table(rows, flops, peak_tflops(name) if gpu else None,
                "max allocated" if gpu else "process max RSS"))
    return rows


if __name__ == "__main__":
    main()
