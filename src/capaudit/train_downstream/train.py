"""Fine-tune ``BlipForConditionalGeneration`` on one caption set, resumably.

Why it is built this way:

- The GCE experiment trains one captioner per caption set for 5 epochs; on COCO
  train that is hours of GPU time, so a kill must cost at most ``checkpoint_every``
  steps. ``RUN/checkpoint.pt`` holds model, AdamW, LR schedule, grad scaler, every
  RNG and the exact data position (epoch, micro-batches done); it is written
  atomically and loaded weights-only (:mod:`capaudit.train_downstream.checkpoint`).
- The data order of an epoch is a function of (seed, epoch) only
  (:func:`capaudit.train_downstream.data.epoch_order`), so a resumed run skips the
  batches already seen and ends at the same step with the same weights as an
  uninterrupted one.
- A checkpoint records a fingerprint of the settings that shape the trajectory;
  resuming with different settings is refused rather than silently mixed.
- The result ``RUN/model`` is a normal Hugging Face folder (weights, tokenizer,
  preprocessor) so ``capaudit caption`` and any other tool can load it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from capaudit.errors import InputError, require
from capaudit.train_downstream.attention import sdpa_supported, use_attention
from capaudit.train_downstream.captioner import load_model_and_tokenizer, resolve_device
from capaudit.train_downstream.checkpoint import CHECKPOINT, REQUIRED_KEYS, load_checkpoint
from capaudit.train_downstream.data import (ImagePreprocessor, PairDataset, ShardIndex,
                                            label_counts, make_collate, pair_captions)
from capaudit.train_downstream.runtime import DeviceCaps, RuntimePlan, plan_runtime
from capaudit.train_downstream.trainer import Trainer, peak_memory_mb

__all__ = ["TrainConfig", "train_downstream", "runtime_plan", "load_model_and_tokenizer"]

# settings that change the training trajectory: resuming with other values is refused
TRAJECTORY_KEYS = ("epochs", "lr", "weight_decay", "batch_size", "grad_accum", "seed",
                   "warmup_steps", "max_tokens", "precision")


@dataclass
class TrainConfig:
    """Defaults follow BLIP's COCO captioning fine-tune (lr 1e-5, wd 0.05, cosine, 5 epochs)."""

    epochs: int = 5
    lr: float = 1e-5
    weight_decay: float = 0.05
    batch_size: int = 32
    grad_accum: int = 1
    precision: str = "auto"      # auto | fp32 | bf16 | fp16
    seed: int = 0
    warmup_steps: int = 0
    checkpoint_every: int = 500  # optimizer steps; a checkpoint is also written every epoch
    log_every: int = 50
    max_tokens: int = 40         # caption length cap in tokens (BLIP uses 40 for COCO)
    workers: int = -1            # DataLoader workers; -1: 0 on CPU, min(8, cores) on GPU
    device: str = "auto"         # auto | cpu | cuda | cuda:N
    attention: str = "auto"      # auto | eager | sdpa (auto: sdpa on a GPU, eager on CPU)
    compile: bool | None = None  # torch.compile the forward; None: on a GPU, off on CPU


def fingerprint(cfg: TrainConfig, set_name: str, n_pairs: int, model: str) -> str:
    keys = {k: asdict(cfg)[k] for k in TRAJECTORY_KEYS}
    keys.update(set=set_name, n_pairs=n_pairs, model=str(model))
    return hashlib.sha256(json.dumps(keys, sort_keys=True).encode()).hexdigest()[:16]


def runtime_plan(cfg: TrainConfig, device=None) -> RuntimePlan:
    """What ``cfg`` resolves to on its device (see :mod:`capaudit.train_downstream.runtime`):
    the CLI prints its notes before a run and the run saves it."""
    device = device if device is not None else resolve_device(cfg.device)
    return plan_runtime(DeviceCaps.of(device), precision=cfg.precision, attention=cfg.attention,
                        compile=cfg.compile, workers=cfg.workers, sdpa_available=sdpa_supported())


