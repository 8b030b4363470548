"""Fixtures built by code for the LOTUS tests: a tiny random CLIP and tiny images."""

from __future__ import annotations

import json
import string
from pathlib import Path


def tiny_clip(path: Path, positions: int = 77, seed: int = 0) -> Path:
    """A random transformers CLIPModel (+ char-level tokenizer, image processor) in ``path``."""
    import torch
    from transformers import CLIPConfig, CLIPModel, CLIPTokenizer

    proc_cls = _processor_class()
    chars = list(string.ascii_lowercase + string.digits + ".,!?'-")
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for c in chars:
        vocab[c] = len(vocab)
        vocab[c + "</w>"] = len(vocab)
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.json").write_text(json.dumps(vocab))
    (path / "merges.txt").write_text("#version: 0.2\n")
    tok = CLIPTokenizer(str(path / "vocab.json"), str(path / "merges.txt"),
                        pad_token="<|endoftext|>")
    tok.save_pretrained(path)
    cfg = CLIPConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2,
                         max_position_embeddings=positions, bos_token_id=0, eos_token_id=1,
                         pad_token_id=1),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, image_size=32, patch_size=8),
        projection_dim=16)
    torch.manual_seed(seed)
    CLIPModel(cfg).eval().save_pretrained(path)
    proc_cls(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(path)
    return path


def _processor_class():
    import transformers

    return getattr(transformers, "CLIPImageProcessorPil", None) or transformers.CLIPImageProcessor


def tiny_images(folder: Path, ids, seed: int = 0) -> Path:
    """Random 40x40 RGB JPEGs named like COCO val2014 images."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in ids:
        arr = rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)
        Image.fromarray(arr).save(folder / f"COCO_val2014_{i:012d}.jpg")
    return folder
