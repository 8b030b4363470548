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
from capaudit.train_downstream.captioner import (load_model_and_tokenizer, resolve_device,
                                                  resolve_precision)
from capaudit.train_downstream.checkpoint import (CHECKPOINT, REQUIRED_KEYS, load_checkpoint,
                                                  rng_state, save_checkpoint, set_rng_state)
from capaudit.train_downstream.data import (ImagePreprocessor, PairDataset, ShardIndex,
                                            epoch_order, make_collate, pair_captions)

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


def fingerprint(cfg: TrainConfig, set_name: str, n_pairs: int, model: str) -> str:
    keys = {k: asdict(cfg)[k] for k in TRAJECTORY_KEYS}
    keys.update(set=set_name, n_pairs=n_pairs, model=str(model))
    return hashlib.sha256(json.dumps(keys, sort_keys=True).encode()).hexdigest()[:16]


def _peak_memory_mb(device) -> float:
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


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
    cfg.precision = resolve_precision(cfg.precision, device)
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
    pre = ImagePreprocessor.from_model_dir(model, net.config.vision_config.image_size)
    dataset = PairDataset(pairs, index, pre)
    collate = make_collate(tok, net.config.text_config.bos_token_id, cfg.max_tokens)

    trainer = _Trainer(torch, net, cfg, device, math.ceil(len(pairs) / cfg.batch_size),
                       run / CHECKPOINT, fp)
    if ckpt is not None:
        trainer.restore(ckpt)
        del ckpt
    resumed_from = trainer.step
    workers = cfg.workers if cfg.workers >= 0 else (
        0 if device.type == "cpu" else min(8, os.cpu_count() or 1))

    log = os.fdopen(os.open(run / "train_log.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT
                            | getattr(os, "O_NOFOLLOW", 0), 0o666), "a", encoding="utf-8")
    t_start = time.perf_counter()
    try:
        trainer.train(dataset, collate, len(pairs), workers, log, on_step)
    finally:
        log.close()
    net.eval()
    _export(net, tok, Path(model), run / "model")
    summary = {"fingerprint": fp, "set": set_name, "model": str(model), "steps": trainer.step,
               "epochs": cfg.epochs, "pairs": len(pairs), "unmatched_captions": missing,
               "resumed_from_step": resumed_from, "device": str(device),
               "precision": cfg.precision, "seconds": round(time.perf_counter() - t_start, 2),
               "peak_mem_mb": round(_peak_memory_mb(device), 1)}
    from capaudit.core.safe_write import write_text

    write_text(run / "done.json", json.dumps(summary, indent=2))
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


def _warmup_cosine(cfg: TrainConfig, total_steps: int) -> Callable[[int], float]:
    """The LR factor per step: linear warmup, then cosine to zero (a plain function, as
    ``LambdaLR`` leaves functions out of its state dict)."""
    def lr_lambda(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        span = max(1, total_steps - cfg.warmup_steps)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - cfg.warmup_steps) / span)))
    return lr_lambda


