"""How a fine-tune uses its device: precision, attention, compile, optimizer, data loading.

Why one decision function: each speed option has a CPU answer and a GPU answer, and the
CPU answer must keep today's results (fp32, eager attention, no compile, plain AdamW,
no workers). :func:`plan_runtime` takes what was asked and what the device can do
(:class:`DeviceCaps`, which a test can fake) and returns the :class:`RuntimePlan` the run
uses, with a note for every request it could not honour: a half precision asked for on
a CPU runs in fp32 *and says so*, and the plan (requested and used) is saved with the run.

Precisions on a CUDA GPU:

- ``bf16`` (the ``auto`` choice where the GPU has bf16): the model's weights are held in
  bf16 and the forward runs under bf16 autocast (LayerNorm, softmax and the loss in fp32),
  while AdamW updates an fp32 master copy (:class:`capaudit.train_downstream.optim.MasterWeights`)
  so that lr-1e-5 steps are not rounded away in bf16 (its spacing near 0.02 is 1.2e-4);
- ``fp16``: fp32 weights, fp16 autocast and a gradient scaler;
- ``fp32``: everything fp32.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from capaudit.errors import InputError

__all__ = ["DeviceCaps", "RuntimePlan", "plan_runtime", "PRECISIONS"]

PRECISIONS = ("auto", "fp32", "bf16", "fp16")


@dataclass(frozen=True)
class DeviceCaps:
    """What the training device can do; :meth:`of` asks torch, tests build one by hand."""

    type: str                 # "cpu" or "cuda"
    bf16: bool = False        # bf16 matmuls supported (Ampere and newer)
    name: str = ""            # torch.cuda.get_device_name(), for the benchmark's peak table
    cpu_count: int = 1

    @classmethod
    def of(cls, device) -> "DeviceCaps":
        import torch

        cores = os.cpu_count() or 1
        if device.type != "cuda":
            return cls(device.type, False, "cpu", cores)
        return cls("cuda", bool(torch.cuda.is_bf16_supported()),
                   torch.cuda.get_device_name(device), cores)


@dataclass(frozen=True)
class RuntimePlan:
    """The options a run actually uses (saved in ``RUN/runtime.json`` and ``done.json``)."""

    precision: str            # used: fp32 | bf16 | fp16
    precision_requested: str
    weights: str              # dtype the model's weights are held in: fp32 | bf16
    autocast: str | None      # autocast dtype of the forward: bf16 | fp16 | None
    grad_scaler: bool         # fp16 only
    attention: str            # eager | sdpa
    compile: bool
    fused_adamw: bool
    workers: int
    pin_memory: bool
    notes: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict:
        return {**asdict(self), "notes": list(self.notes)}


def _precision(requested: str, caps: DeviceCaps, notes: list[str]) -> str:
    if requested not in PRECISIONS:
        raise InputError(f"unknown precision '{requested}'", fix=f"one of {', '.join(PRECISIONS)}")
    if requested == "auto":
        return "bf16" if caps.type == "cuda" and caps.bf16 else "fp32"
    if requested == "fp32":
        return "fp32"
    if caps.type != "cuda":
        notes.append(f"--precision {requested} asked for on {caps.type}: this run uses fp32 "
                     f"(half precision is used on a CUDA GPU only)")
        return "fp32"
    if requested == "bf16" and not caps.bf16:
        notes.append(f"--precision bf16 asked for but {caps.name or 'this GPU'} has no bf16: "
                     "this run uses fp32 (pass --precision fp16 for half precision here)")
        return "fp32"
    return requested


def plan_runtime(caps: DeviceCaps, *, precision: str = "auto", attention: str = "auto",
                 compile: bool | None = None, workers: int = -1,
                 sdpa_available: bool = True) -> RuntimePlan:
    """The plan for a run on a device with ``caps``. ``auto`` everywhere means: on a CPU
    exactly today's path (fp32, eager, no compile, no workers); on a CUDA GPU bf16 (where
    supported), SDPA attention (where the installed transformers allows it), ``torch.compile``,
    fused AdamW, workers and pinned memory."""
    notes: list[str] = []
    used = _precision(precision, caps, notes)
    gpu = caps.type == "cuda"
    if attention not in ("auto", "eager", "sdpa"):
        raise InputError(f"unknown attention '{attention}'", fix="one of auto, eager, sdpa")
    attn = ("sdpa" if gpu else "eager") if attention == "auto" else attention
    if attn == "sdpa" and attention == "auto" and not sdpa_available:
        notes.append("SDPA attention needs transformers >= 5: this run uses eager attention")
        attn = "eager"
    do_compile = gpu if compile is None else bool(compile)
    n_workers = workers if workers >= 0 else (min(8, caps.cpu_count) if gpu else 0)
    return RuntimePlan(
        precision=used, precision_requested=precision,
        weights="bf16" if used == "bf16" else "fp32",
        autocast=used if used in ("bf16", "fp16") else None, grad_scaler=used == "fp16",
        attention=attn, compile=do_compile, fused_adamw=gpu, workers=n_workers,
        pin_memory=gpu, notes=tuple(notes))
