"""Caption held-out images with a (fine-tuned) BLIP captioner, batched.

Why: the downstream half of the GCE experiment audits what a model *learned* from
a caption set, so its captions on held-out images (COCO val) become an ordinary
caption set in the store, with the decoding settings and the training run in its
meta, and every audit command works on it unchanged.

Generation is greedy (``num_beams=1``) or beam search, with BLIP's conventions: the
decoder starts from ``[DEC]`` and stops at ``[SEP]``; ``max_length`` counts that
bos token, as in Hugging Face's BLIP (BLIP's COCO evaluation: beams 3, max 20, min 5).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa

from capaudit.errors import InputError, require
from capaudit.train_downstream.data import ImagePreprocessor, ShardIndex


def resolve_model_dir(model: str | Path) -> Path | str:
    """A run folder (``RUN/model``), a model folder, or a hub name, as given."""
    path = Path(model)
    if (path / "model" / "config.json").exists():
        return path / "model"
    if (path / "config.json").exists():
        return path
    if path.exists():
        raise InputError("no model in this folder (no config.json, no model/ subfolder)",
                         path=path, fix="pass a finished train-downstream run or a model folder")
    return str(model)


def run_info(model: str | Path) -> dict:
    """What the training run recorded (``done.json``), if ``model`` is a run folder."""
    done = Path(model) / "done.json"
    return json.loads(done.read_text()) if done.exists() else {}


def generate_captions(model: str | Path, shards: str | Path, *, batch_size: int = 32,
                      num_beams: int = 3, max_length: int = 20, min_length: int = 5,
                      device: str = "auto", precision: str = "auto", limit: int | None = None,
                      on_batch: Callable[[int], None] | None = None) -> pa.Table:
    """One caption per shard image: a table (image_key, image_id, caption, meta) ready for
    :meth:`capaudit.store.Store.add_set_from_table`. ``on_batch`` gets the batch size."""
    torch = require("torch", "ml", "captioning")
    from capaudit.train_downstream.attention import sdpa_supported, use_attention
    from capaudit.train_downstream.captioner import (load_model_and_tokenizer, resolve_device,
                                                     resolve_precision)

    if num_beams < 1 or max_length < 2 or min_length < 0 or batch_size < 1:
        raise InputError("need --beams >= 1, --max-length >= 2, --min-length >= 0, --batch-size >= 1")
    model_dir = resolve_model_dir(model)
    dev = resolve_device(device)
    prec = resolve_precision(precision, dev)
    net, tok = load_model_and_tokenizer(model_dir)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(prec)
    if dtype is not None:
        net = net.to(dtype)  # inference: half weights halve memory; no optimizer to protect
    net.to(dev).eval()
    # the same function; CPU as before
    use_attention(net, "sdpa" if dev.type == "cuda" and sdpa_supported() else "eager")
    pre = ImagePreprocessor.from_model_dir(model_dir, net.config.vision_config.image_size)
    index = ShardIndex.build(shards)
    ids = index.order[:limit] if limit else index.order
    keys, out_ids, caps, metas = [], [], [], []
    with torch.inference_mode():
        for start in range(0, len(ids), batch_size):
            chunk = ids[start:start + batch_size]
            pixels = torch.from_numpy(np.stack([pre(index.read(i)) for i in chunk])).to(dev)
            if dtype is not None:
                pixels = pixels.to(dtype)
            out = net.generate(pixel_values=pixels, num_beams=num_beams, max_length=max_length,
                               min_length=min_length, do_sample=False)
            texts = tok.batch_decode(out, skip_special_tokens=True)
            for iid, text in zip(chunk, texts):
                ref = index.refs[iid]
                keys.append(str(iid))
                out_ids.append(iid)
                caps.append(text.strip())
                metas.append(json.dumps({"shard": Path(ref.shard).name, "key": ref.key}))
            if on_batch is not None:
                on_batch(len(chunk))
    return pa.table({"image_key": pa.array(keys, pa.string()),
                     "image_id": pa.array(out_ids, pa.int64()),
                     "caption": pa.array(caps, pa.string()),
                     "meta": pa.array(metas, pa.string())})