class _Trainer:
    """One run's moving parts -- model, AdamW, LR schedule, grad scaler -- and its data
    position (optimizer steps, epoch, micro-batches done in it), which the training loop
    advances and a checkpoint records."""

    def __init__(self, torch, net, cfg: TrainConfig, device, n_batches: int, path: Path,
                 fp: str):
        self.torch, self.net, self.cfg, self.device = torch, net, cfg, device
        self.n_batches, self.path, self.fp = n_batches, path, fp
        self.total_steps = cfg.epochs * math.ceil(n_batches / cfg.grad_accum)
        decay = [p for n, p in net.named_parameters() if p.ndim >= 2 and "embedding" not in n]
        no_decay = [p for n, p in net.named_parameters()
                    if not (p.ndim >= 2 and "embedding" not in n)]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                      {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr)
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, _warmup_cosine(cfg, self.total_steps))
        self.scaler = torch.amp.GradScaler("cuda", enabled=cfg.precision == "fp16")
        self.amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.precision)
        self.step, self.epoch, self.batch_in_epoch = 0, 0, 0

    def restore(self, ckpt: dict) -> None:
        """Weights, optimizer, schedule, scaler, RNGs and data position from a checkpoint."""
        self.net.load_state_dict(ckpt["model"])
        self.opt.load_state_dict(ckpt["optimizer"])
        self.sched.load_state_dict(ckpt["scheduler"])
        self.scaler.load_state_dict(ckpt["scaler"])
        set_rng_state(ckpt["rng"])
        self.step, self.epoch, self.batch_in_epoch = (ckpt["step"], ckpt["epoch"],
                                                      ckpt["batch_in_epoch"])

    def checkpoint(self) -> None:
        e, b = ((self.epoch + 1, 0) if self.batch_in_epoch >= self.n_batches
                else (self.epoch, self.batch_in_epoch))
        save_checkpoint(self.path, {
            "fingerprint": self.fp, "step": self.step, "epoch": e, "batch_in_epoch": b,
            "model": self.net.state_dict(), "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(), "scaler": self.scaler.state_dict(),
            "rng": rng_state(), "config": asdict(self.cfg)})

    def train(self, dataset, collate, n_pairs: int, workers: int, log,
              on_step: Callable[[dict], None] | None) -> None:
        """The epochs from the current position: gradients accumulated over ``grad_accum``
        micro-batches, a line in ``log`` every ``log_every`` steps and a checkpoint every
        ``checkpoint_every`` (both also at each epoch's end)."""
        torch, net, cfg, device, opt = self.torch, self.net, self.cfg, self.device, self.opt
        scaler, n_batches, amp_dtype = self.scaler, self.n_batches, self.amp_dtype
        window_loss, window_n, window_t, window_samples = 0.0, 0, time.perf_counter(), 0
        while self.epoch < cfg.epochs:
            order = epoch_order(n_pairs, cfg.seed, self.epoch)[self.batch_in_epoch * cfg.batch_size:]
            loader = torch.utils.data.DataLoader(
                dataset, batch_size=cfg.batch_size, sampler=order, collate_fn=collate,
                num_workers=workers, pin_memory=device.type == "cuda",
                persistent_workers=False)
            opt.zero_grad(set_to_none=True)
            for mb, batch in enumerate(loader, start=self.batch_in_epoch):
                group_start = (mb // cfg.grad_accum) * cfg.grad_accum
                group_size = min(cfg.grad_accum, n_batches - group_start)
                batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
                with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                    loss = net(**batch).loss
                scaler.scale(loss / group_size).backward()
                window_loss += float(loss.detach())
                window_n += 1
                window_samples += batch["pixel_values"].shape[0]
                if mb + 1 - group_start < group_size:
                    continue
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                scaler.step(opt)
                scaler.update()
                self.sched.step()
                opt.zero_grad(set_to_none=True)
                self.step, self.batch_in_epoch = self.step + 1, mb + 1
                now = time.perf_counter()
                info = {"step": self.step, "total_steps": self.total_steps,
                        "epoch": self.epoch + 1, "loss": window_loss / window_n,
                        "lr": self.sched.get_last_lr()[0]}
                if self.step % cfg.log_every == 0 or self.batch_in_epoch >= n_batches:
                    dt = now - window_t
                    info.update(samples_per_s=window_samples / dt if dt else None,
                                s_per_step=dt / max(1, window_n / group_size),
                                peak_mem_mb=_peak_memory_mb(device))
                    log.write(json.dumps(info) + "\n")
                    log.flush()
                    window_loss, window_n, window_t, window_samples = 0.0, 0, now, 0
                if self.step % cfg.checkpoint_every == 0 or self.batch_in_epoch >= n_batches:
                    self.checkpoint()
                if on_step is not None:
                    on_step(info)
            self.epoch, self.batch_in_epoch = self.epoch + 1, 0