def _export(model, tokenizer, model_src: Path, out: Path) -> None:
    """The fine-tuned model folder, built aside and moved in: a rerun replaces only the
    files the model writes (nothing else in ``out`` is removed)."""
    from capaudit.core.safe_folder import folder_output

    with folder_output(out, overwrite=True) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        pre = model_src / "preprocessor_config.json"
        if pre.exists():
            shutil.copy(pre, tmp / "preprocessor_config.json")


def train_downstream(image_ids, captions, shards: str | Path, model: str | Path, out: str | Path,
                     cfg: TrainConfig, *, set_name: str = "",
                     on_step: Callable[[dict], None] | None = None) -> dict:
    """Fine-tune the captioner at ``model`` on (image, caption) pairs; resume if ``out`` has a
    checkpoint. ``on_step`` gets a dict after every optimizer step (progress bars, tests).
    Returns the summary also written to ``out/done.json``."""
    torch = require("torch", "ml", "downstream training")
    run = Path(out)
    run.mkdir(parents=True, exist_ok=True)
    device = resolve_device(cfg.device)
    plan = runtime_plan(cfg, device)
    cfg.precision = plan.precision  # the precision used is the one the fingerprint holds
    index = ShardIndex.build(shards)
    pairs, missing = pair_captions(image_ids, captions, index)
    if not pairs:
        raise InputError(f"no caption of set '{set_name}' has its image in the shards "
                         f"({missing} captions unmatched)", path=shards,
                         fix="build the shards from the same images (image_id must match)")
    fp = fingerprint(cfg, set_name, len(pairs), model)
    summary, ckpt = _previous_run(run, fp)
    if summary is not None:
        return {**summary, "already_done": True}

    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    net, tok = load_model_and_tokenizer(model)
    net.to(device).train()
    use_attention(net, plan.attention)
    pre = ImagePreprocessor.from_model_dir(model, net.config.vision_config.image_size)
    dataset = PairDataset(pairs, index, pre)
    # a compiled forward sees few distinct caption lengths (multiples of 8), not one per batch
    collate = make_collate(tok, net.config.text_config.bos_token_id, cfg.max_tokens,
                           pad_multiple=8 if plan.compile else None)
    counts = (label_counts(tok, [c for _, c in pairs], cfg.max_tokens)
              if cfg.grad_accum > 1 else None)
    trainer = Trainer(torch, net, cfg, plan, device, math.ceil(len(pairs) / cfg.batch_size),
                      run / CHECKPOINT, fp, counts)
    if ckpt is not None:
        trainer.restore(ckpt)
        del ckpt
    resumed_from = trainer.step
    from capaudit.core.config import write_json

    write_json(run / "runtime.json", {**plan.as_dict(), "device": str(device)}, parents=False)
    log = os.fdopen(os.open(run / "train_log.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT
                            | getattr(os, "O_NOFOLLOW", 0), 0o666), "a", encoding="utf-8")
    t_start = time.perf_counter()
    try:
        trainer.train(dataset, collate, len(pairs), log, on_step)
    finally:
        log.close()
    trainer.finish()
    _export(net, tok, Path(model), run / "model")
    summary = {"fingerprint": fp, "set": set_name, "model": str(model), "steps": trainer.step,
               "epochs": cfg.epochs, "pairs": len(pairs), "unmatched_captions": missing,
               "resumed_from_step": resumed_from, "device": str(device),
               "precision": cfg.precision, "seconds": round(time.perf_counter() - t_start, 2),
               "peak_mem_mb": round(peak_memory_mb(device), 1), "runtime": plan.as_dict()}
    write_json(run / "done.json", summary, parents=False)
    return summary


def _previous_run(run: Path, fp: str) -> tuple[dict | None, dict | None]:
    """``(summary of a finished run, None)`` or ``(None, checkpoint to resume from or None)``;
    a run folder whose run was made with other settings (fingerprint) is refused."""
    refused = InputError("this run folder holds a run made with other settings", path=run,
                         fix="pass the same options as before, or a new --out")
    if (run / "done.json").exists() and (run / "model").exists():
        summary = json.loads((run / "done.json").read_text())
        if summary.get("fingerprint") != fp:
            raise refused
        return summary, None
    ckpt = load_checkpoint(run, required=REQUIRED_KEYS)
    if ckpt is not None and ckpt["fingerprint"] != fp:
        raise refused
    return None, ckpt
