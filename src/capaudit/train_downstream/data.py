"""Training and captioning data: shard images joined to a caption set by image id.

Why an index instead of streaming: fine-tuning needs a shuffled order that can be
replayed exactly after a kill (resume must see the same batches), and a caption
set may hold several captions per image (COCO has five). So the shards are
scanned once for tar headers only (:class:`ShardIndex`: image id -> shard,
byte offset, size), and an image is read by seeking into its (uncompressed) tar
when its batch comes up. No image is extracted to disk and memory holds only
the index, which scales to COCO train (118k images) and beyond.

Preprocessing is BLIP's (resize bicubic to the model's square size, rescale to
[0, 1], normalise with the model's mean/std) written with PIL and numpy, read from
the model folder's ``preprocessor_config.json``, so torchvision is never needed.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from capaudit.errors import InputError
from capaudit.io.imageids import parse_image_id
from capaudit.io.layouts.tar import IMAGE_EXTS
from capaudit.io.readers.webdataset import shard_paths


@dataclass(frozen=True)
class ImageRef:
    """Where one image lives: shard file, byte offset and size of its data, sample key."""

    shard: str
    offset: int
    size: int
    key: str


class ShardIndex:
    """image id -> :class:`ImageRef` over webdataset shards (tar headers read, images not)."""

    def __init__(self, refs: dict[int, ImageRef], order: list[int]):
        self.refs, self.order = refs, order
        self._handles: dict[str, object] = {}
        self._pid = os.getpid()

    @classmethod
    def build(cls, shards: str | Path) -> "ShardIndex":
        import tarfile

        if not Path(shards).exists():
            raise InputError("shards folder not found", path=shards,
                             fix="build shards with capaudit shards build (or img2dataset)")
        refs: dict[int, ImageRef] = {}
        order: list[int] = []
        for shard in shard_paths(Path(shards)):
            try:
                tf = tarfile.open(shard, "r:")  # uncompressed only: we seek into it later
            except (tarfile.TarError, OSError) as exc:
                raise InputError(f"not a readable uncompressed tar shard ({exc})", path=shard,
                                 fix="write shards as plain .tar (webdataset default)") from None
            pending: dict[str, dict] = {}
            with tf:
                for m in tf:
                    if not m.isfile() or "." not in m.name.rsplit("/", 1)[-1]:
                        continue
                    base = m.name.rsplit("/", 1)[-1]
                    key = m.name[: -len(base)] + base.split(".", 1)[0]
                    ext = base.split(".", 1)[1].lower()
                    entry = pending.setdefault(key, {})
                    if ext in IMAGE_EXTS:
                        entry["img"] = (m.offset_data, m.size)
                    elif ext == "json":
                        try:
                            entry["id"] = json.loads(tf.extractfile(m).read()).get("image_id")
                        except (ValueError, AttributeError):
                            raise InputError(f"sample '{key}' has malformed JSON",
                                             path=shard) from None
            for key, entry in pending.items():
                if "img" not in entry:
                    continue
                iid = parse_image_id(entry.get("id")) if entry.get("id") is not None else None
                iid = iid if iid is not None else parse_image_id(key.rsplit("/", 1)[-1])
                if iid is None or iid in refs:
                    continue  # no usable id, or a duplicate image: first one wins
                refs[iid] = ImageRef(str(shard), *entry["img"], key)
                order.append(iid)
        if not refs:
            raise InputError("no images with an image id in these shards", path=shards,
                             fix="shards need KEY.jpg plus KEY.json with an image_id (or numeric keys)")
        return cls(refs, order)

    def __len__(self) -> int:
        return len(self.refs)

    def read(self, image_id: int) -> bytes:
        """The encoded bytes of one image (one seek + read; handles reopened after fork)."""
        if os.getpid() != self._pid:  # a DataLoader worker: do not share file offsets
            self._handles, self._pid = {}, os.getpid()
        ref = self.refs[image_id]
        fh = self._handles.get(ref.shard)
        if fh is None:
            fh = self._handles[ref.shard] = open(ref.shard, "rb")
        fh.seek(ref.offset)
        return fh.read(ref.size)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_handles"] = {}
        return state


class ImagePreprocessor:
    """BLIP image preprocessing in PIL + numpy (matches ``BlipImageProcessor``)."""

    def __init__(self, size: int, mean: Sequence[float], std: Sequence[float], resample: int = 3):
        self.size, self.resample = int(size), int(resample)
        self.mean = np.asarray(mean, dtype=np.float32).reshape(3, 1, 1)
        self.std = np.asarray(std, dtype=np.float32).reshape(3, 1, 1)

    @classmethod
    def from_model_dir(cls, model_dir: str | Path, image_size: int) -> "ImagePreprocessor":
        path = Path(model_dir) / "preprocessor_config.json"
        cfg = json.loads(path.read_text()) if path.exists() else {}
        size = cfg.get("size", {}).get("height", image_size) if isinstance(cfg.get("size"), dict) \
            else cfg.get("size", image_size)
        from capaudit.train_downstream.tiny import CLIP_MEAN, CLIP_STD
        return cls(size, cfg.get("image_mean", CLIP_MEAN), cfg.get("image_std", CLIP_STD),
                   cfg.get("resample", 3))

    def __call__(self, data: bytes) -> np.ndarray:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as im:
            im = im.convert("RGB").resize((self.size, self.size), resample=self.resample)
            arr = np.asarray(im, dtype=np.float32).transpose(2, 0, 1) / 255.0
        return (arr - self.mean) / self.std


def pair_captions(image_ids: Sequence, captions: Sequence[str], index: ShardIndex
                  ) -> tuple[list[tuple[int, str]], int]:
    """(image id, caption) training pairs whose image is in the shards; and how many were not."""
    pairs, missing = [], 0
    for iid, cap in zip(image_ids, captions):
        if iid is None or cap is None or int(iid) not in index.refs:
            missing += 1
            continue
        pairs.append((int(iid), cap))
    return pairs, missing


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """The shuffled order of epoch ``epoch``: a function of (seed, epoch) only, so a resumed
    run replays it exactly and can skip the batches already done."""
    rng = np.random.default_rng([int(seed), int(epoch)])
    return rng.permutation(n).tolist()


def label_counts(tokenizer, captions: Sequence[str], max_tokens: int,
                 chunk: int = 8192) -> list[int]:
    """Per caption, the tokens its loss is averaged over: the tokens :func:`make_collate`
    keeps (at most ``max_tokens``) less the first, which is the decoder's input only (BLIP
    predicts token i+1 from tokens up to i). Gradient accumulation weighs micro-batches by
    these counts (:mod:`capaudit.train_downstream.trainer`)."""
    # this runs in the training process before the DataLoader forks its workers: a fast
    # tokenizer's threads alive across a fork make each worker warn (and turn them off)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    counts: list[int] = []
    for start in range(0, len(captions), chunk):
        enc = tokenizer(list(captions[start:start + chunk]), truncation=True,
                        max_length=max_tokens)
        counts.extend(len(ids) - 1 for ids in enc["input_ids"])
    return counts


class PairDataset:
    """Map-style dataset of (pixel array, caption) for ``torch.utils.data.DataLoader``."""

    def __init__(self, pairs: list[tuple[int, str]], index: ShardIndex, pre: ImagePreprocessor):
        self.pairs, self.index, self.pre = pairs, index, pre

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int):
        iid, cap = self.pairs[i]
        try:
            return self.pre(self.index.read(iid)), cap
        except OSError as exc:  # PIL.UnidentifiedImageError is an OSError
            ref = self.index.refs[iid]
            raise InputError(f"image of sample '{ref.key}' cannot be decoded ({exc})",
                             path=ref.shard) from None


def make_collate(tokenizer, bos_token_id: int, max_tokens: int, pad_multiple: int | None = None):
    """Batch pixels and tokenise captions the way BLIP trains its decoder.

    The first token ([CLS] from the BERT tokenizer) is replaced by the decoder's bos
    ([DEC]) because that is what ``generate`` starts from; padding is ignored in the
    loss (-100); the final [SEP] is the end-of-caption token generation stops on.
    ``pad_multiple`` pads each batch to a multiple of that many tokens (a compiled model
    then sees a handful of shapes instead of one per caption length).
    """
    import torch

    def collate(batch):
        pixels = torch.from_numpy(np.stack([b[0] for b in batch]))
        enc = tokenizer([b[1] for b in batch], padding="longest", truncation=True,
                        max_length=max_tokens, return_tensors="pt",
                        pad_to_multiple_of=pad_multiple)
        ids = enc["input_ids"].clone()
        ids[:, 0] = bos_token_id
        labels = ids.masked_fill(enc["attention_mask"] == 0, -100)
        return {"pixel_values": pixels, "input_ids": ids,
                "attention_mask": enc["attention_mask"], "labels": labels}

    return collate
