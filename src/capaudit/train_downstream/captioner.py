"""The BLIP captioner loaded from a folder, and where and in what precision it runs.

Why apart from :mod:`capaudit.train_downstream.train`: training and captioning
(:mod:`capaudit.train_downstream.caption`) both load the model and pick its device
and precision, with the same user errors; this is that shared part. torch and
transformers load inside the functions, never at import.
"""

from __future__ import annotations

from pathlib import Path

from capaudit.errors import InputError, require

__all__ = ["load_model_and_tokenizer", "resolve_device", "resolve_precision"]


def resolve_device(name: str):
    torch = require("torch", "ml", "downstream training")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda was asked for but no CUDA GPU is visible",
                         fix="drop --device or pass --device cpu")
    return dev


def resolve_precision(precision: str, device) -> str:
    torch = require("torch", "ml", "downstream training")
    if precision == "auto":
        return "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    if precision not in ("fp32", "bf16", "fp16"):
        raise InputError(f"unknown precision '{precision}'", fix="one of auto, fp32, bf16, fp16")
    if precision == "fp16" and device.type != "cuda":
        raise InputError("fp16 training needs a CUDA GPU", fix="use --precision bf16 or fp32 on CPU")
    return precision


def load_model_and_tokenizer(model: str | Path):
    """A local model folder, or a hub name when online; user errors become InputError."""
    transformers = require("transformers", "ml", "the downstream captioner")
    src = str(model)
    path = Path(src)
    # "org/name" may be a hub name; anything else that does not exist (or whose parent
    # folder exists, like models/blip-base) is a missing local folder: fail fast, offline
    looks_local = src.count("/") != 1 or src.startswith((".", "/", "~")) or path.parent.exists()
    if not path.exists() and looks_local:
        raise InputError("model folder not found", path=src,
                         fix="pass a local copy of Salesforce/blip-image-captioning-base")
    if path.is_dir() and not any(path.glob("*.safetensors")) and any(path.glob("*.bin")):
        raise InputError("pickled weights (*.bin) are refused, never loaded: unpickling can run "
                         "arbitrary code", path=src,
                         fix="convert the model to safetensors (save_pretrained does by default)")
    try:
        net = transformers.BlipForConditionalGeneration.from_pretrained(src)
        tok = transformers.AutoTokenizer.from_pretrained(src)
    except (OSError, ValueError) as exc:
        where = "folder" if path.exists() else "hub name (needs a connection)"
        raise InputError(f"cannot load a BLIP captioner from this {where} "
                         f"({str(exc).splitlines()[0]})", path=src,
                         fix="a folder with config.json, weights and tokenizer files") from None
    return net, tok
