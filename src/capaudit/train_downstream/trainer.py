"""The training loop of one fine-tune: its moving parts, its data position, its steps.

Why apart from :mod:`capaudit.train_downstream.train` (which prepares a run and exports
its model): the loop is where the speed options act (:class:`capaudit.train_downstream.
runtime.RuntimePlan`: weights dtype and autocast, compiled forward, fused AdamW, loader
workers and pinned memory) and where gradient accumulation is defined.

Gradient accumulation: one optimizer step sums the gradients of ``grad_accum``
micro-batches, so GPU memory is that of one micro-batch at any effective batch. Each
micro-batch's mean token loss is weighted by its share of the step's caption tokens, so
the step's gradient is the gradient of the mean token loss over the whole effective
batch: exactly the step one batch of ``grad_accum`` times the size would take (up to
float rounding), also when captions differ in length.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from capaudit.train_downstream.checkpoint import rng_state, save_checkpoint, set_rng_state
from capaudit.train_downstream.data import epoch_order
from capaudit.train_downstream.optim import build_optimizer

__all__ = ["Trainer", "peak_memory_mb"]


def peak_memory_mb(device) -> float:
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def warmup_cosine(warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    """The LR factor per step: linear warmup, then cosine to zero (a plain function, as
    ``LambdaLR`` leaves functions out of its state dict)."""
    def lr_lambda(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        span = max(1, total_steps - warmup_steps)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup_steps) / span)))
    return lr_lambda


class Trainer:
    """One run's moving parts -- model, AdamW (and fp32 masters of bf16 weights), LR
    schedule, grad scaler -- and its data position (optimizer steps, epoch, micro-batches
    done in it), which :meth:`train` advances and a checkpoint records."""

    def __init__(self, torch, net, cfg, plan, device, n_batches: int, path: Path, fp: str,
                 token_counts: list[int] | None = None):
        self.torch, self.net, self.cfg, self.plan, self.device = torch, net, cfg, plan, device
        self.n_batches, self.path, self.fp, self.token_counts = n_batches, path, fp, token_counts
        self.total_steps = cfg.epochs * math.ceil(n_batches / cfg.grad_accum)
        self.opt, self.masters = build_optimizer(torch, net, lr=cfg.lr,
                                                 weight_decay=cfg.weight_decay,
                                                 weights=plan.weights, fused=plan.fused_adamw)
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, warmup_cosine(cfg.warmup_steps, self.total_steps))
        self.scaler = torch.amp.GradScaler("cuda", enabled=plan.grad_scaler)
        self.amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(plan.autocast)
        self.forward = torch.compile(net) if plan.compile else net
        self.step, self.epoch, self.batch_in_epoch = 0, 0, 0

    def model_state(self) -> dict:
        """The model's weights in fp32 (the masters' values in a bf16 run)."""
        return self.masters.state_dict() if self.masters else self.net.state_dict()

    def restore(self, ckpt: dict) -> None:
        """Weights, optimizer, schedule, scaler, RNGs and data position from a checkpoint."""
        (self.masters or self.net).load_state_dict(ckpt["model"])
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
            "model": self.model_state(), "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(), "scaler": self.scaler.state_dict(),
            "rng": rng_state(), "config": asdict(self.cfg), "runtime": self.plan.as_dict()})

    def finish(self) -> None:
        """The model in fp32 with the trained values, in eval mode, ready to export."""
        if self.masters:
            self.masters.export_fp32()
        self.net.eval()

    def weighted(self, loss, order: list[int], mb: int, group_start: int, group_size: int):
        """Micro-batch ``mb``'s loss times its share of its step: its caption tokens over
        the step's (without token counts, an equal share)."""
        if self.token_counts is None or group_size == 1:
            return loss / group_size
        bs, counts = self.cfg.batch_size, self.token_counts
        mine = sum(counts[i] for i in order[mb * bs:(mb + 1) * bs])
        total = sum(counts[i] for i in order[group_start * bs:(group_start + group_size) * bs])
        return loss * (mine / total)

    def optimizer_step(self) -> None:
        """Unscale (fp16), clip at 1.0, step AdamW (on the fp32 masters of a bf16 model)."""
        torch, opt, scaler = self.torch, self.opt, self.scaler
        if self.masters:
            self.masters.grads_to_master()
        scaler.unscale_(opt)
        params = self.masters.params if self.masters else self.net.parameters()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        scaler.step(opt)
        scaler.update()
        if self.masters:
            self.masters.master_to_model()
        self.sched.step()
        opt.zero_grad(set_to_none=True)
        self.net.zero_grad(set_to_none=True)

    def train(self, dataset, collate, n_pairs: int, log,
              on_step: Callable[[dict], None] | None) -> None:
        """The epochs from the current position: gradients accumulated over ``grad_accum``
        micro-batches, a line in ``log`` every ``log_every`` steps and a checkpoint every
        ``checkpoint_every`` (both also at each epoch's end)."""
        torch, cfg, device, plan = self.torch, self.cfg, self.device, self.plan
        n_batches, amp_dtype = self.n_batches, self.amp_dtype
        window = _Window()
        while self.epoch < cfg.epochs:
            order = epoch_order(n_pairs, cfg.seed, self.epoch)
            loader = torch.utils.data.DataLoader(
                dataset, batch_size=cfg.batch_size, sampler=order[self.batch_in_epoch * cfg.batch_size:],
                collate_fn=collate, num_workers=plan.workers, pin_memory=plan.pin_memory,
                persistent_workers=False)
            self.opt.zero_grad(set_to_none=True)
            for mb, batch in enumerate(loader, start=self.batch_in_epoch):
                group_start = (mb // cfg.grad_accum) * cfg.grad_accum
                group_size = min(cfg.grad_accum, n_batches - group_start)
                batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
                with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                    loss = self.forward(**batch).loss
                self.scaler.scale(self.weighted(loss, order, mb, group_start, group_size)).backward()
                window.add(float(loss.detach()), batch["pixel_values"].shape[0])
                if mb + 1 - group_start < group_size:
                    continue
                self.optimizer_step()
                self.step, self.batch_in_epoch = self.step + 1, mb + 1
                info = {"step": self.step, "total_steps": self.total_steps,
                        "epoch": self.epoch + 1, "loss": window.loss / window.n,
                        "lr": self.sched.get_last_lr()[0]}
                if self.step % cfg.log_every == 0 or self.batch_in_epoch >= n_batches:
                    info.update(window.rates(group_size), peak_mem_mb=peak_memory_mb(device))
                    log.write(json.dumps(info) + "\n")
                    log.flush()
                    window = _Window()
                if self.step % cfg.checkpoint_every == 0 or self.batch_in_epoch >= n_batches:
                    self.checkpoint()
                if on_step is not None:
                    on_step(info)
            self.epoch, self.batch_in_epoch = self.epoch + 1, 0


class _Window:
    """Loss and throughput since the last log line."""

    def __init__(self):
        self.loss, self.n, self.samples, self.t = 0.0, 0, 0, time.perf_counter()

    def add(self, loss: float, samples: int) -> None:
        self.loss, self.n, self.samples = self.loss + loss, self.n + 1, self.samples + samples

    def rates(self, group_size: int) -> dict:
        dt = time.perf_counter() - self.t
        return {"samples_per_s": self.samples / dt if dt else None,
                "s_per_step": dt / max(1, self.n / group_size)}
