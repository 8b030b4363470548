"""Resumable-training checkpoints: atomic writes, and loading that never runs a pickle.

Why weights-only: a run folder can come from anywhere (copied from a cluster,
shared by a colleague), and ``torch.load`` of an arbitrary pickle executes
code. Everything a checkpoint holds (model, AdamW and LR-schedule state, grad
scaler, data position, settings) is tensors and plain Python values, and the
RNG states are stored that way too (NumPy's state as a list, not an array), so
``torch.load(..., weights_only=True)`` reads it. A file that needs more than
that is refused with one clear line.

Writes go to a temporary file in the same folder, are fsynced and renamed, so a
kill during a write leaves the previous checkpoint intact; leftovers of killed
writes are removed on the next load.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from capaudit.errors import InputError

__all__ = ["CHECKPOINT", "REQUIRED_KEYS", "save_checkpoint", "load_checkpoint", "rng_state",
           "set_rng_state"]

CHECKPOINT = "checkpoint.pt"
# what a resume reads (train.py passes these as ``required``): a file without one of them,
# a list, or a cut-off file is refused in one line, not a KeyError half-way into a resume
REQUIRED_KEYS = ("fingerprint", "model", "optimizer", "scheduler", "scaler", "rng", "step",
                 "epoch", "batch_in_epoch")


def rng_state() -> dict:
    """Python, NumPy, torch (and CUDA) generator states as tensors and plain values."""
    import torch

    kind, keys, pos, has_gauss, cached = np.random.get_state()
    py_version, py_state, py_gauss = random.getstate()
    return {"python": [py_version, list(py_state), py_gauss],
            "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def set_rng_state(state: dict) -> None:
    import torch

    py_version, py_state, py_gauss = state["python"]
    random.setstate((py_version, tuple(py_state), py_gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: Path, state: dict) -> None:
    """Write ``state`` atomically: temp file in the same folder, fsync, rename."""
    import torch

    from capaudit.core.safe_write import atomic_open

    with atomic_open(path, "wb") as fh:
        torch.save(state, fh)


def load_checkpoint(run: Path, required: tuple[str, ...] = ()) -> dict | None:
    """The last complete checkpoint of a run, or None. Loaded weights-only: a file that
    would need arbitrary unpickling is refused, never executed."""
    import torch

    for tmp in [*run.glob(f"{CHECKPOINT}.tmp-*"), *run.glob(f".{CHECKPOINT}.tmp-*")]:
        tmp.unlink(missing_ok=True)
    path = run / CHECKPOINT
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same user error
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _refuse(path, f"weights-only load failed: {first[:120]}") from None
    if not isinstance(state, dict):
        raise _refuse(path, f"it holds a {type(state).__name__}, not a mapping")
    missing = [k for k in required if k not in state]
    if missing:
        raise _refuse(path, f"missing {', '.join(missing)}")
    return state


def _refuse(path: Path, why: str) -> InputError:
    return InputError(f"refusing {CHECKPOINT}: it is not a capaudit checkpoint ({why})",
                      path=path, fix="remove it, or start the run in a new --out folder")
